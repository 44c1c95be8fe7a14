"""Text collections end to end, each figure beside its anchor, in one run on this machine.

1. Ingestion: ``upsert_texts`` of N Quora questions into embedded Qdrant Edge vs encoding alone (same encoder), and
   vs a hand-written loop of sentence-transformers ``encode`` + qdrant-client ``upsert`` in batches of 64.
2. Search: ``search_text`` p50/p95 latency on M real sentences in Qdrant Edge after ``optimize()`` vs exact numpy
   search over the same vectors, with recall@10 against the exact result.
3. The same search on qdrant-client's local mode (exact search in Python), the other embedded engine.
4. Quora duplicate retrieval: held-out duplicate pairs, all their questions indexed; MRR@10 of the partner through
   ``search_text`` vs exact numpy cosine over the same vectors.

    python benchmarks/collection_speed.py --data ../shared/data [--ingest 20000] [--points 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _data import (
    cpu_summary,
    exact_duplicate_rankings,
    mrr_at_10,
    read_corpus,
    read_quora_duplicate_probes,
    read_quora_questions,
)
from qdrant_client import QdrantClient, models
from sentence_transformers import SentenceTransformer

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.encoder.loading import resolve_model_folder
from sbert_qdrant.records import text_id
from sbert_qdrant.store import ClientStore, CollectionSpec, EdgeStore, VectorSpec
from sbert_qdrant.store.base import PointVectors
from sbert_qdrant.store.calls import StoreWrite


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:8.1f} texts/s"


def _encode_only(encoder: SentenceEncoder, questions: list[str]) -> float:
    start = time.perf_counter()
    encoder.encode(questions, batch_size=32, show_progress_bar=False)
    return time.perf_counter() - start


def _upsert_into_edge(encoder: SentenceEncoder, questions: list[str]) -> float:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        with TextCollection("bench", encoder, location=folder, show_progress_bar=False) as coll:
            coll.upsert_texts(questions)
        took = time.perf_counter() - start  # closing (flush to disk) included
        with TextCollection("bench", encoder, location=folder) as coll:
            assert coll.count() == len(questions)
    return took


def _hand_loop(questions: list[str]) -> float:
    reference = SentenceTransformer(str(resolve_model_folder(None)), device="cpu")
    client = QdrantClient(":memory:")
    start = time.perf_counter()
    client.create_collection("bench", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE))
    for i in range(0, len(questions), 64):
        batch = questions[i : i + 64]
        vectors = reference.encode(batch, batch_size=64)
        points = [
            models.PointStruct(id=text_id(t), vector=v.tolist(), payload={"text": t})
            for t, v in zip(batch, vectors, strict=True)
        ]
        client.upsert("bench", points=points)
    took = time.perf_counter() - start
    assert client.count("bench").count == len(questions)
    return took


def ingestion(data: Path, count: int, encoder: SentenceEncoder) -> None:
    questions = read_quora_questions(data / "quora" / "quora_pairs_train.jsonl.gz", count)
    n = len(questions)
    print(f"\n== 1. ingestion of {n} Quora questions (fp32, CPU) ==")
    print("encode-only and upsert_texts run twice each, in A-B-B-A order so that drift in the machine's speed")
    print("falls on both; the hand loop runs once (its margin is wide). Each run covers all the questions.")
    encoder.encode(questions[:256], show_progress_bar=False)  # warm-up, not timed
    encode_only = [_encode_only(encoder, questions)]
    ours = [_upsert_into_edge(encoder, questions), _upsert_into_edge(encoder, questions)]
    encode_only.append(_encode_only(encoder, questions))
    hand = _hand_loop(questions)
    for label, times in (("encode only (sbert-qdrant)", encode_only), ("upsert_texts into Edge", ours)):
        print(f"  runs of {label:<27} " + "  ".join(_rate(n, t) for t in times))
    a, b = sum(encode_only) / 2, sum(ours) / 2
    print(f"encode only (sbert-qdrant)                       {_rate(n, a)}   (anchor A, mean of 2)")
    print(f"hand loop: ST encode + qdrant-client, batches 64 {_rate(n, hand)}   (anchor B)")
    print(
        f"upsert_texts into Qdrant Edge on disk            {_rate(n, b)}   "
        f"{a / b:.2f}x A (target >= 0.9)   {hand / b:.2f}x B (target >= 1.5)"
    )


def _percentiles(latencies: list[float]) -> str:
    ms = np.asarray(latencies) * 1000
    return f"p50 {np.percentile(ms, 50):7.2f} ms   p95 {np.percentile(ms, 95):7.2f} ms"


def _exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> tuple[list[list[int]], list[float]]:
    tops, latencies = [], []
    for query in queries:
        start = time.perf_counter()
        scores = matrix @ query
        top = np.argpartition(-scores, k)[:k]
        tops.append(top[np.argsort(-scores[top])].tolist())
        latencies.append(time.perf_counter() - start)
    return tops, latencies


def _timed_search(coll: TextCollection, queries: list[str], ids: dict[str, int], k: int) -> tuple[list, list]:
    tops, latencies = [], []
    for query in queries:
        start = time.perf_counter()
        hits = coll.search_text(query, limit=k, with_payload=False)
        latencies.append(time.perf_counter() - start)
        tops.append([ids[h.id] for h in hits])
    return tops, latencies


def _recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact, strict=True)]))


def search(data: Path, count: int, queries: int, encoder: SentenceEncoder, index_precision: str) -> None:
    corpus = read_corpus(data, count + queries)
    stored, asked = corpus[:count], corpus[count : count + queries]
    print(f"\n== 2/3. search_text on {len(stored)} real sentences, {len(asked)} held-out queries, top 10 ==")
    indexer = SentenceEncoder.load(device="cpu", precision=index_precision)  # type: ignore[arg-type]
    start = time.perf_counter()
    matrix = np.asarray(indexer.encode(stored, batch_size=64))
    took = time.perf_counter() - start
    print(f"(encoded the {len(stored)} points with the {index_precision} encoder in {took:.0f} s)")
    ids = {text_id(t): i for i, t in enumerate(stored)}
    query_vectors = np.asarray(encoder.encode(asked))
    exact, exact_latency = _exact_top(matrix, query_vectors, 10)
    encode_latency = []
    for query in asked:
        start = time.perf_counter()
        encoder.encode(query)
        encode_latency.append(time.perf_counter() - start)
    print(f"query encoding alone                  {_percentiles(encode_latency)}")
    print(f"exact numpy search (vectors only)     {_percentiles(exact_latency)}   (anchor)")

    payloads = [{"text": t} for t in stored]
    id_list = [text_id(t) for t in stored]
    with tempfile.TemporaryDirectory() as folder:
        for label, engine in (("Qdrant Edge, HNSW", {"location": folder}), ("qdrant-client local", {})):
            client = None if engine else QdrantClient(":memory:")
            # the vectors are already made: write them through the store, as upsert_texts would
            store = EdgeStore(folder) if client is None else ClientStore(client, close_client=False)
            coll = TextCollection("bench", encoder, client=client, **engine)  # type: ignore[arg-type]
            start = time.perf_counter()
            store.create(CollectionSpec("bench", {"text": VectorSpec(matrix.shape[1], "cosine")}))
            for i in range(0, len(stored), 1000):
                vectors = PointVectors({"text": matrix[i : i + 1000]})
                store.upsert("bench", StoreWrite(id_list[i : i + 1000], vectors, payloads[i : i + 1000]))
            coll.optimize()
            load = time.perf_counter() - start
            found, latency = _timed_search(coll, asked, ids, 10)
            print(
                f"search_text, {label:<19} {_percentiles(latency)}   recall@10 {_recall(found, exact):.3f}"
                f"   (load + optimize {load:.0f} s)"
            )
            coll.close()
            store.close()


def duplicate_retrieval(data: Path, encoder: SentenceEncoder) -> None:
    probes, questions = read_quora_duplicate_probes(data)
    print(f"\n== 4. Quora duplicate retrieval: {len(probes)} held-out duplicate pairs, {len(questions)} questions ==")
    with tempfile.TemporaryDirectory() as folder, TextCollection("quora", encoder, location=folder) as coll:
        coll.upsert_texts(questions)
        coll.optimize()
        results = coll.search_texts([q for q, _ in probes], limit=11)
        vectors = np.asarray(encoder.encode(questions))
    found = [[h.text for h in hits if h.text != query] for (query, _), hits in zip(probes, results, strict=True)]
    ours = mrr_at_10(found, probes)  # type: ignore[arg-type]
    exact = mrr_at_10(exact_duplicate_rankings(vectors, questions, probes), probes)
    print(f"MRR@10 exact numpy cosine (anchor)    {exact:.4f}")
    difference = ours - exact
    print(f"MRR@10 through search_text (Edge)     {ours:.4f}   difference {difference:+.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--ingest", type=int, default=20_000, help="Quora questions for part 1")
    parser.add_argument("--points", type=int, default=100_000, help="stored sentences for parts 2 and 3")
    parser.add_argument("--queries", type=int, default=200, help="search queries for parts 2 and 3")
    parser.add_argument("--index-precision", default="int8", help="encoder precision for the part 2 points")
    parser.add_argument("--parts", default="1234", help="which parts to run")
    args = parser.parse_args()
    encoder = SentenceEncoder.load(device="cpu")
    print(f"{sys.platform}, torch CPU, {cpu_summary()}\nencoder {encoder!r}")
    if "1" in args.parts:
        ingestion(args.data, args.ingest, encoder)
    if "2" in args.parts or "3" in args.parts:
        search(args.data, args.points, args.queries, encoder, args.index_precision)
    if "4" in args.parts:
        duplicate_retrieval(args.data, encoder)


if __name__ == "__main__":
    main()
