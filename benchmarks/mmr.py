"""MMR's cost in relevance on BEIR SciFact, in one run: by how many candidates it picks among, and after a fusion.

SciFact's corpus (``title + " " + text``) as texts with BM25; the train split's claims, 10 hits each.

``--section candidates``: one Qdrant Edge collection; nDCG@10 of dense and hybrid search without MMR (the anchor),
and with ``diversity=D`` picking among the default candidates (twice the hits asked for, at least 20) and among
fixed counts (100: the default before issue 53; 20: LangChain's ``fetch_k``).

``--section fusion`` (issue 64): MMR after hybrid (and sparse) re-orders the fused candidates by their fused
relevance; nDCG@10 of hybrid, hybrid + MMR D, dense, dense + MMR D, sparse and sparse + MMR D for each D of
``--diversities``, on Qdrant Edge and on qdrant-client's local mode (the same vectors, encoded once), each beside
its anchor without MMR (target: hybrid + MMR 0.2 within 1.5 of hybrid). MMR trades relevance for variety on
purpose; this prints what each setting costs.

    python benchmarks/mmr.py --data ../shared/data [--section all|candidates|fusion] [--diversity 0.5]
        [--diversities 0.2,0.5] [--docs N] [--queries N] [--precision auto]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _data import cpu_summary, read_scifact
from qdrant_client import QdrantClient
from retrieval import ndcg_at_10

from sbert_qdrant import SentenceEncoder, TextCollection

LIMIT = 10


def ndcg(
    coll: TextCollection, asked: list[str], queries: dict[str, str], qrels: dict[str, set[str]], **options: object
) -> float:
    """Mean nDCG@10 x 100 of the claims ``asked``."""
    found = coll.search_texts([queries[q] for q in asked], LIMIT, with_payload=False, **options)  # type: ignore[arg-type]
    return 100 * float(
        np.mean([ndcg_at_10([str(h.id) for h in hits], qrels[q]) for q, hits in zip(asked, found, strict=True)])
    )


def after_fusion(
    encoder: SentenceEncoder,
    data: tuple[list[str], list[str], dict[str, str], dict[str, set[str]]],
    asked: list[str],
    diversities: list[float],
) -> None:
    """MMR after each mode, on Qdrant Edge and local mode, beside each mode without MMR."""
    doc_ids, texts, queries, qrels = data
    start = time.perf_counter()
    vectors = encoder.encode_document(texts, batch_size=32)
    print(f"(encoded {len(texts)} abstracts in {time.perf_counter() - start:.0f} s)")
    header = f"{'nDCG@10 x100':28}" + "".join(f"{name:>22}" for name in ("Qdrant Edge", "local mode"))
    rows: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as folder:
        engines = [{"location": folder}, {"client": QdrantClient(":memory:")}]  # the header's order
        for engine in engines:
            with TextCollection("scifact", encoder, **engine) as coll:  # type: ignore[arg-type]
                coll.upsert_texts(
                    texts, ids=doc_ids, vectors=vectors, vectors_from=encoder.identity, show_progress_bar=False
                )
                coll.optimize()
                for mode in ("hybrid", "dense", "sparse"):
                    anchor = ndcg(coll, asked, queries, qrels, mode=mode)
                    rows.setdefault(mode, []).append(f"{anchor:6.2f}")
                    for diversity in diversities:
                        score = ndcg(coll, asked, queries, qrels, mode=mode, diversity=diversity)
                        rows.setdefault(f"{mode} + MMR {diversity:g}", []).append(
                            f"{score:6.2f} ({score - anchor:+.2f})"
                        )
    print(header)
    for label, cells in rows.items():
        print(f"{label:28}" + "".join(f"{cell:>22}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--diversity", type=float, default=0.5)
    parser.add_argument("--docs", type=int, default=None, help="first N abstracts only (quick run)")
    parser.add_argument("--queries", type=int, default=None, help="first N train claims only (quick run)")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--section", choices=("all", "candidates", "fusion"), default="all")
    parser.add_argument("--diversities", default="0.2,0.5", help="fusion section: the diversities, comma-separated")
    args = parser.parse_args()
    data = read_scifact(args.data / "scifact", args.docs)
    doc_ids, texts, queries, qrels = data
    asked = list(queries)[: args.queries]
    encoder = SentenceEncoder.load(device="cpu", precision=args.precision)
    print(cpu_summary())
    print(f"encoder {encoder!r}; {len(texts)} abstracts, {len(asked)} train claims, top {LIMIT}")
    if args.section in ("all", "fusion"):
        after_fusion(encoder, data, asked, [float(d) for d in args.diversities.split(",")])
    if args.section == "fusion":
        return
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
