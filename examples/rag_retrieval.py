"""RAG retrieval: index documents (chunked by the encoder's tokenizer) in embedded Qdrant Edge, retrieve quotable
context for questions with hybrid search.

The documents are this repository's own Markdown files (real text a user of this clone has). ``upsert_documents``
splits each file into chunks that fit the model, at sentence ends where it can; ``search_documents`` returns each
file once with its best chunks and their character offsets, so an answer can quote and cite them. The retrieved
context is what you would put in an LLM prompt. Re-running the indexing with a changed file replaces all its chunks.

    python examples/rag_retrieval.py ["your question" ...] [--docs README.md CHANGELOG.md] [--mode hybrid]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sbert_qdrant import SentenceEncoder, TextCollection

ROOT = Path(__file__).parent.parent
QUESTIONS = [
    "How do I run the test suite?",
    "Which engines can store a collection?",
    "What happens when I upsert the same texts twice?",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", nargs="*", default=QUESTIONS)
    parser.add_argument(
        "--docs", nargs="+", type=Path, default=sorted(ROOT.glob("*.md")) + sorted(ROOT.glob("docs/*.md"))
    )
    parser.add_argument("--chunk-tokens", type=int, default=128, help="tokens per chunk")
    parser.add_argument("--mode", choices=("dense", "sparse", "hybrid"), default="hybrid")
    parser.add_argument("--top", type=int, default=3, help="documents per question")
    parser.add_argument("--quotes", type=int, default=2, help="chunks quoted per document")
    args = parser.parse_args()

    encoder = SentenceEncoder.load()
    texts = {path.name: path.read_text(encoding="utf-8") for path in args.docs}
    with tempfile.TemporaryDirectory() as folder, TextCollection("docs", encoder, location=folder) as coll:
        coll.upsert_documents(list(texts.values()), ids=list(texts), chunk_tokens=args.chunk_tokens)
        print(f"indexed {coll.count(kind='documents')} documents as {coll.count(kind='chunks')} chunks\n")
        for question in args.questions:
            print(f"Q: {question}")
            hits = coll.search_documents(question, limit=args.top, mode=args.mode, chunks=args.quotes)
            for hit in hits:
                for chunk in hit.chunks:
                    quote = " ".join(texts[str(hit.id)][chunk.start : chunk.end].split())  # the offsets quote it
                    print(f"  [{hit.id} {chunk.start}:{chunk.end}, {chunk.score:.2f}] {quote[:160]}…")
            print()


if __name__ == "__main__":
    main()
