"""Shared by the static int8 tests: calibration and held-out texts from tests/data, the skip for CPUs where static
int8 falls back to dynamic, and the native kernels' builds this CPU runs. Fixtures (a module's own calibration
``cache``, its ``static_encoder``) are in conftest.py."""

from __future__ import annotations

import csv
import ctypes
import json
from pathlib import Path

import pytest

from sbert_qdrant.encoder import cpu
from sbert_qdrant.encoder.int8 import native
from sbert_qdrant.types import KernelIsa

DATA = Path(__file__).parent / "data"
STATIC = cpu.int8_gemm_isa()[0] != "none"
needs_static = pytest.mark.skipif(not STATIC, reason=f"static int8 falls back here: {cpu.int8_gemm_isa()[1]}")
#: The kernels' builds this CPU runs: the AVX2 one on every AVX2 + FMA CPU (AVX-512 ones included), so that each
#: build is tested wherever it can be; the AVX512-VNNI one unless ATEN_CPU_CAPABILITY asks for AVX2-only behaviour.
RUNNABLE_ISAS: list[KernelIsa] = [
    isa
    for isa, runs in (
        ("avx512_vnni", cpu.avx512_vnni_unsupported() is None),
        ("avx2", cpu.has("avx2") and cpu.has("fma3")),
    )
    if runs
]


def kernel_library(isa: KernelIsa) -> ctypes.CDLL:
    """The ``isa`` build of the kernels from the current cache folder, or the test skipped saying why."""
    if isa not in RUNNABLE_ISAS:
        pytest.skip(f"this CPU does not run the {isa} kernels")
    if (reason := native.native_unsupported()) == "SBERT_QDRANT_NATIVE=off":
        pytest.skip(reason)
    library, why = native.load_library(isa)
    if library is None:
        pytest.skip(f"the {isa} kernels cannot be built here: {why}")
    return library


def nli_sentences() -> list[str]:
    """Calibration texts: the SNLI sample's premises and hypotheses (120 real sentences)."""
    with (DATA / "nli_train_sample.tsv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["premise"] for r in rows] + [r["hypothesis"] for r in rows]


def held_out_texts() -> list[str]:
    """Texts not calibrated on: STS-B dev sentences (short) and SciFact abstracts (long)."""
    with (DATA / "stsb_dev_sample.tsv").open(encoding="utf-8") as f:
        short = [r["sentence1"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][:150]
    with (DATA / "scifact_sample.jsonl").open(encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    return short + [f"{d['title']} {d['text']}" for d in docs if d["kind"] == "doc"]
