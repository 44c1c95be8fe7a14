"""Resume memory: ``--stored`` ids stored cheaply (a tiny random encoder's vectors given, short texts), then a resumed
``upsert_dataset(..., on_conflict="skip")`` over them and a few new rows, with the memory of the encoding actor
sampled while it runs (its unique memory, USS, and its RSS, which counts pages of Ray's object store it maps)."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import ray

from sbert_qdrant import TextCollection, testing
from sbert_qdrant.integrations.ray import upsert_dataset

_NEW = 1000


class _ActorMemory(threading.Thread):
    """The largest USS and RSS of any Ray Data actor process (``ray::MapWorker...``) seen while running."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.uss = self.rss = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            for process in psutil.process_iter(["cmdline"]):
                try:
                    if "MapWorker" in " ".join(process.info["cmdline"] or []):
                        memory = process.memory_full_info()
                        self.uss, self.rss = max(self.uss, memory.uss), max(self.rss, memory.rss)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue


def resume_memory(stored: int) -> None:
    print(f"\n5. Resume memory: {stored} ids stored, then a resumed run over them and {_NEW} new rows (1 actor)")
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "tiny-bert"
        encoder = testing.tiny_encoder()
        encoder.save(model)
        texts = [f"t{i}" for i in range(stored + _NEW)]
        start = time.perf_counter()
        rng = np.random.default_rng(0)
        with TextCollection("resume", encoder, location=f"{folder}/edge", show_progress_bar=False) as coll:
            for at in range(0, stored, 100_000):
                part = texts[at : at + 100_000]
                vectors = rng.standard_normal((len(part), encoder.dimension), dtype=np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                coll.upsert_texts(
                    part, ids=list(range(at, at + len(part))), vectors=vectors, vectors_from=encoder.identity
                )
            print(f"  stored {coll.count()} ids in {time.perf_counter() - start:.0f} s")
            frame = pd.DataFrame({"qid": np.arange(len(texts)), "text": texts})
            dataset = ray.data.from_pandas([frame[at : at + 8192] for at in range(0, len(frame), 8192)])
            sampler = _ActorMemory()
            sampler.start()
            start = time.perf_counter()
            result = upsert_dataset(
                dataset, coll, id_column="qid", model=model, precision="fp32", on_conflict="skip", batch_size=4096
            )
            took = time.perf_counter() - start
            sampler.stopped.set()
            sampler.join()
        if (result.written, result.skipped) != (_NEW, stored):
            raise SystemExit(f"resume: {result.written} written, {result.skipped} skipped")
        print(
            f"  resumed in {took:.0f} s: {result.written} written, {result.skipped} skipped; the actor's memory at "
            f"most USS {sampler.uss / 2**20:.0f} MiB, RSS {sampler.rss / 2**20:.0f} MiB"
        )
