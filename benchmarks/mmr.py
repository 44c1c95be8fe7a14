"""MMR's cost in relevance on BEIR SciFact, by how many candidates it picks among, in one run.

SciFact's corpus (``title + " " + text``) in one Qdrant Edge collection with BM25; the train split's claims, 10 hits
each: nDCG@10 of dense and hybrid search without MMR (the anchor), and with ``diversity=D`` picking among the default
candidates (twice the hits asked for, at least 20) and among fixed counts (100: the default before issue 53; 20:
LangChain's ``fetch_k``). MMR trades relevance for variety on purpose; this prints what each setting costs.

    python benchmarks/mmr.py --data ../shared/data [--diversity 0.5] [--docs N] [--queries N] [--precision auto]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _data import cpu_summary, read_scifact
from retrieval import ndcg_at_10

from sbert_qdrant import SentenceEncoder, TextCollection

LIMIT = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--diversity", type=float, default=0.5)
    parser.add_argument("--docs", type=int, default=None, help="first N abstracts only (quick run)")
    parser.add_argument("--queries", type=int, default=None, help="first N train claims only (quick run)")
    parser.add_argument("--precision", default="auto")
    args = parser.parse_args()
    doc_ids, texts, queries, qrels = read_scifact(args.data / "scifact", args.docs)
    asked = list(queries)[: args.queries]
    encoder = SentenceEncoder.load(device="cpu", precision=args.precision)
    print(cpu_summary())
    print(f"encoder {encoder!r}; {len(texts)} abstracts, {len(asked)} train claims, top {LIMIT}")
    with tempfile.TemporaryDirectory() as folder, TextCollection("scifact", encoder, location=folder) as coll:
        start = time.perf_counter()
        coll.upsert_texts(texts, ids=doc_ids, show_progress_bar=False)
        coll.optimize()
        print(f"(indexed in {time.perf_counter() - start:.0f} s)")
        settings: list[tuple[str, dict[str, object]]] = [
            ("no MMR (anchor)", {}),
            (f"diversity {args.diversity}, default candidates", {"diversity": args.diversity}),
            (f"diversity {args.diversity}, candidates 20", {"diversity": args.diversity, "candidates": 20}),
            (f"diversity {args.diversity}, candidates 100", {"diversity": args.diversity, "candidates": 100}),
        ]
        print(f"{'nDCG@10 x100':46}{'dense':>8}{'hybrid':>8}")
        anchors: dict[str, float] = {}
        for label, options in settings:
            row = []
            for mode in ("dense", "hybrid"):
                found = coll.search_texts([queries[q] for q in asked], LIMIT, mode=mode, with_payload=False, **options)
                score = 100 * float(
                    np.mean(
                        [ndcg_at_10([str(h.id) for h in hits], qrels[q]) for q, hits in zip(asked, found, strict=True)]
                    )
                )
                anchors.setdefault(mode, score)
                row.append(f"{score:6.2f} ({score - anchors[mode]:+.2f})" if options else f"{score:6.2f}")
            print(f"{label:46}" + "  ".join(f"{cell:>16}" for cell in row))


if __name__ == "__main__":
    main()
