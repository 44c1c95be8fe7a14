"""Duplicate detection over vectors: threshold calibration (best F1, best accuracy), AP, paraphrase mining."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .errors import InvalidInputError

if TYPE_CHECKING:
    import torch

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


def _checked_pairs(
    scores: Sequence[float] | np.ndarray, labels: Sequence[int | bool] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1 or s.shape != y.shape or s.size == 0:
        raise InvalidInputError(f"need one label per score and at least one pair; got {s.shape} scores, {y.shape}.")
    if not np.isin(y, (0, 1)).all():
        raise InvalidInputError(f"labels must be 0/1 or bool; got values {sorted(set(y.tolist()))[:5]}.")
    if not np.isfinite(s).all():
        raise InvalidInputError(f"scores must be finite; score {int(np.flatnonzero(~np.isfinite(s))[0])} is not.")
    return s, y.astype(np.int64)


def _cuts(s: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per distinct score, highest first: the score, true positives and predictions at or above it; positives.

    Ties fall on one side of a threshold together, as scikit-learn counts them.
    """
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    last_of_tie = np.r_[np.diff(s) != 0, True]
    return s[last_of_tie], np.cumsum(y)[last_of_tie], np.arange(1, s.size + 1)[last_of_tie], int(y.sum())


def _threshold_at(cut: np.ndarray, best: int) -> float:
    """Midway between the chosen score and the next lower one, so that neither sits on the edge."""
    return float(cut[best] if best + 1 == cut.size else (cut[best] + cut[best + 1]) / 2)


def best_f1_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[int | bool] | np.ndarray) -> Calibration:
    """The threshold maximising F1 when ``score >= threshold`` predicts a duplicate."""
    s, y = _checked_pairs(scores, labels)
    positives = int(y.sum())
    if positives == 0 or positives == y.size:
        raise InvalidInputError(f"calibration needs both duplicate and non-duplicate pairs; got {positives}/{y.size}.")
    cut, true_pos, predicted, _ = _cuts(s, y)
    f1 = 2 * true_pos / (predicted + positives)
    best = int(np.argmax(f1))
    precision, recall = float(true_pos[best] / predicted[best]), float(true_pos[best] / positives)
    return Calibration(_threshold_at(cut, best), float(f1[best]), precision, recall, int(y.size), positives)


def best_accuracy_threshold(
    scores: Sequence[float] | np.ndarray, labels: Sequence[int | bool] | np.ndarray
) -> tuple[float, float]:
    """``(threshold, accuracy)`` maximising accuracy when ``score >= threshold`` predicts a duplicate.

    Predicting no duplicate at all is a candidate too (a threshold just above the highest score).
    """
    s, y = _checked_pairs(scores, labels)
    cut, true_pos, predicted, positives = _cuts(s, y)
    accuracy = (true_pos + (y.size - positives) - (predicted - true_pos)) / y.size
    best = int(np.argmax(accuracy))
    if (y.size - positives) / y.size > accuracy[best]:
        return float(np.nextafter(cut[0], np.inf)), (y.size - positives) / y.size
    return _threshold_at(cut, best), float(accuracy[best])


def average_precision(scores: Sequence[float] | np.ndarray, labels: Sequence[int | bool] | np.ndarray) -> float:
    """Average precision of ranking pairs by ``scores`` (0 when there is no positive)."""
    s, y = _checked_pairs(scores, labels)
    _, true_pos, predicted, positives = _cuts(s, y)
    if positives == 0:
        return 0.0
    recall_gain = np.diff(np.r_[0, true_pos]) / positives
    return float((true_pos / predicted * recall_gain).sum())


def mine_pairs(
    vectors: np.ndarray, threshold: float, top_k: int, block_size: int = 2048
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, cosine)`` with ``i < j`` and cosine >= threshold, each row's ``top_k`` best, best first.

    Rows are compared a block at a time, so memory is ``block_size x block_size`` scores, never ``n x n``; each pair of
    blocks once (the scores are symmetric: a block's scores against a later one give both blocks' rows their best
    candidates), so half the multiply-adds of comparing every row with every row.
    """
    if vectors.ndim != 2:
        raise InvalidInputError(f"vectors must be 2-D, got shape {vectors.shape}.")
    import torch  # imported here: dedup's other functions need numpy only

    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    matrix = torch.from_numpy(np.ascontiguousarray(unit, dtype=np.float32))
    n = matrix.shape[0]
    k = min(top_k, n - 1)
    if k < 1:
        return []
    starts = range(0, n, block_size)
    # per block of rows: the (scores, columns) of each row's best among each block compared with it so far
    candidates: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in starts]
    found: dict[tuple[int, int], float] = {}
    with torch.inference_mode():  # torch's GEMM and top-k use every thread (numpy's argpartition one)
        for block, start in enumerate(starts):
            rows = matrix[start : start + block_size]
            for later in range(block, len(starts)):
                other = starts[later]
                scores = rows @ matrix[other : other + block_size].T
                if later == block:
                    diagonal = torch.arange(scores.shape[0])
                    scores[diagonal, diagonal] = -torch.inf  # a text is not its own duplicate
                else:
                    candidates[later].append(_best(scores.T.contiguous(), k, start))
                candidates[block].append(_best(scores, k, other))
            values, columns = (t.numpy() for t in _best_of(candidates[block], k))
            candidates[block] = []
            for row, col in zip(*np.nonzero(values >= threshold), strict=True):
                i, j = start + int(row), int(columns[row, col])
                found[(min(i, j), max(i, j))] = float(values[row, col])
    return sorted(((i, j, s) for (i, j), s in found.items()), key=lambda p: (-p[2], p[0], p[1]))


def _best(scores: torch.Tensor, k: int, first_column: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's ``k`` best scores (fewer where there are fewer columns) and their columns, numbered from
    ``first_column``."""
    values, columns = scores.topk(min(k, scores.shape[1]), dim=1)
    return values, columns + first_column


def _best_of(parts: list[tuple[torch.Tensor, torch.Tensor]], k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's ``k`` best of several ``_best`` results for the same rows."""
    import torch

    values, columns = torch.cat([v for v, _ in parts], dim=1), torch.cat([c for _, c in parts], dim=1)
    best, at = values.topk(k, dim=1)
    return best, columns.gather(1, at)
