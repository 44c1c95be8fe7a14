"""The GPU's host side alone, on any CPU (issue 62): what the host can feed and write per second, printed beside what
the GPU targets need, so that a slow host shows here before a GPU is lent.

1. The feed (tokenizing + collating token-budget batches, no model), short sentences (STS-B + Quora) and SciFact
   abstracts cut at 256 tokens: texts/s on one core (a child process pinned to one CPU, one tokenizer thread) and on
   every core, ``--rounds`` rounds, best; the CPU per text that holds the GIL (the feed's Python threads' own CPU
   time: what does not scale with cores); beside it, the anchor: the tokenizer called per batch on the caller's
   thread, as sentence-transformers does.
2. Ingestion with the vectors given (no model), BM25 on, into an embedded Qdrant Edge collection: points/s wall, host
   CPU per point, and per point by stage (record checks, BM25 term weights, Edge's point objects, Edge's update),
   beside the anchor: the engine alone (points built from Python lists, one update per 4,096), the floor any wrapper
   pays.
3. Device syncs counted on the CPU (``testing.DeviceSyncCounter``): in a steady-state encode batch and per training
   step.
4. ``upsert_texts`` with the real encoder on this CPU beside ``encode()`` alone on the same texts and batch.

It ends with one JSON line (``feed_short_per_s``, ``feed_long_per_s``, ``main_us_per_short``, ``ingest_us_per_point``,
``ingest_points_per_s``, ``syncs_per_encode_batch``, ``syncs_per_train_step``, ...).

    python benchmarks/host.py --data ../shared/data                      # a few minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe
import torch
from _data import cpu_summary, read_corpus, read_scifact

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant._allocation import gc_paused
from sbert_qdrant.encoder.batching import DEFAULT_BATCH_TOKENS, token_budget_batches
from sbert_qdrant.encoder.feed import TokenFeed, usable_cores
from sbert_qdrant.encoder.packed import pack
from sbert_qdrant.encoder.sparse import Bm25
from sbert_qdrant.encoder.transformer import Transformer
from sbert_qdrant.records import VectorShape, checked_batches
from sbert_qdrant.store.base import PointVectors
from sbert_qdrant.store.edge import _edge_rows
from sbert_qdrant.testing import DeviceSyncCounter
from sbert_qdrant.training import Example, SoftmaxLoss, Trainer, TrainingConfig

#: What issue 54's GPU targets ask of the host, per second.
TARGETS = {"short": 150_000, "long": 16_000, "ingest": 20_000}


def workloads(data: Path, short: int, long: int) -> dict[str, list[str]]:
    return {"short": read_corpus(data, short), "long": read_scifact(data / "scifact", long)[1]}


def feed_rate(transformer: Transformer, texts: list[str], rounds: int) -> dict[str, float]:
    """The feed as the encoder runs it on a GPU (packed batches, no count cap), drained here without a model: best
    round's texts/s, and the CPU of the feed's Python threads per text (what holds the GIL)."""
    spent, lock = [0.0], threading.Lock()

    def tokenize(part: list[str]) -> Any:
        start = time.thread_time()
        out = transformer.token_rows(part)
        with lock:
            spent[0] += time.thread_time() - start
        return out

    best: dict[str, float] = {}
    for _ in range(rounds):
        spent[0] = 0.0
        wall, consumer = time.perf_counter(), time.thread_time()
        process = time.process_time()
        feed = TokenFeed(texts, tokenize, lambda rows: rows.lengths, pack, pin=False)
        for chunk in feed.chunks():
            for index in token_budget_batches(chunk.lengths, DEFAULT_BATCH_TOKENS, None):
                feed.collate(chunk, index)
        wall = time.perf_counter() - wall
        gil = spent[0] + time.thread_time() - consumer
        if not best or len(texts) / wall > best["per_s"]:
            best = {
                "per_s": len(texts) / wall,
                "gil_us": gil / len(texts) * 1e6,
                "cpu_us": (time.process_time() - process) / len(texts) * 1e6,
                "threads": feed.threads,
            }
    return best


def anchor_rate(transformer: Transformer, texts: list[str], batch: int = 32) -> float:
    """sentence-transformers' way: the tokenizer called per batch (padded, truncated, tensors) on the caller's
    thread."""
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        transformer.tokenizer(
            texts[i : i + batch], padding=True, truncation=True, max_length=transformer.max_seq_length,
            return_tensors="pt",
        )  # fmt: skip
    return len(texts) / (time.perf_counter() - start)


def feed_child(args: argparse.Namespace) -> None:
    """One feed measurement in this (child) process, printed as JSON."""
    encoder = SentenceEncoder.load(precision="fp32", max_seq_length=256)
    texts = workloads(args.data, args.short, args.long)
    out = {
        name: {**feed_rate(encoder.transformer, batch, args.rounds), "cores": usable_cores()}
        for name, batch in texts.items()
    }
    if args.with_anchor:
        for name, batch in texts.items():
            out[name]["anchor_per_s"] = anchor_rate(encoder.transformer, batch)
    print(json.dumps(out))


def run_feed(args: argparse.Namespace, cores: int | None) -> dict[str, Any]:
    """``feed_child`` in a child process, on one core (pinned, one tokenizer thread) or on every core."""
    command = [sys.executable, __file__, "--feed-child", "--data", str(args.data), "--short", str(args.short)]
    command += ["--long", str(args.long), "--rounds", str(args.rounds)]
    env = dict(os.environ)
    if cores == 1:
        env["RAYON_NUM_THREADS"] = "1"
        command = ["taskset", "-c", str(min(os.sched_getaffinity(0))), *command, "--with-anchor"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def feed(args: argparse.Namespace) -> dict[str, Any]:
    one, every = run_feed(args, 1), run_feed(args, None)
    print(f"\n== 1. The feed (tokenize + packed token-budget batches of {DEFAULT_BATCH_TOKENS:,} tokens, no model)")
    for name, unit in (("short", "sentences"), ("long", "abstracts cut at 256 tokens")):
        a, b = one[name], every[name]
        need = TARGETS[name] / a["per_s"]
        print(
            f"   {name} ({unit}): 1 core {a['per_s']:,.0f}/s, {b['cores']} cores ({b['threads']} threads) "
            f"{b['per_s']:,.0f}/s = {b['per_s'] / a['per_s']:.2f}x; anchor (tokenizer per batch of 32 on the "
            f"caller's thread, 1 core) {a['anchor_per_s']:,.0f}/s; CPU holding the GIL {b['gil_us']:.2f} us/text, "
            f"process CPU {b['cpu_us']:.1f} us/text; the GPU target {TARGETS[name]:,}/s needs ~{need:.1f} such cores"
        )
    return {"one": one, "every": every}


def _texts_for(data: Path, count: int) -> list[str]:
    texts = read_corpus(data, count)
    return [
        f"{t} ({i // len(texts)})" if i >= len(texts) else t for i, t in enumerate(texts * (count // len(texts) + 1))
    ][:count]


def ingestion(args: argparse.Namespace, encoder: SentenceEncoder) -> dict[str, float]:
    """Part 2: vectors given (``encoder`` is not run), BM25 on, into Edge; by stage; the engine alone as the anchor."""
    texts = _texts_for(args.data, args.ingest)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(texts), encoder.dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    shape = VectorShape(encoder.dimension, True)
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            collection = TextCollection(f"host_{round_}", encoder=encoder, location=folder)
            collection.upsert_texts(texts[:10], vectors=list(vectors[:10]), vectors_from=encoder.identity)
            wall, cpu = time.perf_counter(), time.process_time()
            collection.upsert_texts(texts, vectors=list(vectors), vectors_from=encoder.identity)
            runs.append((time.perf_counter() - wall, time.process_time() - cpu))
            collection.close()
        wall, cpu = min(runs)
        n = len(texts)
        stages: dict[str, float] = {}
        with gc_paused():  # as the write runs them
            start = time.process_time()
            list(checked_batches(texts, None, None, 4096, list(vectors), shape))
            stages["record checks"] = time.process_time() - start
            bm25 = Bm25()
            start = time.process_time()
            weights = bm25.embed_documents(texts)
            stages["BM25 term weights"] = time.process_time() - start
            ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(n)]
            payloads = [{"text": t} for t in texts]
            start = time.process_time()
            rows = _edge_rows(PointVectors({"dense": vectors}, {"bm25": weights}), n)
            points = [qe.Point(id=i, vector=row, payload=p) for i, row, p in zip(ids, rows, payloads, strict=True)]
            stages["Edge point objects"] = time.process_time() - start
            config = qe.EdgeConfig(
                vectors={"dense": qe.EdgeVectorParams(size=384, distance=qe.Distance.Cosine)},
                sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            )
            shard = qe.EdgeShard.create(str(Path(folder) / "alone"), config)
            start = time.process_time()
            for i in range(0, n, 4096):
                shard.update(qe.UpdateOperation.upsert_points(points[i : i + 4096]))
            stages["Edge update"] = time.process_time() - start
        shard.close()
        # the anchor: the engine alone, its points from Python lists (as its examples build them), collector paused
        shard = qe.EdgeShard.create(str(Path(folder) / "anchor"), config)
        with gc_paused():
            start_wall, start = time.perf_counter(), time.process_time()
            lists = vectors.tolist()
            anchor = [
                qe.Point(id=i, vector={"dense": v, "bm25": qe.SparseVector(*w)}, payload=p)
                for i, v, w, p in zip(ids, lists, weights, payloads, strict=True)
            ]
            for i in range(0, n, 4096):
                shard.update(qe.UpdateOperation.upsert_points(anchor[i : i + 4096]))
        anchor_wall, anchor_cpu = time.perf_counter() - start_wall, time.process_time() - start
        shard.close()
    print(
        f"\n== 2. upsert_texts of {n:,} texts with their vectors given, BM25 on, into Qdrant Edge (best of {len(runs)})"
    )
    print(
        f"   {n / wall:,.0f} points/s wall, {cpu / n * 1e6:.1f} us host CPU per point; anchor (Edge alone, points "
        f"from lists, no checks): {n / anchor_wall:,.0f} points/s, {anchor_cpu / n * 1e6:.1f} us per point; "
        f"ours / anchor {anchor_wall / wall:.2f}x; the GPU target {TARGETS['ingest']:,} points/s"
    )
    print("   by stage, alone (us per point): " + ", ".join(f"{k} {v / n * 1e6:.1f}" for k, v in stages.items()))
    return {"points_per_s": n / wall, "us_per_point": cpu / n * 1e6, "anchor_points_per_s": n / anchor_wall}


def syncs(args: argparse.Namespace, encoder: SentenceEncoder) -> dict[str, float]:
    """Part 3: syncs in one steady-state encode batch and per training step (fp32 on the CPU)."""
    texts = read_corpus(args.data, 64)
    features = encoder.tokenize(texts[:32])
    with torch.inference_mode():
        encoder(dict(features))  # warm
        with DeviceSyncCounter() as counted:
            encoder(dict(features))
    per_batch = counted.total
    examples = [Example((a, b), i % 3) for i, (a, b) in enumerate(zip(texts[:32], texts[32:64], strict=True))]
    totals = []
    for steps in (1, 4):
        trainer = Trainer(encoder, [(SoftmaxLoss(encoder), examples)], TrainingConfig(batch_size=8, max_steps=steps))
        with DeviceSyncCounter() as counted:
            trainer.fit()
        totals.append(counted.total)
    per_step = (totals[1] - totals[0]) / 3
    print(f"\n== 3. Device syncs (counted on the CPU): {per_batch} in an encode batch, {per_step:g} per training step")
    return {"encode_batch": per_batch, "train_step": per_step}


def upsert_vs_encode(args: argparse.Namespace) -> dict[str, float]:
    """Part 4: the collection's write with the real encoder beside encode() alone."""
    encoder = SentenceEncoder.load()
    texts = _texts_for(args.data, args.upsert)
    encoder.encode(texts[:64])
    start = time.perf_counter()
    encoder.encode_document(texts, batch_size=32)
    encode_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        collection = TextCollection("host_upsert", encoder=encoder, location=folder)
        start = time.perf_counter()
        collection.upsert_texts(texts)
        upsert_s = time.perf_counter() - start
        collection.close()
    ratio = encode_s / upsert_s
    print(
        f"\n== 4. upsert_texts of {len(texts):,} texts with the real encoder ({encoder.precision}) on this CPU: "
        f"{len(texts) / upsert_s:,.0f} texts/s beside encode() alone {len(texts) / encode_s:,.0f} texts/s = "
        f"{ratio:.2f}x (target >= 0.9x)"
    )
    return {"ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--short", type=int, default=20_000, help="short sentences fed")
    parser.add_argument("--long", type=int, default=2_000, help="SciFact abstracts fed")
    parser.add_argument("--ingest", type=int, default=30_000, help="points written with their vectors given")
    parser.add_argument("--upsert", type=int, default=2_000, help="texts upserted with the real encoder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--feed-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--with-anchor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.feed_child:
        feed_child(args)
        return
    print(f"CPU: {cpu_summary()}; torch {torch.__version__}, {usable_cores()} usable cores")
    fed = feed(args)
    encoder = SentenceEncoder.load(precision="fp32")
    ingest = ingestion(args, encoder)
    synced = syncs(args, encoder)
    upsert = upsert_vs_encode(args)
    every, one = fed["every"], fed["one"]
    summary = {
        "feed_short_per_s": round(every["short"]["per_s"]),
        "feed_long_per_s": round(every["long"]["per_s"]),
        "feed_short_one_core_per_s": round(one["short"]["per_s"]),
        "feed_long_one_core_per_s": round(one["long"]["per_s"]),
        "main_us_per_short": round(every["short"]["gil_us"], 2),
        "ingest_us_per_point": round(ingest["us_per_point"], 1),
        "ingest_points_per_s": round(ingest["points_per_s"]),
        "ingest_anchor_points_per_s": round(ingest["anchor_points_per_s"]),
        "syncs_per_encode_batch": synced["encode_batch"],
        "syncs_per_train_step": synced["train_step"],
        "upsert_over_encode": round(upsert["ratio"], 3),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
