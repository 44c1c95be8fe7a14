"""Calibrate the default model's static int8 once, on the shared TRAIN texts, and measure what it costs on held-out
sets: writes the activation ranges the package ships (``sbert_qdrant/encoder/int8/ranges/<weights digest>``), with
the measured STS losses per int8 ISA that ``precision="auto"`` reads (it picks static int8 only where they are within
``EXACT_GRADE_LOSS``).

    python benchmarks/int8_ranges.py --data ../shared/data             # calibrate, then measure on every ISA here
    python benchmarks/int8_ranges.py --data ../shared/data --measure   # measure the shipped ranges again

Calibration texts (512, none from an evaluated set): 128 each of STS-B train sentences, Quora train questions, SNLI
train sentences and SciFact abstracts (long). Held out: STS-B dev and SICK (train + trial; never calibrated on).
Each ISA is measured in a child process: natively, and on a VNNI CPU also AVX2-only (``ONEDNN_MAX_CPU_ISA=AVX2
ATEN_CPU_CAPABILITY=avx2``) and AVX-VNNI (``ONEDNN_MAX_CPU_ISA=AVX2_VNNI``, the AVX2 kernels), emulated (labelled); an
ISA measured twice records its worse loss per set. On an AVX2-only CPU both would run AVX2 again: only the native run
measures. ``--measure`` keeps the losses recorded for ISAs this CPU cannot run (the same ranges, measured elsewhere:
re-measure them there after a change to their quantization); a new calibration drops them all.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _data import cpu_summary, read_quora_questions, read_sick, read_stsb, sts_spearman

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.encoder.identity import weights_digest
from sbert_qdrant.encoder.int8 import calibration, int8_kernels

PER_SOURCE = 128
#: The environments each ISA is measured in (the AVX2 one is emulated on a CPU with AVX-512).
_HELD_TO_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}
ISA_ENVIRONMENTS = {
    "native": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"} | _HELD_TO_AVX2,
    "avx2_vnni": {"ONEDNN_MAX_CPU_ISA": "AVX2_VNNI"} | _HELD_TO_AVX2,
}


def calibration_texts(data: Path) -> list[str]:
    """512 train texts: STS-B, Quora, SNLI (short) and SciFact abstracts (long), 128 distinct of each."""
    stsb = list(dict.fromkeys(read_stsb(data / "stsb" / "stsb_train.tsv.gz")[0]))[:PER_SOURCE]
    quora = read_quora_questions(data / "quora" / "quora_pairs_train.jsonl.gz", PER_SOURCE)
    snli: dict[str, None] = {}
    with gzip.open(data / "nli" / "snli_train_subset_cat.tsv.gz", "rt", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            for text in (row["premise"], row["hypothesis"]):
                if len(snli) < PER_SOURCE and text.strip():
                    snli.setdefault(text.strip(), None)
    abstracts = []
    with gzip.open(data / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            abstracts.append(f"{doc['title']} {doc['text']}")
            if len(abstracts) == PER_SOURCE:
                break
    return stsb + quora + list(snli) + abstracts


def held_out_sets(data: Path) -> dict[str, tuple[list[str], list[str], list[float]]]:
    sick_train, sick_trial = (
        read_sick(data / "sick" / "sick_train.tsv.gz"),
        read_sick(data / "sick" / "sick_trial.tsv.gz"),
    )
    sick = tuple(a + b for a, b in zip(sick_train, sick_trial, strict=True))
    return {"stsb_dev": read_stsb(data / "stsb" / "stsb_dev.tsv.gz"), "sick": sick}  # type: ignore[dict-item]


def measure(data: Path) -> dict[str, object]:
    """STS Spearman of fp32 and static int8 (the shipped ranges) on the held-out sets, in this process's ISA."""
    exact = SentenceEncoder.load(device="cpu", precision="fp32")
    int8 = SentenceEncoder.load(device="cpu", precision="int8")
    result: dict[str, object] = {"isa": calibration.int8_isa(), "mode": int8.int8_mode}
    result["kernels"] = int8_kernels(int8.transformer.model)
    losses, cosines = {}, []
    for name, (left, right, gold) in held_out_sets(data).items():
        scores = []
        for encoder in (exact, int8):
            a, b = np.asarray(encoder.encode(left)), np.asarray(encoder.encode(right))
            scores.append(sts_spearman(a, b, gold))
            cosines.append((a, b))
        losses[name] = round(scores[0] - scores[1], 3)
        result[f"{name}_fp32"], result[f"{name}_int8"] = round(scores[0], 2), round(scores[1], 2)
    pairs = [(cosines[i], cosines[i + 1]) for i in range(0, len(cosines), 2)]
    result["min_cos"] = round(
        min(float(((e[k] * q[k]).sum(axis=1)).min()) for e, q in pairs for k in (0, 1)), 4
    )  # both sides of every held-out pair, fp32 vs int8
    result["losses"] = losses
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder holding stsb/, sick/, quora/, nli/, scifact/")
    parser.add_argument("--measure", action="store_true", help="only measure the shipped ranges (no calibration)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.data)))
        return
    encoder = SentenceEncoder.load(device="cpu", precision="fp32")
    digest = weights_digest(encoder.pipeline)
    path = calibration.packaged_ranges_path(digest)
    if not args.measure:
        texts = calibration_texts(args.data)
        with tempfile.TemporaryDirectory() as cache:
            os.environ["SBERT_QDRANT_CACHE"] = cache
            SentenceEncoder.load(device="cpu", precision="int8", calibration_texts=texts)
            fresh = calibration.ActivationRanges.read(calibration.ranges_path(digest))
            del os.environ["SBERT_QDRANT_CACHE"]
        assert fresh is not None
        fresh.save(path)
        print(f"calibrated on {len(texts)} train texts -> {path}")
    print(cpu_summary())
    shipped = calibration.ActivationRanges.read(path)
    losses: dict[str, dict[str, float]] = {}
    for label, extra in ISA_ENVIRONMENTS.items():
        if extra and calibration.int8_isa() != "vnni":
            print(f"{label}: not emulated (this CPU has no VNNI: its native int8 is {calibration.int8_isa()})")
            continue
        with tempfile.TemporaryDirectory() as cache:  # no cached calibration: the shipped ranges are what runs
            env = os.environ | extra | {"SBERT_QDRANT_CACHE": cache}
            child = [sys.executable, __file__, "--data", str(args.data), "--child"]
            out = subprocess.run(child, env=env, check=True, capture_output=True, text=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        emulated = " (emulated)" if extra else ""
        print(f"{label}{emulated}: {result}")
        if result["mode"] == "static":  # elsewhere int8 is dynamic: nothing measured for auto to read
            known = losses.setdefault(str(result["isa"]), {})
            for name, loss in result["losses"].items():
                known[name] = max(loss, known.get(name, loss))
    assert shipped is not None
    if args.measure:  # the same ranges: losses measured elsewhere on ISAs this CPU lacks still hold
        losses = {isa: known for isa, known in shipped.losses.items() if isa not in losses} | losses
    dataclasses.replace(shipped, losses=losses).save(path)
    print(f"losses recorded in {path}: {losses}")


if __name__ == "__main__":
    main()
