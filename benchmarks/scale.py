"""Scale-out figures, each beside its anchor, in one run on this machine (one machine: no cluster, no GPU here).

1. Ingestion of the same N real texts (Quora questions) into embedded Qdrant Edge: ``upsert_texts`` in this process
   (the anchor) vs ``integrations.ray.upsert_dataset`` with 1 actor x 2 CPUs and 2 actors x 1 CPU, on a local Ray
   of 2 CPUs (equal cores). Ray's wall time includes starting the actors and loading the model in each.
2. The write path of precomputed vectors (``upsert_texts(..., vectors=, vectors_from=)``) into Edge, points/s,
   beside encoding alone: which of the two bounds ingestion.
3. Encoding speed by length: the same encoder on Quora questions vs SciFact abstracts cut into chunks of the
   model's 256 tokens (as ``upsert_documents`` cuts them): the factor docs/scale.md applies to published
   sentence throughput when it plans for chunks.
4. Quantized search on ``--points`` (100k) real sentences on Qdrant Edge: recall@10 against exact numpy search (the
   anchor), p50/p95 latency and storage for no quantization, int8 and binary, each with and without rescoring and
   oversampling (``search_params=``); the stored vectors are encoded once and cached in ``--cache``
   (``benchmarks/_quantized_search.py``).
5. Resume memory per actor: ``--stored`` (1M) ids stored cheaply (a tiny encoder's vectors given), then a resumed
   ``upsert_dataset(..., on_conflict="skip")``; the encoding actor's memory sampled (``benchmarks/_resume_memory.py``).
6. Resume traffic: ``--stored`` ids stored cheaply, then a resume with nothing missing (its time; no actor may start:
   the model named does not exist) and one with 1,000 new rows: the bytes of the blocks handed to the actors (the
   stored rows' share must be nil), of the ids-only scan, and of the stored ids' array, beside the dataset's bytes.

    python benchmarks/scale.py --data ../shared/data [--texts 20000] [--pools 1x2,2x1] [--parts 1234]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import ray
import torch
from _data import cpu_summary, read_corpus, read_scifact
from _quantized_search import quantized_search
from _resume_memory import resume_memory

from sbert_qdrant import SentenceEncoder, TextCollection, testing
from sbert_qdrant.documents import Chunking
from sbert_qdrant.integrations.ray import upsert_dataset


def _timed_into_edge(encoder: SentenceEncoder, texts: list[str], write: str, **options: object) -> float:
    """Seconds to store ``texts`` in a new Edge collection (closing it, i.e. the flush to disk, included)."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        with TextCollection("bench", encoder, location=folder, show_progress_bar=False) as coll:
            if write == "ray":
                result = upsert_dataset(ray.data.from_items([{"text": t} for t in texts]), coll, **options)  # type: ignore[arg-type]
            else:
                result = coll.upsert_texts(texts, **options)  # type: ignore[arg-type]
        took = time.perf_counter() - start
        with TextCollection("bench", encoder, location=folder) as coll:
            if result.written != len(texts) or coll.count() != len(texts):
                raise SystemExit(f"{write}: {result.written} written, {coll.count()} stored, not {len(texts)}")
    return took


def ingestion(texts: list[str], encoder: SentenceEncoder, pools: list[tuple[int, int]]) -> None:
    """The in-process anchor run before, between and after the Ray pools (the machine's load moves between runs):
    each pool is compared with the anchors' median and with the two anchors around it."""
    n = len(texts)
    print(f"\n1. Ingestion of {n} Quora questions into Qdrant Edge (Ray: local, num_cpus=2)")
    threads = torch.get_num_threads()
    anchors = [_timed_into_edge(encoder, texts, "texts")]
    print(f"  upsert_texts, this process ({threads} threads)   {n / anchors[0]:8.1f} texts/s  (anchor, run 1)")
    runs = []
    for actors, cpus in pools:
        options = {"actors": actors, "cpus_per_actor": cpus, "batch_size": 1024}
        start = _timed_into_edge(encoder, texts[:1], "ray", **options)  # actors started, model loaded, one row
        took = _timed_into_edge(encoder, texts, "ray", **options)
        runs.append((actors, cpus, start, took))
        anchors.append(_timed_into_edge(encoder, texts, "texts"))
        print(
            f"  upsert_dataset, {actors} actor(s) x {cpus} CPU(s)          {n / took:8.1f} texts/s  (a 1-row run: "
            f"{start:.1f} s)\n  upsert_texts, this process ({threads} threads)   {n / anchors[-1]:8.1f} texts/s  "
            f"(anchor, run {len(anchors)})"
        )
    median = float(np.median(anchors))
    print(
        f"  anchor: median {n / median:.1f} texts/s of {len(anchors)} runs, "
        f"spread {max(anchors) / min(anchors) - 1:.1%}"
    )
    for at, (actors, cpus, start, took) in enumerate(runs):
        around = (anchors[at] + anchors[at + 1]) / 2
        print(
            f"  {actors}x{cpus}: overhead {took / median - 1:+.1%} vs the anchors' median (target <= +15 %), "
            f"{took / around - 1:+.1%} vs the two around it; without its 1-row run {(took - start) / median - 1:+.1%}"
        )
    _where_it_goes(texts, encoder, median)


def _where_it_goes(texts: list[str], encoder: SentenceEncoder, anchor: float) -> None:
    """The parts of a Ray run measured apart, in this process: a model load (what each actor does at its start), the
    driver's writes with BM25 (given vectors: random unit ones, the encoder's identity; what the driver does in
    both paths), and the bytes an encoded row takes through the object store (``EncodeTexts`` on a sample)."""
    from sbert_qdrant.encoder import EncoderSpec
    from sbert_qdrant.integrations.ray import Columns, EncodeTexts

    spec = EncoderSpec.of(device="cpu")
    start = time.perf_counter()
    spec.load()
    load = time.perf_counter() - start
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(texts), encoder.dimension), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    writes = _timed_into_edge(encoder, texts, "texts", vectors=vectors, vectors_from=encoder.identity)
    sample = np.array(texts[:1024], dtype=object)
    encoded = EncodeTexts(spec, columns=Columns("text"))({"text": sample})
    sizes = [sum(len(str(v).encode()) for v in c) if c.dtype == object else c.nbytes for c in encoded.values()]
    row = sum(sizes) / len(sample)  # Arrow blocks: strings as UTF-8, the vector as 384 float32
    print(
        f"  where it goes: a model load in one process {load:.1f} s (each actor loads once, in parallel); the "
        f"driver's writes with BM25 {writes:.1f} s ({writes / anchor:.0%} of the anchor's time; in both paths); "
        f"through the object store {row:.0f} B a row ({row * len(texts) / 1e6:.0f} MB) to the actors' output, "
        "read back by the driver"
    )


def write_path(texts: list[str], encoder: SentenceEncoder) -> None:
    n = len(texts)
    print(f"\n2. Precomputed vectors into Qdrant Edge ({n} points, BM25 computed in-process) vs encoding alone")
    start = time.perf_counter()
    vectors = np.asarray(encoder.encode_document(texts, batch_size=32, show_progress_bar=False))
    encode = time.perf_counter() - start
    print(f"  encode only ({encoder.precision})                         {n / encode:8.1f} texts/s  (anchor)")
    took = _timed_into_edge(encoder, texts, "texts", vectors=vectors, vectors_from=encoder.identity)
    print(f"  upsert_texts(vectors=, vectors_from=)         {n / took:8.1f} points/s  {encode / took:.1f}x encoding")


def _rate(encoder: SentenceEncoder, texts: list[str]) -> tuple[float, float]:
    """(texts/s, tokens/s) of encoding ``texts`` once."""
    tokens = sum(min(len(encoder.token_spans(t)), encoder.max_seq_length - 2) for t in texts)
    start = time.perf_counter()
    encoder.encode_document(texts, batch_size=32, show_progress_bar=False)
    took = time.perf_counter() - start
    return len(texts) / took, tokens / took


def by_length(data: Path, questions: list[str], encoder: SentenceEncoder, chunks: int) -> None:
    _, abstracts, _, _ = read_scifact(data / "scifact", limit=chunks)
    chunking = Chunking.of(encoder)
    inputs = [piece for text in abstracts for piece in chunking.inputs(text)][:chunks]
    print(f"\n3. Encoding speed by length ({encoder.precision}, batch 32)")
    short = _rate(encoder, questions[: 4 * chunks])
    long = _rate(encoder, inputs)
    for name, n, (texts, tokens) in (("Quora questions", 4 * chunks, short), ("SciFact chunks", len(inputs), long)):
        print(f"  {name:<16} {n:>6}  {texts:8.1f} texts/s  {tokens:9.0f} tokens/s")
    print(f"  chunk/question texts/s factor {long[0] / short[0]:.3f} (anchor: Quora questions)")


def resume_traffic(stored: int, new: int = 1000) -> None:
    from sbert_qdrant.integrations.ray._cluster import Pool
    from sbert_qdrant.integrations.ray._encode import Columns
    from sbert_qdrant.integrations.ray._upsert import _unstored, find_stored

    print(f"\n6. Resume traffic: {stored} ids stored, then resumes over them (nothing missing; {new} new rows)")
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "tiny-bert"
        encoder = testing.tiny_encoder()
        encoder.save(model)
        texts = [f"question number {i}, a text of some length as Quora questions have" for i in range(stored + new)]
        rng = np.random.default_rng(0)
        with TextCollection("resume", encoder, location=f"{folder}/edge", show_progress_bar=False) as coll:
            for at in range(0, stored, 50_000):
                part = texts[at : min(at + 50_000, stored)]
                vectors = rng.standard_normal((len(part), encoder.dimension), dtype=np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                coll.upsert_texts(
                    part, ids=list(range(at, at + len(part))), vectors=vectors, vectors_from=encoder.identity
                )

            def dataset(n: int) -> ray.data.Dataset:
                frame = pd.DataFrame({"qid": np.arange(n), "text": texts[:n]})
                return ray.data.from_pandas([frame[at : at + 8192] for at in range(0, n, 8192)])

            start = time.perf_counter()
            done = upsert_dataset(
                dataset(stored), coll, id_column="qid", model=Path(folder) / "none", on_conflict="skip"
            )
            took = time.perf_counter() - start
            print(
                f"  nothing missing: {done.written} written, {done.skipped} skipped, {took:.1f} s (no actor, no model)"
            )
            full, columns = dataset(stored + new), Columns("text", "qid")
            resume = find_stored(full, coll, columns, "skip", documents=False)
            sent = _unstored(full, columns, resume, Pool(1, 1, 0, 1024)).materialize()
            scan = full.select_columns(["qid"]).materialize().size_bytes()
            everything = full.materialize().size_bytes()
            print(
                f"  {new} new: {sent.count()} rows handed to the actors, {sent.size_bytes() / 1e6:.3f} MB "
                f"({sent.size_bytes() / new:.0f} B a new row; stored rows among them: "
                f"{sent.count() - new}); the dataset: {everything / 1e6:.1f} MB; ids-only scan "
                f"{scan / 1e6:.2f} MB ({scan / (stored + new):.1f} B a row), stored ids' array "
                f"{16 * resume.ids.count / 1e6:.2f} MB (16 B an id)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--texts", type=int, default=20_000, help="real texts ingested")
    parser.add_argument("--pools", default="1x2,2x1", help="Ray pools as ACTORSxCPUS, comma-separated")
    parser.add_argument("--chunks", type=int, default=1000, help="SciFact chunks for part 3")
    parser.add_argument("--points", type=int, default=100_000, help="stored sentences for part 4")
    parser.add_argument("--queries", type=int, default=200, help="held-out queries for part 4")
    parser.add_argument("--cache", type=Path, default=None, help="folder caching part 4's encoded sentences")
    parser.add_argument("--stored", type=int, default=1_000_000, help="ids stored before the resume of part 5")
    parser.add_argument("--parts", default="1234", help="which parts to run (5: resume memory, 6: resume traffic)")
    args = parser.parse_args()
    pools = [(int(a), int(c)) for a, c in (p.split("x") for p in args.pools.split(","))]
    texts = read_corpus(args.data, args.texts)
    encoder = SentenceEncoder.load(device="cpu")
    print(f"{sys.platform}, torch CPU, {cpu_summary()}\nencoder {encoder!r} ({encoder.identity})")
    if "1" in args.parts:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        print(f"ray {ray.__version__}, local, {int(ray.cluster_resources()['CPU'])} CPUs")
        ingestion(texts, encoder, pools)
        ray.shutdown()
    if "2" in args.parts:
        write_path(texts, encoder)
    if "3" in args.parts:
        by_length(args.data, texts, encoder, args.chunks)
    if "4" in args.parts:
        quantized_search(args.data, args.points, args.queries, args.cache)
    if "5" in args.parts:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        resume_memory(args.stored)
        ray.shutdown()
    if "6" in args.parts:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        resume_traffic(args.stored)
        ray.shutdown()


if __name__ == "__main__":
    main()
