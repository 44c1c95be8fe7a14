"""Threshold calibration and paraphrase mining over plain vectors."""

from __future__ import annotations

import numpy as np
import pytest

from sbert_qdrant import InvalidInputError
from sbert_qdrant.dedup import best_accuracy_threshold, best_f1_threshold, mine_pairs


def test_best_f1_threshold_cuts_between_scores() -> None:
    calibration = best_f1_threshold([0.9, 0.8, 0.7, 0.6, 0.5], [1, 1, 0, 1, 0])
    # Cutting below 0.6 predicts 4 positives (3 right): F1 6/7 beats 0.8 at the 0.75 cut.
    assert calibration.threshold == pytest.approx(0.55)
    assert calibration.f1 == pytest.approx(6 / 7) and calibration.recall == 1.0 and calibration.precision == 0.75
    assert (calibration.pairs, calibration.positives) == (5, 3)


def test_ties_stay_on_one_side() -> None:
    calibration = best_f1_threshold([0.9, 0.9, 0.1], [1, 0, 0])
    assert calibration.threshold == pytest.approx(0.5) and calibration.precision == 0.5


def test_best_accuracy_threshold_may_predict_no_duplicate() -> None:
    threshold, accuracy = best_accuracy_threshold([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 0])
    assert (threshold, accuracy) == (pytest.approx(0.75), 1.0)
    # One low-scored duplicate among four: calling nothing a duplicate is right 3 times in 4, any cut less often.
    threshold, accuracy = best_accuracy_threshold([0.9, 0.8, 0.7, 0.2], [0, 0, 0, 1])
    assert accuracy == 0.75 and threshold > 0.9


@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        ([0.5], [1], "both duplicate and non-duplicate"),
        ([0.5, 0.4], [1], "one label per score"),
        ([0.1], [2], "0/1"),
        ([0.5, float("nan")], [1, 0], "score 1 is not"),
    ],
)
def test_calibration_input_errors(scores: list[float], labels: list[int], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        best_f1_threshold(scores, labels)


def test_mining_in_chunks_equals_brute_force() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    vectors[150] = vectors[3] + 0.01  # a planted near-duplicate
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    full = unit @ unit.T
    np.fill_diagonal(full, -np.inf)
    # Blocks and the full matrix round differently: a pair within 1e-5 of the threshold may fall either side.
    upper = [(i, j) for i in range(300) for j in range(i + 1, 300)]
    sure = {(i, j) for i, j in upper if full[i, j] >= 0.5 + 1e-5}
    either = {(i, j) for i, j in upper if abs(full[i, j] - 0.5) < 1e-5}
    pairs = mine_pairs(vectors, threshold=0.5, top_k=300, block_size=64)
    assert sure <= {(i, j) for i, j, _ in pairs} <= sure | either and len(sure) > 100
    assert pairs[0][:2] == (3, 150) and pairs[0][2] == pytest.approx(1.0, abs=1e-4)
    assert [s for _, _, s in pairs] == sorted((s for _, _, s in pairs), reverse=True)
    assert mine_pairs(vectors[:1], 0.0, 5) == []
