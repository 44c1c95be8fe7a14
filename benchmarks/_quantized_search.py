"""Quantized collections at scale (``benchmarks/scale.py --parts 4``): recall@10 against exact search, storage,
and latency for no quantization, int8 and binary, each with and without rescoring, on Qdrant Edge.

The stored sentences are encoded once (cached in ``--cache``) and written as vectors encoded elsewhere
(``upsert_texts(..., vectors_from=)``), dense only; queries are held-out real sentences, encoded per search.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from _data import cpu_summary, read_corpus
from qdrant_client import models

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.records import text_id

K = 10


def _rescoring(rescore: bool, oversampling: float | None = None) -> models.SearchParams:
    return models.SearchParams(quantization=models.QuantizationSearchParams(rescore=rescore, oversampling=oversampling))


#: (quantization, label, search parameters) of each measured setting.
SETTINGS: list[tuple[str | None, str, models.SearchParams | None]] = [
    (None, "none (float32)", None),
    ("int8", "int8, no rescoring", _rescoring(False)),
    ("int8", "int8, rescored", _rescoring(True)),
    ("int8", "int8, rescored, oversampling 2", _rescoring(True, 2.0)),
    ("binary", "binary, no rescoring", _rescoring(False)),
    ("binary", "binary, rescored", _rescoring(True)),
    ("binary", "binary, rescored, oversampling 4", _rescoring(True, 4.0)),
]


def _folder_mb(folder: Path) -> float:
    return sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file()) / 2**20  # allocated, not sparse


def _ram_mb(count: int, dimension: int, quantization: str | None) -> float:
    """RAM to keep the searched vectors in memory: float32 (and the quantized copy), plus the HNSW links
    (m=16: 2*m links of 4 bytes per point on layer 0); with rescoring the originals may stay on disk."""
    codes = {None: 0.0, "int8": count * dimension, "binary": count * dimension / 8}[quantization]
    originals = 0.0 if quantization else count * dimension * 4
    return (originals + codes + count * 32 * 4) / 2**20


def _encoded(encoder: SentenceEncoder, texts: list[str], cache: Path | None) -> np.ndarray:
    path = None if cache is None else cache / f"quantized_search_{len(texts)}_{encoder.identity.replace('@', '_')}.npy"
    if path is not None and path.exists():
        print(f"(stored vectors read from {path})")
        return np.load(path)
    start = time.perf_counter()
    matrix = np.asarray(encoder.encode_document(texts, batch_size=64), dtype=np.float32)
    print(f"(encoded {len(texts)} sentences with precision {encoder.precision} in {time.perf_counter() - start:.0f} s)")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, matrix)
    return matrix


def quantized_search(data: Path, count: int, queries: int, cache: Path | None) -> dict[str, dict[str, float]]:
    """Print and return recall@10, p50/p95 latency and storage of each setting."""
    print(f"\n== quantized search on {count} real sentences, {queries} held-out queries, top {K}, Qdrant Edge ==")
    print(cpu_summary())
    corpus = read_corpus(data, count + queries)
    stored, asked = corpus[:count], corpus[count : count + queries]
    encoder = SentenceEncoder.load(device="cpu")
    matrix = _encoded(encoder, stored, cache)
    row = {text_id(t): i for i, t in enumerate(stored)}
    query_vectors = np.asarray(encoder.encode_query(asked), dtype=np.float32)
    exact = [np.argsort(-(matrix @ q))[:K].tolist() for q in query_vectors]
    results: dict[str, dict[str, float]] = {}
    print(f"{'setting':<34}{'recall@10':>10}{'p50 ms':>9}{'p95 ms':>9}{'disk MB':>9}{'RAM MB*':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for quantization in (None, "int8", "binary"):
            location = Path(folder) / str(quantization)
            with TextCollection("scale", encoder, location=location, sparse=None, quantization=quantization) as coll:  # type: ignore[arg-type]
                start = time.perf_counter()
                coll.upsert_texts(stored, vectors=matrix, vectors_from=encoder.identity, batch_size=4096, bulk=True)
                took = time.perf_counter() - start
                print(f"  (wrote {count} precomputed vectors + built HNSW, {quantization or 'float32'}: {took:.0f} s)")
                disk = _folder_mb(location)
                for setting, label, params in SETTINGS:
                    if setting != quantization:
                        continue
                    coll.search_text(asked[0], limit=K, search_params=params, with_payload=False)  # warm
                    latencies, found = [], []
                    for query in asked:
                        begin = time.perf_counter()
                        hits = coll.search_text(query, limit=K, search_params=params, with_payload=False)
                        latencies.append(time.perf_counter() - begin)
                        found.append({row[str(h.id)] for h in hits})
                    recall = float(np.mean([len(f & set(e)) / K for f, e in zip(found, exact, strict=True)]))
                    ms = np.asarray(latencies) * 1000
                    ram = _ram_mb(count, matrix.shape[1], quantization)
                    p50, p95 = float(np.percentile(ms, 50)), float(np.percentile(ms, 95))
                    print(f"{label:<34}{recall:>10.3f}{p50:>9.2f}{p95:>9.2f}{disk:>9.0f}{ram:>9.0f}")
                    results[label] = {"recall@10": recall, "p50_ms": p50, "p95_ms": p95, "disk_mb": disk, "ram_mb": ram}
    print(
        "* RAM to hold the searched vectors and HNSW links in memory, computed (not measured): float32 vectors, or the"
    )
    print("  quantized codes alone with the originals left on disk for rescoring; latency includes encoding the query.")
    return results
