"""Readers for the shared benchmark data (``--data`` folder: stsb/, quora/)."""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr


def read_stsb(path: Path) -> tuple[list[str], list[str], list[float]]:
    """sentence1, sentence2 and gold score columns of an STS-B TSV (gzip or plain)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows]


def read_quora_questions(path: Path, limit: int) -> list[str]:
    """Distinct questions of the Quora pairs file, in file order, at most ``limit``."""
    seen: dict[str, None] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            pair = json.loads(line)
            for key in ("question1", "question2"):
                seen.setdefault(pair[key], None)
            if len(seen) >= limit:
                break
    return list(seen)[:limit]


def sts_spearman(left: np.ndarray, right: np.ndarray, gold: list[float]) -> float:
    """Spearman x100 of the cosine of row pairs against gold scores."""
    left = left / np.linalg.norm(left, axis=1, keepdims=True)
    right = right / np.linalg.norm(right, axis=1, keepdims=True)
    return float(100 * spearmanr((left * right).sum(axis=1), gold).statistic)


def read_corpus(data: Path, limit: int) -> list[str]:
    """Up to ``limit`` distinct real sentences: Quora questions, then NLI and STS-B sentences."""
    seen = dict.fromkeys(read_quora_questions(data / "quora" / "quora_pairs_train.jsonl.gz", limit))
    sources = [(data / "nli" / f, ("premise", "hypothesis")) for f in sorted(os.listdir(data / "nli"))]
    sources.append((data / "stsb" / "stsb_train.tsv.gz", ("sentence1", "sentence2")))
    for path, columns in sources:
        if len(seen) >= limit or not path.name.endswith(".tsv.gz") or "test" in path.name:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                for column in columns:
                    text = (row.get(column) or "").strip()
                    if text:
                        seen.setdefault(text, None)
    return list(seen)[:limit]


def read_quora_pairs(path: Path) -> list[dict[str, object]]:
    """Every labelled pair of the Quora pairs file."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def cpu_summary() -> str:
    """The CPU's model and the flags that decide encoder speed (speed figures are only comparable within a run)."""
    model, flags = "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    wanted = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile"]
    return f"{model}, {os.cpu_count()} cores, flags: {' '.join(f for f in wanted if f in flags) or 'none of note'}"
