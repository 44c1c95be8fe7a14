"""Static int8 for a cross-encoder on the bi-encoder's rule: activation ranges calibrated on (query, text) pairs like
those it will score, checked against fp32 on held-apart groups (one query and its candidates, as a re-rank stage
sees them), and saved with the folder together with the loss measured on this CPU's int8 ISA. ``CrossEncoder.load(
folder, precision="auto")`` then runs static int8 where that loss is within ``RERANK_EXACT_GRADE_LOSS``.

The loss is the ranking the re-rank stage would return: 100 x (1 - mean nDCG@10 of the int8 order, with the fp32
scores as the gains), so 0 where int8 orders every group as fp32 does; no labels needed.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InvalidArgumentError, InvalidInputError, UnsupportedError
from .cross_encoder import CrossEncoder
from .cross_loading import RERANK_EXACT_GRADE_LOSS
from .int8.calibration import ActivationRanges, int8_isa

#: The measure recorded in the ranges' losses.
AGREEMENT = "rerank-ndcg@10-vs-fp32"


@dataclass(frozen=True)
class Int8Check:
    """What ``certify_int8`` measured: the int8 ISA, the loss (nDCG@10 x100 of the int8 order against fp32's) over
    ``groups`` held-apart groups, whether that is exact-grade, and the ranges (saved with the folder)."""

    isa: str
    loss: float
    groups: int
    ranges: ActivationRanges

    @property
    def exact_grade(self) -> bool:
        return self.loss <= RERANK_EXACT_GRADE_LOSS

    def report(self) -> str:
        verdict = (
            "exact-grade: precision='auto' runs static int8"
            if self.exact_grade
            else "not exact-grade: 'auto' keeps fp32/bf16"
        )
        return (
            f"static int8 ({self.isa}) vs fp32 on {self.groups} held-apart groups: nDCG@10 loss {self.loss:.3f} "
            f"(limit {RERANK_EXACT_GRADE_LOSS}); {verdict}"
        )


def certify_int8(
    cross_encoder: CrossEncoder,
    calibration_pairs: Sequence[tuple[str, str]],
    groups: Sequence[tuple[str, Sequence[str]]],
    batch_size: int = 32,
) -> Int8Check:
    """Calibrate static int8 for an fp32 ``cross_encoder`` on ``calibration_pairs`` (a few hundred, e.g. its training
    pairs) and measure it against fp32 on ``groups`` (query, candidate texts) held apart from them; the ranges and
    the loss are kept on ``cross_encoder`` and written by its next ``save`` (``CrossEncoder.load(folder,
    precision="auto")`` reads them)."""
    if cross_encoder.precision != "fp32":
        raise InvalidArgumentError(
            f"certify_int8 needs the fp32 cross-encoder, not precision={cross_encoder.precision!r}; load it with "
            "precision='fp32'."
        )
    isa = int8_isa()
    if isa is None:
        raise UnsupportedError("static int8 does not run on this CPU (no VNNI or AVX2 int8 GEMM): nothing to certify.")
    checked = [(q, list(texts)) for q, texts in groups if len(texts) >= 2]
    if not checked:
        raise InvalidInputError("groups holds no query with two or more candidates; pass (query, [texts]) groups.")
    quantized = CrossEncoder(
        copy.deepcopy(cross_encoder.transformer),
        device="cpu",
        precision="int8",
        activation=cross_encoder.activation,
        calibration_pairs=calibration_pairs,
    )
    ranges = quantized.int8_ranges
    if ranges is None:
        raise UnsupportedError("static int8 did not calibrate on this CPU (it runs dynamic int8): nothing to certify.")
    pairs = [(q, t) for q, texts in checked for t in texts]
    exact = np.asarray(cross_encoder.predict(pairs, batch_size=batch_size), dtype=np.float64).ravel()
    fast = np.asarray(quantized.predict(pairs, batch_size=batch_size), dtype=np.float64).ravel()
    agreement, start = [], 0
    for _, texts in checked:
        end = start + len(texts)
        agreement.append(order_agreement(exact[start:end], fast[start:end]))
        start = end
    loss = 100 * (1 - float(np.mean(agreement)))
    check = Int8Check(isa, loss, len(checked), replace(ranges, losses={isa: {AGREEMENT: loss}}))
    cross_encoder.keep_int8_ranges(check.ranges)
    return check


def order_agreement(exact: np.ndarray, fast: np.ndarray, k: int = 10) -> float:
    """nDCG@k of the order of ``fast`` scores, the ``exact`` scores (shifted to start at 0) as the gains."""
    gains = exact - exact.min()
    ideal = sum(g / math.log2(rank + 2) for rank, g in enumerate(np.sort(gains)[::-1][:k]))
    if ideal == 0:
        return 1.0
    got = sum(gains[i] / math.log2(rank + 2) for rank, i in enumerate(np.argsort(-fast, kind="stable")[:k]))
    return float(got / ideal)


#: Candidates per held-apart group made from single pairs (a query, its own text and others' texts).
GROUP_SIZE = 8


def certification_split(
    rows: Sequence[Sequence[str]], groups: int = 50, seed: int = 0, calibration: int = 512
) -> tuple[list[tuple[str, str]], list[tuple[str, list[str]]]]:
    """Calibration pairs and held-apart groups for :func:`certify_int8` from training rows (a query then its texts:
    ``(query, positive, negatives...)`` or ``(text_a, text_b)``): the rows of each query join into one group, the
    groups are shuffled by ``seed``, up to ``groups`` (at most half of them) are held apart and the others give up
    to ``calibration`` (query, text) pairs. A held-apart query with one text is scored against it and
    ``GROUP_SIZE - 1`` other held-apart texts (pair data: the int8 order is still what a re-rank would return)."""
    by_query: dict[str, list[str]] = {}
    for row in rows:
        if len(row) >= 2:
            texts = by_query.setdefault(row[0], [])
            texts.extend(t for t in row[1:] if t not in texts)
    everything = list(by_query.items())
    random.Random(seed).shuffle(everything)
    held_count = min(groups, len(everything) // 2)
    if held_count == 0:
        return [], []
    held, rest = everything[:held_count], everything[held_count:]
    pairs = [(query, text) for query, texts in rest for text in texts][:calibration]
    pool = [text for _, texts in held for text in texts]
    checked = []
    for query, texts in held:
        if len(texts) == 1 and len(pool) > 1:
            start = pool.index(texts[0])
            others = [pool[(start + i) % len(pool)] for i in range(1, len(pool))]
            texts = [texts[0], *dict.fromkeys(t for t in others if t != texts[0])][:GROUP_SIZE]
        checked.append((query, list(texts)))
    return pairs, checked
