"""Which int8 kernels run and what they buy, on this CPU or an emulated AVX2-only one: fp32, dynamic int8 (no
calibration), static int8 with PyTorch's attention (``SBERT_QDRANT_NATIVE=off``) and static int8 with the native
kernels, each with ``int8_kernels``' line saying what ran. Where the AVX2 kernels load, first their GEMM against
oneDNN's (the one static int8 used before) on MiniLM-L6's shapes, one thread, GOP/s (best of 20 calls): u8 x s8 with
an fp32 output, with the fused GELU and u8 output of the FFN up projection, and the s16 x s8 of the first down
projection against fp32 (MKL/oneDNN via ``F.linear``), the precision it replaced.

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
from collections.abc import Callable
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

    if cpu.kernel_isa()[0] == "avx2":
        gemm_rates()

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


def gemm_rates(rows: tuple[int, ...] = (512, 2048)) -> None:
    """Our AVX2 GEMM against oneDNN's (and s16 x s8 against fp32) on the encoder's shapes, one thread."""
    import torch

    from sbert_qdrant.encoder.int8 import native

    library = native.native_library()
    if library is None:
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    fp32_out = (torch.float32, None, 0.0, 0.0)

    def rate(ops: float, function: Callable[..., object], *args: object) -> float:
        best = float("inf")
        for _ in range(20):
            start = time.perf_counter()
            function(*args)
            best = min(best, time.perf_counter() - start)
        return ops / best / 1e9

    print("GEMM, one thread, GOP/s: rows x in -> out     ours   oneDNN (fp32 for s16)")
    for m in rows:
        for k, n, gelu in ((384, 384, False), (384, 1536, True), (1536, 384, False)):
            x = torch.randint(0, 256, (m, k), dtype=torch.uint8, generator=generator)
            weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=generator)
            scale, bias = torch.rand(n, generator=generator) * 1e-3, torch.randn(n, generator=generator)
            epilogue = (torch.zeros(n, dtype=torch.int32), scale, bias, gelu)
            output = (torch.uint8, torch.ones(n), 0.0, 0.0) if gelu else fp32_out
            ours = rate(2.0 * m * k * n, native.gemm_s8, library, x, native.pack_weights(library, weight, False), n,
                        epilogue, output)  # fmt: skip
            theirs = rate(2.0 * m * k * n, torch.ops.onednn.qlinear_pointwise, x, 0.01, 0,
                          torch.ops.onednn.qlinear_prepack(weight, None), scale, torch.zeros(n, dtype=torch.int64),
                          bias, 1.0, 0, output[0], "gelu" if gelu else "none", [], "none" if gelu else "")  # fmt: skip
            label = f"u8 x s8 {m} x {k} -> {n}{' +GELU, u8 out' if gelu else ''}"
            print(f"  {label:40} {ours:6.0f}   {theirs:6.0f}")
        wide = torch.randint(-11000, 11001, (m, 1536), dtype=torch.int16, generator=generator)
        weight = torch.randint(-127, 128, (384, 1536), dtype=torch.int8, generator=generator)
        epilogue = (torch.zeros(384, dtype=torch.int32), torch.full((384,), 1e-6), torch.randn(384), False)
        ops = 2.0 * m * 1536 * 384
        ours = rate(ops, native.gemm_s8, library, wide, native.pack_weights(library, weight, True), 384, epilogue,
                    fp32_out)  # fmt: skip
        with torch.inference_mode():
            fp32 = rate(ops, torch.nn.functional.linear, torch.randn(m, 1536), torch.randn(384, 1536), torch.randn(384))
        print(f"  {f's16 x s8 {m} x 1536 -> 384 (vs fp32)':40} {ours:6.0f}   {fp32:6.0f}")
    print()
    torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
