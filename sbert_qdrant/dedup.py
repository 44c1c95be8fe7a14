"""Duplicate detection over vectors: best-F1 threshold calibration and chunked paraphrase mining."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InvalidInputError

#: Used by ``find_duplicates`` before a collection is calibrated: the best-F1 cosine threshold of the default model
#: (all-MiniLM-L6-v2) on 8,000 Quora Question Pairs train pairs (F1 0.746 there). Calibrate for your own data.
DEFAULT_DUPLICATE_THRESHOLD = 0.72


@dataclass(frozen=True)
class Calibration:
    """The cosine threshold with the best F1 on labelled pairs, and what it scores there."""

    threshold: float
    f1: float
    precision: float
    recall: float
    pairs: int
    positives: int


def best_f1_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[int | bool] | np.ndarray) -> Calibration:
    """The threshold maximising F1 when ``score >= threshold`` predicts a duplicate (midpoint between scores)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1 or s.shape != y.shape or s.size == 0:
        raise InvalidInputError(f"need one label per score and at least one pair; got {s.shape} scores, {y.shape}.")
    if not np.isin(y, (0, 1)).all():
        raise InvalidInputError(f"labels must be 0/1 or bool; got values {sorted(set(y.tolist()))[:5]}.")
    y = y.astype(bool)
    positives = int(y.sum())
    if positives == 0 or positives == y.size:
        raise InvalidInputError(f"calibration needs both duplicate and non-duplicate pairs; got {positives}/{y.size}.")
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    true_pos = np.cumsum(y)
    predicted = np.arange(1, y.size + 1)
    # Only cut where the next score differs, so that ties fall on one side together.
    cut = np.append(s[1:] < s[:-1], True)
    precision = true_pos / predicted
    recall = true_pos / positives
    f1 = np.where(cut, 2 * precision * recall / np.maximum(precision + recall, 1e-12), -1.0)
    best = int(np.argmax(f1))
    threshold = float(s[best] if best + 1 == s.size else (s[best] + s[best + 1]) / 2)
    return Calibration(threshold, float(f1[best]), float(precision[best]), float(recall[best]), int(y.size), positives)


def mine_pairs(
    vectors: np.ndarray, threshold: float, top_k: int, chunk_size: int = 2048
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, cosine)`` with ``i < j`` and cosine >= threshold, each row's ``top_k`` best, best first.

    Rows are compared a chunk at a time against all rows, so memory is ``chunk_size x n`` scores, never ``n x n``.
    """
    if vectors.ndim != 2:
        raise InvalidInputError(f"vectors must be 2-D, got shape {vectors.shape}.")
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    unit = unit.astype(np.float32, copy=False)
    n = unit.shape[0]
    k = min(top_k, n - 1)
    found: dict[tuple[int, int], float] = {}
    if k < 1:
        return []
    for start in range(0, n, chunk_size):
        scores = unit[start : start + chunk_size] @ unit.T
        rows = np.arange(scores.shape[0])
        scores[rows, rows + start] = -np.inf  # a text is not its own duplicate
        best = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        for row, cols in enumerate(best):
            i = start + row
            for j in cols.tolist():
                score = float(scores[row, j])
                if score >= threshold:
                    found[(min(i, j), max(i, j))] = score
    return sorted(((i, j, s) for (i, j), s in found.items()), key=lambda p: (-p[2], p[0], p[1]))
