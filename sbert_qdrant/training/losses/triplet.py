"""TripletLoss: the anchor must be closer to the positive than to the negative by a margin."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ...encoder import SentenceEncoder
from ...errors import InvalidArgumentError
from ...types import TRIPLET_DISTANCES, LabelKind, TripletDistance
from .base import Batch, SentenceObjective


def pair_distance(a: torch.Tensor, b: torch.Tensor, distance: TripletDistance) -> torch.Tensor:
    """Row-wise distance between two ``(batch, dim)`` tensors."""
    if distance == "euclid":
        return (a - b).norm(p=2, dim=1)
    if distance == "manhattan":
        return (a - b).abs().sum(dim=1)
    return 1 - nn.functional.cosine_similarity(a, b, dim=1)


class TripletLoss(SentenceObjective):
    """``max(d(a, p) - d(a, n) + margin, 0)`` averaged over the batch.

    Inputs: (anchor, positive, negative) triplets, no label. Euclidean distance (``"euclid"``, Qdrant's name) with
    margin 1, as in the SBERT paper, by default; ``distance="cosine"`` or ``"manhattan"`` change the metric (pick
    the margin to match).
    """

    min_texts: ClassVar[int] = 3
    max_texts: ClassVar[int] = 3
    label_kind: ClassVar[LabelKind | None] = None

    def __init__(self, encoder: SentenceEncoder, distance: TripletDistance = "euclid", margin: float = 1.0) -> None:
        super().__init__(encoder)
        if distance == "euclidean":  # the old name: refused, naming the new one
            raise InvalidArgumentError(
                "distance='euclidean' is no longer accepted; pass distance='euclid' (Qdrant's name for Euclidean "
                f"distance). Distances: {', '.join(TRIPLET_DISTANCES)}."
            )
        if distance not in TRIPLET_DISTANCES:
            raise InvalidArgumentError(f"distance={distance!r} is not one of {', '.join(TRIPLET_DISTANCES)}.")
        if margin < 0:
            raise InvalidArgumentError(f"margin={margin!r} must be >= 0.")
        self.distance: TripletDistance = distance
        self.margin = margin

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        anchor, positive, negative = embeddings
        gap = pair_distance(anchor, positive, self.distance) - pair_distance(anchor, negative, self.distance)
        return torch.relu(gap + self.margin).mean()
