"""Semantic search with payload filters: the same ``qdrant_client.models.Filter`` on every engine.

Indexes Quora questions with a few payload fields, declares a keyword index, and combines a text query with
filters (keyword match, numeric range, must_not).

    python examples/filtered_search.py [--engine edge|memory]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from qdrant_client import QdrantClient, models

from sbert_qdrant import SentenceEncoder, TextCollection

DATA = Path(__file__).parent / "data" / "quora_pairs_sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("edge", "memory"), default="edge")
    args = parser.parse_args()

    pairs = [json.loads(line) for line in DATA.open(encoding="utf-8")]
    questions = list(dict.fromkeys(q for p in pairs for q in (p["question1"], p["question2"])))
    payloads = [{"first_word": q.split()[0].lower().strip("?,"), "words": len(q.split())} for q in questions]

    with tempfile.TemporaryDirectory() as folder:
        engine = {"location": folder} if args.engine == "edge" else {"client": QdrantClient(":memory:")}
        coll = TextCollection(
            "questions",
            SentenceEncoder.load(),
            payload_indexes={"first_word": models.PayloadSchemaType.KEYWORD, "words": models.PayloadSchemaType.INTEGER},
            **engine,  # type: ignore[arg-type]
        )
        coll.upsert_texts(questions, payloads=payloads)
        query = "learning a programming language"
        filters = {
            "no filter": None,
            "starts with 'why'": models.Filter(
                must=[models.FieldCondition(key="first_word", match=models.MatchValue(value="why"))]
            ),
            "at most 8 words, not 'how'": models.Filter(
                must=[models.FieldCondition(key="words", range=models.Range(lte=8))],
                must_not=[models.FieldCondition(key="first_word", match=models.MatchValue(value="how"))],
            ),
        }
        for label, query_filter in filters.items():
            print(f"{query!r}, {label} ({coll.count(query_filter)} questions match the filter):")
            for hit in coll.search_text(query, limit=3, query_filter=query_filter):
                print(f"  {hit.score:.3f}  [{hit.payload['first_word']}, {hit.payload['words']} words]  {hit.text}")
            print()
        coll.close()


if __name__ == "__main__":
    main()
