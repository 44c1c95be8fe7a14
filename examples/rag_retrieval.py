"""RAG retrieval: chunk documents, index the chunks in embedded Qdrant Edge, retrieve context for questions.

The documents are this repository's own Markdown files (real text a user of this clone has), split into
overlapping word windows; each chunk keeps its source file and position in the payload so that an answer can cite
it. The retrieved context is what you would put in an LLM prompt.

    python examples/rag_retrieval.py ["your question" ...] [--docs README.md docs/training.md]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sbert_qdrant import SentenceEncoder, TextCollection, TextRecord

ROOT = Path(__file__).parent.parent
QUESTIONS = [
    "How do I run the test suite?",
    "Which engines can store a collection?",
    "What happens when I upsert the same texts twice?",
]


def chunks(path: Path, words: int, overlap: int) -> Iterator[TextRecord]:
    """Overlapping windows of ``words`` words over a Markdown file."""
    tokens = path.read_text(encoding="utf-8").split()
    step = words - overlap
    for number, start in enumerate(range(0, max(len(tokens) - overlap, 1), step)):
        text = " ".join(tokens[start : start + words])
        yield TextRecord(text, {"source": path.name, "chunk": number}, f"{path.name}#{number}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", nargs="*", default=QUESTIONS)
    parser.add_argument(
        "--docs", nargs="+", type=Path, default=sorted(ROOT.glob("*.md")) + sorted(ROOT.glob("docs/*.md"))
    )
    parser.add_argument("--words", type=int, default=80, help="words per chunk")
    parser.add_argument("--overlap", type=int, default=20, help="words shared by neighbouring chunks")
    parser.add_argument("--top", type=int, default=3, help="chunks of context per question")
    args = parser.parse_args()

    encoder = SentenceEncoder.load()
    with tempfile.TemporaryDirectory() as folder, TextCollection("docs", encoder, location=folder) as coll:
        for path in args.docs:
            coll.upsert_texts(chunks(path, args.words, args.overlap))
        print(f"indexed {coll.count()} chunks from {len(args.docs)} documents\n")
        for question, hits in zip(args.questions, coll.search_texts(args.questions, limit=args.top), strict=True):
            print(f"Q: {question}")
            for hit in hits:
                print(f"  [{hit.payload['source']} #{hit.payload['chunk']}, {hit.score:.2f}] {hit.text[:160]}…")
            print()


if __name__ == "__main__":
    main()
