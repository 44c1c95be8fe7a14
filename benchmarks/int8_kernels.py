"""Which int8 kernels run and what they buy, on this CPU or an emulated AVX2-only one: fp32, dynamic int8 (no
calibration), static int8 with PyTorch's attention (``SBERT_QDRANT_NATIVE=off``) and static int8 with the native
kernels, each with ``int8_kernels``' line saying what ran.

Texts: ``--short`` STS-B dev sentences and ``--long`` SciFact abstracts (cut at 256 tokens); static int8 calibrates
on 300 STS-B train sentences (not measured) in a fresh cache. Per variant: texts/s (median of ``--rounds`` after a
warm-up, batch 32) and min cosine to fp32. ``--emulate-avx2`` re-runs the script with ``ONEDNN_MAX_CPU_ISA=AVX2
ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2`` (oneDNN, PyTorch, MKL's fp32
and fbgemm's dynamic int8 all held to AVX2; fbgemm ignores the first two).

    python benchmarks/int8_kernels.py --data ../shared/data [--emulate-avx2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _data import read_scifact, read_stsb

AVX2_LIMITS = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
}
CALIBRATION_TEXTS = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (stsb/, scifact/)")
    parser.add_argument("--short", type=int, default=1000, help="STS-B dev sentences to encode")
    parser.add_argument("--long", type=int, default=100, help="SciFact abstracts to encode")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--emulate-avx2", action="store_true", help="hold oneDNN, PyTorch, MKL and fbgemm to AVX2")
    args = parser.parse_args()
    if args.emulate_avx2 and any(os.environ.get(key) != value for key, value in AVX2_LIMITS.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **AVX2_LIMITS})  # before torch loads
    os.environ["SBERT_QDRANT_CACHE"] = tempfile.mkdtemp(prefix="int8-kernels-")  # calibrated afresh

    from sbert_qdrant import SentenceEncoder
    from sbert_qdrant.encoder import cpu
    from sbert_qdrant.encoder.int8 import int8_kernels

    first, second, _ = read_stsb(args.data / "stsb" / "stsb_dev.tsv.gz")
    short = list(dict.fromkeys(first + second))[: args.short]
    long = read_scifact(args.data / "scifact", limit=args.long)[1]
    train, _, _ = read_stsb(args.data / "stsb" / "stsb_train.tsv.gz")
    calibration = list(dict.fromkeys(train))[:CALIBRATION_TEXTS]
    limits = " ".join(f"{key}={os.environ[key]}" for key in AVX2_LIMITS if key in os.environ)
    print(f"CPU: {cpu.summary()}; {'emulated, ISA limits: ' + limits if limits else 'native ISA'}")
    print(f"int8 GEMMs: {cpu.int8_gemm_isa()}; native kernels: {cpu.kernel_isa()}")
    print(f"{len(short)} short, {len(long)} long texts, batch 32, median of {args.rounds} rounds\n")

    def load(precision: str, native: str = "auto", texts: list[str] | None = None) -> SentenceEncoder:
        os.environ["SBERT_QDRANT_NATIVE"] = native
        return SentenceEncoder.load(device="cpu", precision=precision, calibration_texts=texts)

    variants = {
        "fp32": lambda: load("fp32"),
        "int8, no calibration": lambda: load("int8"),
        "int8 static, NATIVE=off": lambda: load("int8", "off", calibration),
        "int8 static, native": lambda: load("int8", "auto", calibration),
    }
    exact: dict[str, np.ndarray] = {}
    for name, make in variants.items():
        encoder = make()
        row = [f"{name:26}"]
        for label, texts in (("short", short), ("long", long)):
            vectors = np.asarray(encoder.encode(texts[:64], batch_size=32))  # warm-up
            seconds = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                vectors = np.asarray(encoder.encode(texts, batch_size=32))
                seconds.append(time.perf_counter() - start)
            exact.setdefault(label, vectors)
            cosine = float((vectors * exact[label]).sum(axis=1).min())
            row.append(f"{label} {len(texts) / statistics.median(seconds):7.1f}/s min cos {cosine:.4f}")
        print(" | ".join(row))
        print(f"{'':26} {int8_kernels(encoder)}", flush=True)


if __name__ == "__main__":
    main()
