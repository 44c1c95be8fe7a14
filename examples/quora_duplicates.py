"""Quora duplicate detection: calibrate a cosine threshold on train pairs, report F1 and AP on held-out pairs.

Pairs whose id is divisible by 5 are held out; the rest calibrate the collection's duplicate threshold
(``calibrate_threshold`` stores it with the collection). The held-out questions are then indexed, and
``find_duplicates`` is asked about a few of them.

    python examples/quora_duplicates.py [--data examples/data/quora_pairs_sample.jsonl]
    python examples/quora_duplicates.py --data ../shared/data/quora/quora_pairs_train.jsonl.gz   # 29k pairs
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from pathlib import Path

import numpy as np

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.dedup import average_precision

DATA = Path(__file__).parent / "data" / "quora_pairs_sample.jsonl"


def read_pairs(path: Path) -> list[dict[str, object]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="Quora pairs JSONL (optionally .gz)")
    parser.add_argument("--precision", default="auto", help="encoder precision (auto, fp32, bf16, int8 on CPU, fp16)")
    args = parser.parse_args()

    pairs = read_pairs(args.data)
    train = [(str(p["question1"]), str(p["question2"]), int(p["is_duplicate"])) for p in pairs if int(p["id"]) % 5]
    held_out = [
        (str(p["question1"]), str(p["question2"]), int(p["is_duplicate"])) for p in pairs if not int(p["id"]) % 5
    ]
    encoder = SentenceEncoder.load(precision=args.precision)
    with tempfile.TemporaryDirectory() as folder, TextCollection("quora", encoder, location=folder) as coll:
        calibration = coll.calibrate_threshold(train)
        print(
            f"calibrated on {calibration.pairs} train pairs ({calibration.positives} duplicates): threshold "
            f"{calibration.threshold:.3f}, train F1 {calibration.f1:.3f}"
        )
        left = encoder.encode([a for a, _, _ in held_out])  # unit vectors: the dot product is the cosine
        right = encoder.encode([b for _, b, _ in held_out])
        scores = (np.asarray(left) * np.asarray(right)).sum(axis=1)
        labels = np.array([y for _, _, y in held_out])
        predicted = scores >= calibration.threshold
        true_pos = int((predicted & (labels == 1)).sum())
        precision, recall = true_pos / max(predicted.sum(), 1), true_pos / max(labels.sum(), 1)
        f1 = 2 * precision * recall / max(precision + recall, 1e-12)
        print(
            f"held-out {len(held_out)} pairs: F1 {f1:.3f} (precision {precision:.3f}, recall {recall:.3f}) at the "
            f"calibrated threshold, AP {average_precision(scores, labels):.3f}"
        )

        coll.upsert_texts(list(dict.fromkeys(a for a, _, _ in held_out)))
        asked = [b for _, b, y in held_out if y][:3]
        for question, found in zip(asked, coll.find_duplicates(asked), strict=True):
            print(f"\n{question}")
            for hit in found:  # type: ignore[union-attr]
                print(f"  {hit.score:.3f}  {hit.text}")


if __name__ == "__main__":
    main()
