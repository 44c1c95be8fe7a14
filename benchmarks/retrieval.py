"""Retrieval quality, search latency and ingestion cost of the search modes, each figure beside its anchor, in one run.

1. Ingestion: ``upsert_texts`` of BEIR SciFact's corpus (5,183 abstracts, ``title + " " + text``, BEIR's input for
   dense models) into two fresh Qdrant Edge collections, ``sparse=None`` (dense only, the anchor) and
   ``sparse="bm25"`` (dense + BM25 sparse vector); same encoder, same batches. The corpus is fed in chunks that
   alternate between the two in A-B-B-A order, the same texts into both, so drift in a shared machine's speed falls
   on both. Target: the sparse vector costs at most 10 % of ingestion throughput.
2. SciFact retrieval on the train split (809 claims; the test split is kept out of the shared data), one query at a
   time through ``search_text`` on the BM25 collection after ``optimize()``: nDCG@10 (binary relevance, ideal DCG over
   min(#relevant, 10), as pytrec_eval) and recall@100 for dense, sparse (BM25) and hybrid (rrf, dbsf), with p50/p95
   latency of each mode. Anchors: exact numpy cosine over the same stored vectors (dense mode must agree within
   0.5 nDCG points), and the published BM25 0.665 nDCG@10 on the *test* split (BEIR paper, Thakur et al. 2021) --
   our figures are on the train split, so that anchor compares only roughly.
3. Quora duplicate retrieval: held-out duplicate pairs, all their questions indexed; MRR@10 of the partner for each
   mode, beside exact numpy cosine over the same stored vectors.

    python benchmarks/retrieval.py --data ../shared/data [--precision fp32] [--docs N] [--queries N] [--quora-pairs N]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

import numpy as np
from _data import cpu_summary, exact_duplicate_rankings, mrr_at_10, read_quora_duplicate_probes, read_scifact

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.encoder.runtime import PRECISIONS

#: label -> (mode, fusion) of ``search_text``.
MODES: dict[str, tuple[Literal["dense", "sparse", "hybrid"], Literal["rrf", "dbsf"]]] = {
    "dense": ("dense", "rrf"),
    "sparse (BM25)": ("sparse", "rrf"),
    "hybrid rrf": ("hybrid", "rrf"),
    "hybrid dbsf": ("hybrid", "dbsf"),
}
#: BM25 nDCG@10 on SciFact's test split, BEIR paper (Thakur et al., 2021, table 2).
PUBLISHED_BM25 = 0.665
#: Most the sparse vector may take off ingestion throughput.
SPARSE_COST_TARGET = 0.10
#: Most exact and collection dense search may differ, in nDCG@10 points.
EXACT_TOLERANCE = 0.5


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    """nDCG@10 with binary relevance (pytrec_eval's ndcg_cut_10)."""
    dcg = sum(1 / np.log2(rank + 1) for rank, doc in enumerate(ranked[:10], 1) if doc in relevant)
    ideal = sum(1 / np.log2(rank + 1) for rank in range(1, min(len(relevant), 10) + 1))
    return float(dcg / ideal)


def recall_at_100(ranked: list[str], relevant: set[str]) -> float:
    return len(set(ranked[:100]) & relevant) / len(relevant)


def _scores(rankings: list[list[str]], qrels: list[set[str]]) -> tuple[float, float]:
    """Mean nDCG@10 and recall@100 over the queries."""
    pairs = list(zip(rankings, qrels, strict=True))
    return float(np.mean([ndcg_at_10(r, q) for r, q in pairs])), float(np.mean([recall_at_100(r, q) for r, q in pairs]))


def _percentiles(latencies: list[float]) -> str:
    ms = np.asarray(latencies) * 1000
    return f"p50 {np.percentile(ms, 50):7.2f} ms   p95 {np.percentile(ms, 95):7.2f} ms"


def ingestion(encoder: SentenceEncoder, ids: list[str], texts: list[str], chunk: int, root: Path) -> Path:
    """Time both collections' ingestion, interleaved; returns the folder of the BM25 one."""
    folders = {"none": root / "dense_only", "bm25": root / "bm25"}
    print(f"\n== 1. ingestion: {len(texts)} SciFact abstracts, upsert_texts into fresh Qdrant Edge collections ==")
    print(f"chunks of {chunk} abstracts alternate between the two collections in A-B-B-A order, the same texts into")
    print("both; each rate is all abstracts over the sum of its upsert_texts calls and its close (flush to disk).")
    encoder.encode_document(texts[:64], show_progress_bar=False)  # warm-up, not timed
    truncated = encoder.truncated_count
    collections = {
        kind: TextCollection(
            "scifact", encoder, location=folder, sparse=None if kind == "none" else "bm25", show_progress_bar=False
        )
        for kind, folder in folders.items()
    }
    took: dict[str, list[float]] = {"none": [], "bm25": []}
    starts = range(0, len(texts), chunk)
    try:
        for n, i in enumerate(starts):
            for kind in ("none", "bm25") if n % 2 == 0 else ("bm25", "none"):
                start = time.perf_counter()
                collections[kind].upsert_texts(texts[i : i + chunk], ids=ids[i : i + chunk])
                took[kind].append(time.perf_counter() - start)
            print(
                f"  chunk {n + 1:2d}/{len(starts)}: {len(texts[i : i + chunk])} abstracts   dense only "
                f"{took['none'][-1]:6.1f} s   dense + BM25 {took['bm25'][-1]:6.1f} s",
                flush=True,
            )
    except BaseException:
        for coll in collections.values():
            coll.close()
        raise
    cut = (encoder.truncated_count - truncated) // 2  # each abstract went into both collections
    print(
        f"({cut} of {len(texts)} abstracts are longer than max_seq_length={encoder.max_seq_length} tokens: truncated)"
    )
    closing = {}
    for kind, coll in collections.items():
        start = time.perf_counter()
        coll.close()
        closing[kind] = time.perf_counter() - start
    none_rate = len(texts) / (sum(took["none"]) + closing["none"])
    bm25_rate = len(texts) / (sum(took["bm25"]) + closing["bm25"])
    ratio = bm25_rate / none_rate
    chunk_ratios = np.asarray(took["none"]) / np.asarray(took["bm25"])
    print(f"sparse=None   (dense only)          {none_rate:8.1f} docs/s   (anchor)")
    print(f'sparse="bm25" (dense + BM25)        {bm25_rate:8.1f} docs/s   {ratio:.3f}x anchor')
    cost = 1 - ratio
    verdict = "met" if cost <= SPARSE_COST_TARGET else "NOT met"
    print(
        f"the BM25 sparse vector costs {100 * cost:+.1f} % of ingestion throughput "
        f"(target <= {100 * SPARSE_COST_TARGET:.0f} %): {verdict}"
    )
    print(
        f"  (per chunk, dense + BM25 / dense only throughput: median {np.median(chunk_ratios):.3f}x, "
        f"range {chunk_ratios.min():.3f}-{chunk_ratios.max():.3f}x)"
    )
    return folders["bm25"]


def _exact_dense(
    coll: TextCollection, encoder: SentenceEncoder, doc_ids: list[str], queries: list[str]
) -> tuple[list[list[str]], list[float], list[float]]:
    """Top 100 by exact numpy cosine over the collection's stored vectors; per-query encode and search latencies."""
    stored = coll.get(doc_ids, with_vectors=True)
    if [s.id for s in stored] != doc_ids:
        raise RuntimeError(f"get() returned {len(stored)} records for {len(doc_ids)} ids, or out of order")
    matrix = np.stack([np.asarray(s.vector, dtype=np.float32) for s in stored])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    rankings, encode_latency, search_latency = [], [], []
    k = min(100, len(doc_ids))
    for query in queries:
        start = time.perf_counter()
        vector = np.asarray(encoder.encode_query(query, show_progress_bar=False))
        encoded = time.perf_counter()
        scores = matrix @ (vector / np.linalg.norm(vector))
        top = np.argpartition(-scores, k - 1)[:k]
        rankings.append([doc_ids[j] for j in top[np.argsort(-scores[top], kind="stable")]])
        search_latency.append(time.perf_counter() - encoded)
        encode_latency.append(encoded - start)
    return rankings, encode_latency, search_latency


def scifact_search(
    folder: Path, encoder: SentenceEncoder, doc_ids: list[str], queries: dict[str, str], qrels: dict[str, set[str]]
) -> None:
    texts, relevant = list(queries.values()), [qrels[q] for q in queries]
    print(f"\n== 2. SciFact train split: {len(texts)} queries with judgements, {len(doc_ids)} abstracts ==")
    print(
        f"our figures are on the train split; the published BM25 {PUBLISHED_BM25} is on the test split (300 queries),"
    )
    print("so it compares only roughly. search_text runs one query at a time, limit 100, modes in rotating order;")
    print("its latency includes encoding the query (dense, hybrid) and its BM25 terms (sparse, hybrid).")
    with TextCollection("scifact", encoder, location=folder) as coll:
        start = time.perf_counter()
        coll.optimize()
        print(f"(optimize() of the BM25 collection: {time.perf_counter() - start:.1f} s)")
        exact, encode_latency, exact_latency = _exact_dense(coll, encoder, doc_ids, texts)
        labels = list(MODES)
        for mode, fusion in MODES.values():  # warm-up, not timed
            coll.search_text(texts[0], limit=100, with_payload=False, mode=mode, fusion=fusion)
        rankings: dict[str, list[list[str]]] = {label: [] for label in labels}
        latency: dict[str, list[float]] = {label: [] for label in labels}
        for n, query in enumerate(texts):
            for label in labels[n % len(labels) :] + labels[: n % len(labels)]:
                mode, fusion = MODES[label]
                start = time.perf_counter()
                hits = coll.search_text(query, limit=100, with_payload=False, mode=mode, fusion=fusion)
                latency[label].append(time.perf_counter() - start)
                rankings[label].append([str(h.id) for h in hits])
    ndcg = {label: _scores(rankings[label], relevant) for label in labels}
    exact_ndcg, exact_recall = _scores(exact, relevant)
    print(f"{'':36}nDCG@10  recall@100")
    print(f"{'BM25, BEIR paper (test split)':36}{PUBLISHED_BM25:7.3f}      -       (anchor: published)")
    print(f"{'exact numpy cosine, same vectors':36}{exact_ndcg:7.3f}  {exact_recall:7.3f}       (anchor: exact)")
    for label in labels:
        print(f"{'search_text ' + label:36}{ndcg[label][0]:7.3f}  {ndcg[label][1]:7.3f}")
    gap = 100 * (ndcg["dense"][0] - exact_ndcg)
    agree = "yes" if abs(gap) <= EXACT_TOLERANCE else "NO"
    print(f"dense search_text vs exact numpy: {gap:+.2f} nDCG points (must agree within {EXACT_TOLERANCE}): {agree}")
    for label in ("hybrid rrf", "hybrid dbsf"):
        print(
            f"{label}: {100 * (ndcg[label][0] - ndcg['dense'][0]):+.1f} nDCG points over dense, "
            f"{100 * (ndcg[label][0] - ndcg['sparse (BM25)'][0]):+.1f} over sparse BM25 (train), "
            f"{100 * (ndcg[label][0] - PUBLISHED_BM25):+.1f} over the published BM25 (test split)"
        )
    print("latency, one query at a time:")
    print(f"  {'query encoding alone':34}{_percentiles(encode_latency)}   (anchor)")
    print(f"  {'exact numpy search, encoded query':34}{_percentiles(exact_latency)}   (anchor)")
    dense_p50 = np.percentile(latency["dense"], 50)
    for label in labels:
        ratio = np.percentile(latency[label], 50) / dense_p50
        print(f"  {'search_text ' + label:34}{_percentiles(latency[label])}   p50 {ratio:.2f}x dense")


def quora(data: Path, encoder: SentenceEncoder, limit: int | None) -> None:
    probes, questions = read_quora_duplicate_probes(data, limit)
    print(f"\n== 3. Quora duplicate retrieval: {len(probes)} held-out duplicate pairs, {len(questions)} questions ==")
    keys = list(range(len(questions)))
    asked = [q for q, _ in probes]
    found: dict[str, list[list[str]]] = {}
    with tempfile.TemporaryDirectory() as folder, TextCollection("quora", encoder, location=folder) as coll:
        coll.upsert_texts(questions, ids=keys)
        coll.optimize()
        vectors = np.stack([np.asarray(s.vector, dtype=np.float32) for s in coll.get(keys, with_vectors=True)])
        for label, (mode, fusion) in MODES.items():
            results = coll.search_texts(asked, limit=11, with_payload=False, mode=mode, fusion=fusion)
            found[label] = [
                [questions[h.id] for h in hits if questions[h.id] != query]  # type: ignore[index]
                for query, hits in zip(asked, results, strict=True)
            ]
    exact = mrr_at_10(exact_duplicate_rankings(vectors, questions, probes), probes)
    print(f"{'MRR@10 exact numpy cosine (anchor)':42}{exact:.4f}")
    for label in MODES:
        mrr = mrr_at_10(found[label], probes)
        print(f"{'MRR@10 search_text ' + label:42}{mrr:.4f}   {mrr - exact:+.4f} vs exact")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS, help="encoder precision (CPU: not fp16)")
    parser.add_argument("--docs", type=int, default=None, help="first N SciFact abstracts only (quick run)")
    parser.add_argument("--queries", type=int, default=None, help="first N SciFact train queries only (quick run)")
    parser.add_argument("--quora-pairs", type=int, default=None, help="first N Quora duplicate pairs (quick run)")
    parser.add_argument("--chunk", type=int, default=400, help="abstracts per interleaved ingestion chunk")
    parser.add_argument("--quora", action=argparse.BooleanOptionalAction, default=True, help="run part 3")
    args = parser.parse_args()
    # every batch of long abstracts would warn of truncation; part 1 prints the count once instead
    logging.getLogger("sbert_qdrant.encoder.encoder").setLevel(logging.ERROR)
    began = time.perf_counter()
    encoder = SentenceEncoder.load(device="cpu", precision=args.precision)
    print(f"{sys.platform}, torch CPU, {cpu_summary()}\nencoder {encoder!r}, precision {args.precision}")
    doc_ids, texts, queries, qrels = read_scifact(args.data / "scifact", args.docs)
    if args.queries is not None:
        queries = dict(list(queries.items())[: args.queries])
    with tempfile.TemporaryDirectory() as root:
        folder = ingestion(encoder, doc_ids, texts, args.chunk, Path(root))
        scifact_search(folder, encoder, doc_ids, queries, qrels)
    if args.quora:
        quora(args.data, encoder, args.quora_pairs)
    print(f"\n(whole run {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
