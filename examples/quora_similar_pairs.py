"""Find the most similar Quora questions with the default SBERT model (runs on CPU in seconds).

Encodes the questions of a committed sample of Quora Question Pairs, then prints, for each of the
top pairs by cosine, whether Quora's annotators marked it a duplicate.

    python examples/quora_similar_pairs.py [--top 15]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from sbert_qdrant import SentenceEncoder

DATA = Path(__file__).parent / "data" / "quora_pairs_sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=15, help="how many pairs to print")
    parser.add_argument(
        "--data", type=Path, default=DATA, help="Quora pairs JSONL (question1, question2, is_duplicate)"
    )
    args = parser.parse_args()

    pairs = [json.loads(line) for line in args.data.open(encoding="utf-8")]
    questions = list(dict.fromkeys(q for p in pairs for q in (p["question1"], p["question2"])))
    labelled = {frozenset((p["question1"], p["question2"])): p["is_duplicate"] for p in pairs}

    encoder = SentenceEncoder.load()
    start = time.perf_counter()
    vectors = encoder.encode(questions, batch_size=64, show_progress_bar=True)
    elapsed = time.perf_counter() - start
    print(f"encoded {len(questions)} questions in {elapsed:.1f}s on {encoder.device} ({encoder!r})\n")

    scores = vectors @ vectors.T  # the default model normalizes, so this is cosine
    upper = np.triu_indices(len(questions), k=1)
    best = np.argsort(-scores[upper])[: args.top]
    print(f"{'cosine':>7}  {'Quora label':<12} question pair")
    for k in best:
        i, j = upper[0][k], upper[1][k]
        label = {1: "duplicate", 0: "not dup"}.get(labelled.get(frozenset((questions[i], questions[j]))), "unlabelled")
        print(f"{scores[i, j]:7.3f}  {label:<12} {questions[i]}\n{'':21}{questions[j]}")


if __name__ == "__main__":
    main()
