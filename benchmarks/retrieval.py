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
4. SciFact as documents: the same abstracts through ``upsert_documents`` (split with the encoder's tokenizer into
   chunks that fit the model, nothing truncated) vs the truncated texts of parts 1-2 (the anchor; reused when those
   parts ran, else built here, interleaved with the documents A-B-B-A). Ingestion in documents/s and tokens/s;
   nDCG@10 and recall@100 of ``search_documents(query, limit=100)`` (one hit per document, in its order) for dense
   and hybrid (dbsf, rrf), beside exact numpy search over the same chunk vectors (a document scores its best
   chunk), ``score="sum"`` vs ``"max"``, and a second chunk size (``--alt-chunk-tokens``, 0 skips it).

    python benchmarks/retrieval.py --data ../shared/data [--parts 1234] [--precision fp32] [--docs N] [--queries N]
        [--quora-pairs N] [--alt-chunk-tokens 128]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from _data import cpu_summary, exact_duplicate_rankings, mrr_at_10, read_quora_duplicate_probes, read_scifact

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.documents import DOCUMENT_KEY, chunk_point_id  # to read chunk vectors back for the exact anchor
from sbert_qdrant.store import EdgeStore, StoredRecord
from sbert_qdrant.types import PRECISIONS

#: label -> (mode, fusion) of ``search_text``.
MODES: dict[str, tuple[Literal["dense", "sparse", "hybrid"], Literal["rrf", "dbsf"]]] = {
    "dense": ("dense", "rrf"),
    "sparse (BM25)": ("sparse", "rrf"),
    "hybrid rrf": ("hybrid", "rrf"),
    "hybrid dbsf": ("hybrid", "dbsf"),
}
#: The modes part 4 compares, texts against documents.
DOCUMENT_MODES = ("dense", "hybrid dbsf", "hybrid rrf")
#: BM25 nDCG@10 on SciFact's test split, BEIR paper (Thakur et al., 2021, table 2).
PUBLISHED_BM25 = 0.665
#: Most the sparse vector may take off ingestion throughput.
SPARSE_COST_TARGET = 0.10
#: Most exact and collection dense search may differ, in nDCG@10 points.
EXACT_TOLERANCE = 0.5
#: Chunks listed per document hit (search_documents' default), summed by score="sum".
HIT_CHUNKS = 3


@dataclass
class TextsIngestion:
    """The truncated-texts BM25 collection on disk and what writing it took (its upsert_texts calls and close)."""

    folder: Path
    seconds: float
    where: str


#: label -> (nDCG@10, recall@100, p50 latency in seconds) of one way of searching.
Scores = dict[str, tuple[float, float, float]]


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


Write = Callable[[TextCollection, slice], object]


def _ingest(
    collections: dict[str, TextCollection], writes: dict[str, Write], total: int, chunk: int, unit: str
) -> tuple[dict[str, float], dict[str, list[float]], dict[str, int]]:
    """Feed ``total`` items in chunks to every collection, in rotating order (A-B, B-A, ... for two), and close them.

    Returns each collection's seconds (its writes and its close, a flush to disk), its seconds per chunk, and the
    texts the encoder truncated while writing it.
    """
    labels = list(collections)
    each: dict[str, list[float]] = {label: [] for label in labels}
    cut = dict.fromkeys(labels, 0)
    starts = range(0, total, chunk)
    try:
        for n, i in enumerate(starts):
            part = slice(i, min(i + chunk, total))
            for label in labels[n % len(labels) :] + labels[: n % len(labels)]:
                before = collections[label].encoder.truncated_count
                start = time.perf_counter()
                writes[label](collections[label], part)
                each[label].append(time.perf_counter() - start)
                cut[label] += collections[label].encoder.truncated_count - before
            line = "   ".join(f"{label} {each[label][-1]:6.1f} s" for label in labels)
            print(f"  chunk {n + 1:2d}/{len(starts)}: {part.stop - part.start} {unit}   {line}", flush=True)
    except BaseException:
        for coll in collections.values():
            coll.close()
        raise
    took = {}
    for label, coll in collections.items():
        start = time.perf_counter()
        coll.close()
        took[label] = sum(each[label]) + time.perf_counter() - start
    return took, each, cut


def _write_texts(ids: list[str], texts: list[str]) -> Write:
    return lambda coll, part: coll.upsert_texts(texts[part], ids=ids[part])


def _write_documents(ids: list[str], texts: list[str], chunk_tokens: int | None = None) -> Write:
    return lambda coll, part: coll.upsert_documents(texts[part], ids=ids[part], chunk_tokens=chunk_tokens)


def ingestion(encoder: SentenceEncoder, ids: list[str], texts: list[str], chunk: int, root: Path) -> TextsIngestion:
    """Time both collections' ingestion, interleaved; returns the BM25 one."""
    folders = {"none": root / "dense_only", "bm25": root / "bm25"}
    print(f"\n== 1. ingestion: {len(texts)} SciFact abstracts, upsert_texts into fresh Qdrant Edge collections ==")
    print(f"chunks of {chunk} abstracts alternate between the two collections in A-B-B-A order, the same texts into")
    print("both; each rate is all abstracts over the sum of its upsert_texts calls and its close (flush to disk).")
    encoder.encode_document(texts[:64], show_progress_bar=False)  # warm-up, not timed
    collections = {
        kind: TextCollection(
            "scifact", encoder, location=folder, sparse=None if kind == "none" else "bm25", show_progress_bar=False
        )
        for kind, folder in folders.items()
    }
    write = _write_texts(ids, texts)
    took, each, cut = _ingest(
        {"dense only": collections["none"], "dense + BM25": collections["bm25"]},
        {"dense only": write, "dense + BM25": write},
        len(texts),
        chunk,
        "abstracts",
    )
    print(
        f"({cut['dense only']} of {len(texts)} abstracts are longer than max_seq_length={encoder.max_seq_length} "
        "tokens: truncated)"
    )
    none_rate = len(texts) / took["dense only"]
    bm25_rate = len(texts) / took["dense + BM25"]
    ratio = bm25_rate / none_rate
    print(f"sparse=None   (dense only)          {none_rate:8.1f} docs/s   (anchor)")
    print(f'sparse="bm25" (dense + BM25)        {bm25_rate:8.1f} docs/s   {ratio:.3f}x anchor')
    cost = 1 - ratio
    verdict = "met" if cost <= SPARSE_COST_TARGET else "NOT met"
    print(
        f"the BM25 sparse vector costs {100 * cost:+.1f} % of ingestion throughput "
        f"(target <= {100 * SPARSE_COST_TARGET:.0f} %): {verdict}"
    )
    chunk_ratios = np.asarray(each["dense only"]) / np.asarray(each["dense + BM25"])
    print(
        f"  (per chunk, dense + BM25 / dense only throughput: median {np.median(chunk_ratios):.3f}x, "
        f"range {chunk_ratios.min():.3f}-{chunk_ratios.max():.3f}x)"
    )
    return TextsIngestion(folders["bm25"], took["dense + BM25"], "part 1, interleaved with dense only")


def build_texts(encoder: SentenceEncoder, ids: list[str], texts: list[str], chunk: int, root: Path) -> TextsIngestion:
    """The BM25 truncated-texts collection of part 1 when part 1 does not run (timed the same way, alone)."""
    folder = root / "bm25"
    encoder.encode_document(texts[:64], show_progress_bar=False)  # warm-up, not timed
    print(f"(part 1 not run: upsert_texts of the {len(texts)} abstracts into a dense + BM25 collection first)")
    coll = TextCollection("scifact", encoder, location=folder, show_progress_bar=False)
    write = {"truncated texts": _write_texts(ids, texts)}
    took, _, _ = _ingest({"truncated texts": coll}, write, len(texts), chunk, "abstracts")
    return TextsIngestion(folder, took["truncated texts"], "built alone before part 2")


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
) -> Scores:
    """Part 2; returns each search_text mode's figures (part 4 compares documents with them)."""
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
    return {label: (*ndcg[label], float(np.percentile(latency[label], 50))) for label in labels}


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


# -- part 4: documents -------------------------------------------------------------------------------------------------

#: label -> search of one query in a collection, returning document ids best first.
Search = Callable[[TextCollection, str], list[str]]


def _text_search(label: str) -> Search:
    mode, fusion = MODES[label]
    return lambda coll, query: [
        str(h.id) for h in coll.search_text(query, limit=100, with_payload=False, mode=mode, fusion=fusion)
    ]


def _document_search(label: str, score: Literal["max", "sum"] = "max") -> Search:
    mode, fusion = MODES[label]
    return lambda coll, query: [
        str(h.id) for h in coll.search_documents(query, limit=100, mode=mode, fusion=fusion, score=score)
    ]


def _search_all(
    folder: Path, encoder: SentenceEncoder, searches: dict[str, Search], queries: list[str], relevant: list[set[str]]
) -> tuple[Scores, float]:
    """Every search of every query, one at a time in rotating order, after optimize(); figures and optimize seconds."""
    labels = list(searches)
    rankings: dict[str, list[list[str]]] = {label: [] for label in labels}
    latency: dict[str, list[float]] = {label: [] for label in labels}
    with TextCollection("scifact", encoder, location=folder) as coll:
        start = time.perf_counter()
        coll.optimize()
        optimized = time.perf_counter() - start
        for search in searches.values():  # warm-up, not timed
            search(coll, queries[0])
        for n, query in enumerate(queries):
            for label in labels[n % len(labels) :] + labels[: n % len(labels)]:
                start = time.perf_counter()
                ranked = searches[label](coll, query)
                latency[label].append(time.perf_counter() - start)
                if len(ranked) != len(set(ranked)):
                    raise RuntimeError(f"{label}: a document came back twice for {query!r}: {ranked}")
                rankings[label].append(ranked)
    scores = {
        label: (*_scores(rankings[label], relevant), float(np.percentile(latency[label], 50))) for label in labels
    }
    return scores, optimized


def _stored_chunks(folder: Path, doc_ids: list[str], with_vectors: bool) -> tuple[list[int], list[StoredRecord]]:
    """Each document's chunk count and all its chunk points, in document and chunk order, read from the Edge store
    itself (a collection's text reads never return chunks)."""
    store = EdgeStore(folder)
    try:
        by_id = {r.id: r for r in store.retrieve("scifact", "text", [chunk_point_id(d, 0) for d in doc_ids], False)}
        firsts = [by_id[chunk_point_id(d, 0)] for d in doc_ids if chunk_point_id(d, 0) in by_id]
        if len(firsts) != len(doc_ids):
            raise RuntimeError(f"found {len(firsts)} first chunks of {len(doc_ids)} documents")
        counts = [int((s.payload or {})[DOCUMENT_KEY]["chunks"]) for s in firsts]
        wanted = [chunk_point_id(d, i) for d, c in zip(doc_ids, counts, strict=True) for i in range(c)]
        found = {r.id: r for r in store.retrieve("scifact", "text", wanted, with_vectors)}
    finally:
        store.close()
    if len(found) != sum(counts):
        raise RuntimeError(f"found {len(found)} of the {sum(counts)} chunks the documents list")
    return counts, [found[point] for point in wanted]


def _exact_documents(
    folder: Path, encoder: SentenceEncoder, doc_ids: list[str], queries: list[str]
) -> tuple[list[list[str]], list[list[str]]]:
    """Exact numpy cosine over the stored chunk vectors: the top 100 documents by their best chunk ("max"), and those
    re-ranked by the sum of their best ``HIT_CHUNKS`` chunks ("sum"), as search_documents defines them."""
    counts, chunks = _stored_chunks(folder, doc_ids, with_vectors=True)
    matrix = np.stack([np.asarray(c.vector, dtype=np.float32) for c in chunks])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    owner = np.repeat(np.arange(len(doc_ids)), counts)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    vectors = np.asarray(encoder.encode_query(queries, show_progress_bar=False), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    k = min(100, len(doc_ids))
    by_max, by_sum = [], []
    for scores in vectors @ matrix.T:
        best = np.maximum.reduceat(scores, first)
        order = np.lexsort((-scores, owner))  # each document's chunks, best first
        rank = np.arange(len(scores)) - first[owner[order]]
        total = np.zeros(len(doc_ids))
        np.add.at(total, owner[order][rank < HIT_CHUNKS], scores[order][rank < HIT_CHUNKS])
        top = np.argsort(-best, kind="stable")[:k]
        by_max.append([doc_ids[j] for j in top])
        by_sum.append([doc_ids[j] for j in top[np.argsort(-total[top], kind="stable")]])
    return by_max, by_sum


def documents(
    encoder: SentenceEncoder,
    doc_ids: list[str],
    texts: list[str],
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    chunk: int,
    alt_tokens: int,
    root: Path,
    built: TextsIngestion | None,
    text_scores: Scores | None,
) -> None:
    began = time.perf_counter()
    asked, relevant = list(queries.values()), [qrels[q] for q in queries]
    tokenizer = encoder.transformer.tokenizer
    # what the encoder reads of a document: max_seq_length less its special tokens and document prompt (as the
    # collection's default chunk size)
    room = encoder.max_seq_length - (len(tokenizer(encoder.document_prompt + "x", verbose=False)["input_ids"]) - 1)
    lengths = np.asarray([len(t) for t in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]])
    print(f"\n== 4. SciFact as documents: {len(texts)} abstracts, {len(asked)} train queries ==")
    print(
        f"{lengths.sum():,} tokens ({np.median(lengths):.0f} median, {lengths.max()} most per abstract); "
        f"{(lengths > room).sum()} abstracts exceed the {room} tokens the encoder reads"
    )
    print(
        f"(max_seq_length {encoder.max_seq_length} less special tokens and prompt): upsert_texts truncates them, "
        "upsert_documents splits them"
    )
    print("into chunks of at most that many tokens (the default chunk_tokens), neighbours sharing an eighth of one.")
    print("Each rate is all abstracts over the sum of its calls and its close; tokens counted outside the timed part.")
    print(f"search_documents(query, limit=100): one hit per document, ranked in its order ({HIT_CHUNKS} chunks a hit).")
    folders = {"documents": root / "documents", f"chunk_tokens={alt_tokens}": root / f"documents_{alt_tokens}"}
    writes = {
        "documents": _write_documents(doc_ids, texts),
        f"chunk_tokens={alt_tokens}": _write_documents(doc_ids, texts, alt_tokens),
    }
    if not alt_tokens:
        del folders[f"chunk_tokens={alt_tokens}"], writes[f"chunk_tokens={alt_tokens}"]
    if built is None:  # the anchor, interleaved with the documents
        folders = {"truncated texts": root / "bm25", **folders}
        writes = {"truncated texts": _write_texts(doc_ids, texts), **writes}
    encoder.encode_document(texts[:64], show_progress_bar=False)  # warm-up, not timed
    collections = {
        label: TextCollection("scifact", encoder, location=folder, show_progress_bar=False)
        for label, folder in folders.items()
    }
    if len(collections) == 1:
        print(f"in chunks of {chunk} abstracts:")
    else:
        order = "A-B-B-A" if len(collections) == 2 else "rotating"
        print(f"chunks of {chunk} abstracts go into the {len(collections)} collections in {order} order:")
    took, _, cut = _ingest(collections, writes, len(texts), chunk, "abstracts")
    if built is None:
        built = TextsIngestion(folders["truncated texts"], took.pop("truncated texts"), "interleaved above")
    points = {}
    encoded = {}
    for label, folder in folders.items():
        if label == "truncated texts":
            continue
        _, chunks = _stored_chunks(folder, doc_ids, with_vectors=False)
        points[label] = len(chunks)
        texts_of = [(c.payload or {}).get("text") or "" for c in chunks]
        encoded[label] = sum(len(t) for t in tokenizer(texts_of, add_special_tokens=False)["input_ids"])
    kept = int(np.minimum(lengths, room).sum())
    texts_rate = len(texts) / built.seconds
    print(f"{'ingestion (dense + BM25)':40}{'docs/s':>8}{'tokens/s':>10}{'tokens':>11}{'points':>8}")
    print(
        f"{'truncated texts, upsert_texts':40}{texts_rate:8.1f}{kept / built.seconds:10.0f}{kept:11,}{len(texts):8}"
        f"   (anchor: {built.where}; tokens encoded, after truncation)"
    )
    for label, seconds in took.items():
        name = f"documents, {room}-token chunks" if label == "documents" else f"documents, {label}"
        rate = len(texts) / seconds
        print(
            f"{name:40}{rate:8.1f}{lengths.sum() / seconds:10.0f}{lengths.sum():11,}{points[label]:8}"
            f"   {rate / texts_rate:.3f}x anchor docs/s; tokens of the whole abstracts"
        )
        print(
            f"{'':40}{'':8}{encoded[label] / seconds:10.0f}{encoded[label]:11,}"
            f"   tokens encoded (chunks, overlap included); {cut[label]} chunks truncated"
        )
    reused = "" if text_scores is None else "; truncated texts: part 2's figures"
    print(f"(optimize() then search, one query at a time, searches in rotating order{reused})")
    if text_scores is None:
        text_scores, _ = _search_all(
            built.folder, encoder, {label: _text_search(label) for label in DOCUMENT_MODES}, asked, relevant
        )
    doc_searches = {label: _document_search(label) for label in DOCUMENT_MODES}
    doc_searches['dense, score="sum"'] = _document_search("dense", "sum")
    doc_scores, optimized = _search_all(folders["documents"], encoder, doc_searches, asked, relevant)
    exact_max, exact_sum = _exact_documents(folders["documents"], encoder, doc_ids, asked)
    alt_scores: Scores = {}
    if alt_tokens:
        alt = {label: _document_search(label) for label in ("dense", "hybrid dbsf")}
        alt['dense, score="sum"'] = _document_search("dense", "sum")
        alt_scores, _ = _search_all(folders[f"chunk_tokens={alt_tokens}"], encoder, alt, asked, relevant)
    exact = {"max": _scores(exact_max, relevant), "sum": _scores(exact_sum, relevant)}

    def row(name: str, figures: tuple[float, ...], note: str = "") -> None:
        latency = f"{1000 * figures[2]:8.1f} ms" if len(figures) > 2 else f"{'-':>11}"
        print(f"{name:56}{figures[0]:7.3f}  {figures[1]:7.3f}   {latency}   {note}".rstrip())

    print(f"{'':56}nDCG@10  recall@100  p50 latency")
    for label in DOCUMENT_MODES:
        row(f"truncated texts, search_text {label}", text_scores[label], "(anchor)")
    row("exact numpy, documents by best chunk", exact["max"], "(anchor: exact, same chunk vectors)")
    row(f"exact numpy, by sum of best {HIT_CHUNKS} chunks", exact["sum"], "(anchor: exact)")
    for label, figures in doc_scores.items():
        row(f"documents, search_documents {label}", figures)
    for label, figures in alt_scores.items():
        row(f"chunk_tokens={alt_tokens}, search_documents {label}", figures)
    print(f"(optimize() of the documents collection: {optimized:.1f} s)")

    def points_of(a: float, b: float) -> str:
        return f"{100 * (a - b):+.1f}"

    gaps = {label: doc_scores[label][0] - text_scores[label][0] for label in DOCUMENT_MODES}
    print(
        "documents - truncated texts, nDCG@10 points: "
        + ", ".join(f"{label} {100 * gaps[label]:+.1f}" for label in DOCUMENT_MODES)
        + "; recall@100 points: "
        + ", ".join(f"{label} {points_of(doc_scores[label][1], text_scores[label][1])}" for label in DOCUMENT_MODES)
    )
    gap = 100 * (doc_scores["dense"][0] - exact["max"][0])
    agree = "yes" if abs(gap) <= EXACT_TOLERANCE else "NO"
    print(
        f"dense search_documents vs exact numpy: {gap:+.2f} nDCG points (must agree within {EXACT_TOLERANCE}): {agree}"
    )
    gap = 100 * (doc_scores['dense, score="sum"'][0] - exact["sum"][0])
    agree = "yes" if abs(gap) <= EXACT_TOLERANCE else "NO"
    print(f'dense score="sum" vs exact numpy sum: {gap:+.2f} nDCG points (within {EXACT_TOLERANCE}): {agree}')
    print(
        f"chunked documents >= truncated texts in dense nDCG@10 (train): {'yes' if gaps['dense'] >= 0 else 'NO'} "
        f"({doc_scores['dense'][0]:.3f} vs {text_scores['dense'][0]:.3f})"
    )
    for label in ("hybrid dbsf", "hybrid rrf"):
        held = "yes" if gaps[label] >= 0 else "NO"
        default = ", the default fusion" if label == "hybrid dbsf" else ""
        print(
            f"hybrid over documents >= hybrid over truncated texts ({label.split()[1]}{default}, train): {held} "
            f"({doc_scores[label][0]:.3f} vs {text_scores[label][0]:.3f})"
        )
    summed = doc_scores['dense, score="sum"'][0] - doc_scores["dense"][0]
    better = "sum" if summed > 0 else "max"
    print(f'score="sum" - score="max" (dense documents): {100 * summed:+.1f} nDCG points: "{better}" ranks better')
    if alt_tokens:
        for label in ("dense", "hybrid dbsf"):
            diff = alt_scores[label][0] - doc_scores[label][0]
            better = f"chunk_tokens={alt_tokens}" if diff > 0 else f"the default {room}"
            print(
                f"chunk_tokens={alt_tokens} - default {room} ({label}): {100 * diff:+.1f} nDCG points, "
                f"{points_of(alt_scores[label][1], doc_scores[label][1])} recall@100 points: {better} ranks better"
            )
    print(f"(part 4: {time.perf_counter() - began:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--parts", default="1234", help="which parts to run, e.g. 4 or 124 (default: all)")
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS, help="encoder precision (CPU: not fp16)")
    parser.add_argument("--docs", type=int, default=None, help="first N SciFact abstracts only (quick run)")
    parser.add_argument("--queries", type=int, default=None, help="first N SciFact train queries only (quick run)")
    parser.add_argument("--quora-pairs", type=int, default=None, help="first N Quora duplicate pairs (quick run)")
    parser.add_argument("--chunk", type=int, default=400, help="abstracts per interleaved ingestion chunk")
    parser.add_argument(
        "--alt-chunk-tokens", type=int, default=128, help="part 4: second chunk size to compare (0: none)"
    )
    parser.add_argument(
        "--quora", action=argparse.BooleanOptionalAction, default=True, help="--no-quora: leave part 3 out"
    )
    args = parser.parse_args()
    if not args.parts or set(args.parts) - set("1234"):
        parser.error(f"--parts {args.parts!r}: digits 1 to 4 only")
    parts = set(args.parts) - (set() if args.quora else {"3"})
    # every batch of long abstracts would warn of truncation; part 1 prints the count once instead
    logging.getLogger("sbert_qdrant.encoder.encoder").setLevel(logging.ERROR)
    began = time.perf_counter()
    encoder = SentenceEncoder.load(device="cpu", precision=args.precision)
    print(f"{sys.platform}, torch CPU, {cpu_summary()}\nencoder {encoder!r}, precision {args.precision}")
    print(f"parts {''.join(sorted(parts))}")
    if parts & {"1", "2", "4"}:
        doc_ids, texts, queries, qrels = read_scifact(args.data / "scifact", args.docs)
        if args.queries is not None:
            queries = dict(list(queries.items())[: args.queries])
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            built = ingestion(encoder, doc_ids, texts, args.chunk, root) if "1" in parts else None
            scores = None
            if "2" in parts:
                built = built or build_texts(encoder, doc_ids, texts, args.chunk, root)
                scores = scifact_search(built.folder, encoder, doc_ids, queries, qrels)
            if "3" in parts:  # before part 4, as before it existed
                quora(args.data, encoder, args.quora_pairs)
            if "4" in parts:
                documents(
                    encoder, doc_ids, texts, queries, qrels, args.chunk, args.alt_chunk_tokens, root, built, scores
                )
    elif "3" in parts:
        quora(args.data, encoder, args.quora_pairs)
    print(f"\n(whole run {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
