"""Calibrate the default model's static int8 once, on the shared TRAIN texts, and measure what it costs against fp32
on the dev sets and on held-apart sets nobody calibrated or tuned on: writes the activation ranges the package ships
(``sbert_qdrant/encoder/int8/ranges/<weights digest>``), with the measured Spearman losses per int8 ISA and set that
``precision="auto"`` reads (static int8 only where every dev set is within ``EXACT_GRADE_LOSS`` and every held-apart
set within ``HELD_APART_LOSS``).

    python benchmarks/int8_ranges.py --data ../shared/data             # calibrate, then measure on every ISA here
    python benchmarks/int8_ranges.py --data ../shared/data --measure   # measure the shipped ranges again
    # --fp32 PATH: reuse the fp32 vectors an earlier run saved; --isa native --isa avx2: only those
    python benchmarks/int8_ranges.py --data ../shared/data --distilled FOLDER   # a distilled int8 beside today's

Calibration texts (512, none from an evaluated set): 128 each of STS-B train sentences, Quora train questions (the
file's first pairs), SNLI train sentences and SciFact abstracts (long). Dev (tuned on): STS-B dev and SICK (train +
trial). Held apart: MNLI dev matched and mismatched, XNLI English dev + test, SNLI dev, Quora random-sample pairs
(``int8_heldapart.py`` says how each is scored). fp32 encodes every text once, natively, in this process; each ISA's
int8 is measured against it in a child process: natively, and on a VNNI CPU also AVX2-only (``ONEDNN_MAX_CPU_ISA=AVX2
ATEN_CPU_CAPABILITY=avx2``) and AVX-VNNI (``ONEDNN_MAX_CPU_ISA=AVX2_VNNI``, the AVX2 kernels), emulated (labelled); an
ISA measured twice records its worse loss per set. On an AVX2-only CPU both would run AVX2 again: only the native run
measures. ``--measure`` keeps the losses recorded for ISAs this CPU cannot run (the same ranges, measured elsewhere:
re-measure them there after a change to their quantization); a new calibration drops them all.

``--distilled FOLDER`` (``sbert-qdrant quantize``'s output for the default model): measures its int8 and today's
(the shipped ranges, original weights) against the original fp32, side by side per set, and records the distilled
losses in the folder's ``int8_ranges.safetensors`` (what ``precision="auto"`` reads for that folder).
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
from typing import Any, cast

import numpy as np
from _data import cpu_summary, read_quora_questions, read_stsb
from int8_heldapart import compare, dev_sets, distinct_texts, held_apart_sets

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.encoder.identity import weights_digest
from sbert_qdrant.encoder.int8 import calibration, int8_kernels
from sbert_qdrant.encoder.int8.distilled import RANGES_FILE

PER_SOURCE = 128
#: The Linears kept out of u8 activations (None: ``quantize.kept_layer_names``'s rule, the first block's FFN output)
#: and SmoothQuant strengths per Linear ({}: the defaults), written into the ranges they were measured with.
KEPT: tuple[str, ...] | None = None
ALPHAS: dict[str, float] = {}
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


def measure(data: Path, exact_path: Path, model: Path | None = None) -> dict[str, object]:
    """Static int8 (the shipped ranges) against fp32 (``exact_path``: the parent's vectors of every text) on the dev
    and held-apart sets, in this process's ISA: per set both Spearman figures, the loss and the distance."""
    sets = dev_sets(data) | held_apart_sets(data)
    texts = distinct_texts(sets)
    int8 = SentenceEncoder.load(model, device="cpu", precision="int8")
    result: dict[str, object] = {"isa": calibration.int8_isa(), "mode": int8.int8_mode}
    result["kernels"] = int8_kernels(int8.transformer.model)
    figures = compare(sets, texts, np.load(exact_path), np.asarray(int8.encode(texts, batch_size=64)))
    result["sets"] = figures
    result["losses"] = {name: figure["loss"] for name, figure in figures.items()}
    result["min_cos"] = min(figure["min_cos"] for figure in figures.values())
    return result


def _child(data: Path, exact: Path, extra: dict[str, str], distilled: Path | None = None) -> dict[str, Any]:
    """``measure`` in a child process with ``extra`` environment and no cached calibration."""
    with tempfile.TemporaryDirectory() as cache:
        env = os.environ | extra | {"SBERT_QDRANT_CACHE": cache}
        child = [sys.executable, __file__, "--data", str(data), "--child", str(exact)]
        child += ["--distilled", str(distilled)] if distilled else []
        out = subprocess.run(child, env=env, check=True, capture_output=True, text=True).stdout
    return cast(dict[str, Any], json.loads(out.strip().splitlines()[-1]))


def compare_distilled(data: Path, folder: Path, fp32: Path | None) -> None:
    """Today's int8 and the distilled one against the original fp32, natively, per set; the distilled losses are
    recorded in the folder's ranges."""
    print(cpu_summary())
    with tempfile.TemporaryDirectory() as scratch:
        exact = fp32 or Path(scratch) / "fp32.npy"
        if fp32 is None:
            texts = distinct_texts(dev_sets(data) | held_apart_sets(data))
            encoder = SentenceEncoder.load(device="cpu", precision="fp32")
            np.save(exact, encoder.encode(texts, batch_size=64))
        today, distilled = _child(data, exact, {}), _child(data, exact, {}, folder)
    print(f"int8 ISA {distilled['isa']}; loss = fp32 - int8 (Spearman x100); limits dev 0.05, held-apart 0.075")
    print(f"{'set':10} {'fp32':>7} {'today':>7} {'distilled':>9} {'min cos today':>13} {'distilled':>9}")
    for name, figure in distilled["sets"].items():
        was = today["sets"][name]
        print(
            f"{name:10} {figure['fp32']:7.3f} {was['loss']:7.3f} {figure['loss']:9.3f} {was['min_cos']:13.4f} "
            f"{figure['min_cos']:9.4f}"
        )
    ranges = calibration.ActivationRanges.read(folder / RANGES_FILE)
    assert ranges is not None
    final = dataclasses.replace(ranges, losses=ranges.losses | {str(distilled["isa"]): distilled["losses"]})
    final.save(folder / RANGES_FILE)
    print(f"auto with the distilled folder: {final.int8_verdict(str(distilled['isa'])) or 'static int8 (exact-grade)'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder holding stsb/, sick/, quora/, nli/, scifact/")
    parser.add_argument("--measure", action="store_true", help="only measure the shipped ranges (no calibration)")
    parser.add_argument(
        "--fp32", type=Path, help="fp32 vectors of the sets' texts saved (np.save) by an earlier run: not encoded again"
    )
    parser.add_argument(
        "--isa", action="append", choices=list(ISA_ENVIRONMENTS), help="measure only these (default: every one)"
    )
    parser.add_argument("--distilled", type=Path, help="a distilled int8 folder to measure beside today's int8")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.data, args.child, args.distilled)))
        return
    if args.distilled:
        compare_distilled(args.data, args.distilled, args.fp32)
        return
    encoder = SentenceEncoder.load(device="cpu", precision="fp32")
    digest = weights_digest(encoder.module_list)
    path = calibration.packaged_ranges_path(digest)
    if not args.measure:
        texts = calibration_texts(args.data)
        with tempfile.TemporaryDirectory() as cache:
            os.environ["SBERT_QDRANT_CACHE"] = cache
            SentenceEncoder.load(device="cpu", precision="int8", calibration_texts=texts)
            fresh = calibration.ActivationRanges.read(calibration.ranges_path(digest))
            del os.environ["SBERT_QDRANT_CACHE"]
        assert fresh is not None
        fresh = dataclasses.replace(fresh, kept=KEPT, alphas=ALPHAS)
        fresh.save(path)
        print(f"calibrated on {len(texts)} train texts -> {path}")
    print(cpu_summary())
    shipped = calibration.ActivationRanges.read(path)
    losses: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        exact = args.fp32 or Path(folder) / "fp32.npy"  # fp32 once, natively: the reference of every ISA's int8
        if args.fp32 is None:
            texts = distinct_texts(dev_sets(args.data) | held_apart_sets(args.data))
            np.save(exact, encoder.encode(texts, batch_size=64))
        for label, extra in ISA_ENVIRONMENTS.items():
            if args.isa and label not in args.isa:
                continue
            if extra and calibration.int8_isa() != "vnni":
                print(f"{label}: not emulated (this CPU has no VNNI: its native int8 is {calibration.int8_isa()})")
                continue
            result = _child(args.data, exact, extra)  # no cached calibration: the shipped ranges are what runs
            emulated = " (emulated)" if extra else ""
            print(f"{label}{emulated}: {json.dumps(result)}")
            if result["mode"] == "static":  # elsewhere int8 is dynamic: nothing measured for auto to read
                known = losses.setdefault(str(result["isa"]), {})
                for name, loss in result["losses"].items():
                    known[name] = max(loss, known.get(name, loss))
    assert shipped is not None
    if args.measure:  # the same ranges: losses measured elsewhere on ISAs this CPU lacks still hold
        losses = {isa: known for isa, known in shipped.losses.items() if isa not in losses} | losses
    final = dataclasses.replace(shipped, losses=losses)
    final.save(path)
    print(f"losses recorded in {path}: {losses}")
    for isa in losses:
        print(f"auto with {isa}: {final.int8_verdict(isa) or 'static int8 (exact-grade)'}")


if __name__ == "__main__":
    main()
