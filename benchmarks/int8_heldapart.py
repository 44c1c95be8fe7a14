"""The sets static int8 is judged on against fp32 (``int8_ranges.py`` measures them; ``precision="auto"`` reads the
losses): the dev sets, and held-apart ones that neither the calibration nor any tuning saw.

Dev (STS gold scores; tuned on): STS-B dev, SICK train + trial. Held apart (never calibrated or tuned on; the
calibration reads STS-B train, Quora's first pairs, SNLI train and SciFact abstracts):

- ``mnli_m``, ``mnli_mm`` (MultiNLI dev matched / mismatched), ``xnli`` (XNLI English dev + test), ``snli_dev``:
  sentence pairs, Spearman of the cosine against the label as a graded similarity (entailment 2, neutral 1,
  contradiction 0; pairs without a gold label dropped). An NLI-trained encoder ranks entailed pairs above neutral
  above contradicted ones, so this is a meaningful rank correlation (about 40-50 x100 for the default model), and
  over thousands of pairs the fp32-int8 difference is steady.
- ``quora``: Quora pairs of its random sample (not the file's head, whose questions calibrate), one in three by pair
  id, Spearman of the cosine against ``is_duplicate``.

Beside the Spearman figures, the distance of int8 to fp32 over every text: mean 1 - cosine and min cosine (steadier
than any one Spearman figure).
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
from _data import read_sick, read_stsb, sts_spearman

Pairs = tuple[list[str], list[str], list[float]]
#: NLI labels as a graded similarity.
NLI_GRADES = {"entailment": 2.0, "neutral": 1.0, "contradiction": 0.0}


def dev_sets(data: Path) -> dict[str, Pairs]:
    """STS-B dev and SICK (train + trial): the held-out sets tuned on."""
    sick_train, sick_trial = (
        read_sick(data / "sick" / "sick_train.tsv.gz"),
        read_sick(data / "sick" / "sick_trial.tsv.gz"),
    )
    sick = (sick_train[0] + sick_trial[0], sick_train[1] + sick_trial[1], sick_train[2] + sick_trial[2])
    return {"stsb_dev": read_stsb(data / "stsb" / "stsb_dev.tsv.gz"), "sick": sick}


def _nli(paths: list[Path], first: str, second: str) -> Pairs:
    left, right, gold = [], [], []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                grade = NLI_GRADES.get(row["label"])
                if grade is not None and row[first].strip() and row[second].strip():
                    left.append(row[first])
                    right.append(row[second])
                    gold.append(grade)
    return left, right, gold


def held_apart_sets(data: Path) -> dict[str, Pairs]:
    """The sets nothing was calibrated or tuned on (module docstring)."""
    nli = data / "nli"
    left, right, gold = [], [], []
    with gzip.open(data / "quora" / "quora_pairs_train.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            pair = json.loads(line)
            if pair["source"] == "qqp_random_sample" and int(pair["id"]) % 3 == 0:
                left.append(pair["question1"])
                right.append(pair["question2"])
                gold.append(float(pair["is_duplicate"]))
    return {
        "mnli_m": _nli([nli / "mnli_dev_matched.tsv.gz"], "premise", "hypothesis"),
        "mnli_mm": _nli([nli / "mnli_dev_mismatched.tsv.gz"], "premise", "hypothesis"),
        "xnli": _nli([nli / "xnli_en_dev.tsv.gz", nli / "xnli_en_test.tsv.gz"], "premise", "hypothesis"),
        "snli_dev": _nli([nli / "snli_dev.tsv.gz"], "sentence1", "sentence2"),
        "quora": (left, right, gold),
    }


def distinct_texts(sets: dict[str, Pairs]) -> list[str]:
    """Every text of ``sets`` once (each encoder encodes them once)."""
    return list(dict.fromkeys(t for left, right, _ in sets.values() for t in (*left, *right)))


def compare(
    sets: dict[str, Pairs], texts: list[str], exact: np.ndarray, tested: np.ndarray
) -> dict[str, dict[str, float]]:
    """Per set: Spearman x100 of fp32 (``exact``) and of ``tested`` (rows of ``texts``), the loss (fp32 minus tested),
    and the distance of ``tested`` to fp32 over the set's texts (mean 1 - cosine x 1e4, min cosine)."""
    row = {t: i for i, t in enumerate(texts)}
    unit_exact = exact / np.linalg.norm(exact, axis=1, keepdims=True)
    unit_tested = tested / np.linalg.norm(tested, axis=1, keepdims=True)
    cosine = (unit_exact * unit_tested).sum(axis=1)
    result = {}
    for name, (left, right, gold) in sets.items():
        a, b = [row[t] for t in left], [row[t] for t in right]
        fp32 = sts_spearman(exact[a], exact[b], gold)
        int8 = sts_spearman(tested[a], tested[b], gold)
        used = cosine[np.unique(a + b)]
        result[name] = {
            "fp32": round(fp32, 3),
            "int8": round(int8, 3),
            "loss": round(fp32 - int8, 3),
            "mean_1_cos_e4": round(float(1 - used.mean()) * 1e4, 2),
            "min_cos": round(float(used.min()), 4),
        }
    return result
