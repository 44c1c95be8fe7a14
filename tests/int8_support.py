"""Shared by the static int8 tests: calibration and held-out texts from tests/data, and the skip for CPUs where static
int8 falls back to dynamic. Fixtures (a module's own calibration ``cache``, its ``static_encoder``) are in
conftest.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from sbert_qdrant.encoder import cpu

DATA = Path(__file__).parent / "data"
STATIC = cpu.vnni_int8_unsupported() is None
needs_static = pytest.mark.skipif(not STATIC, reason=f"static int8 falls back here: {cpu.vnni_int8_unsupported()}")


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
