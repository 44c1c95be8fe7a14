"""MultipleNegativesRankingLoss: in-batch negatives, optional hard negatives, optional symmetric term."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ...encoder import SentenceEncoder
from ...errors import InvalidArgumentError
from ...types import LabelKind
from .base import Batch, SentenceObjective


def _cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return nn.functional.normalize(a, dim=1) @ nn.functional.normalize(b, dim=1).T


class MultipleNegativesRankingLoss(SentenceObjective):
    """Each anchor must pick its own positive among every positive (and hard negative) in the batch.

    Inputs: (anchor, positive) pairs, or (anchor, positive, negative, ...) with hard negatives; no label.
    Cross-entropy over ``scale * cos``; with ``symmetric=True`` each positive must also pick its anchor
    (the two losses averaged). Larger batches give more negatives.
    """

    min_texts: ClassVar[int] = 2
    max_texts: ClassVar[int] = 16
    label_kind: ClassVar[LabelKind | None] = None

    def __init__(self, encoder: SentenceEncoder, scale: float = 20.0, symmetric: bool = False) -> None:
        super().__init__(encoder)
        if scale <= 0:
            raise InvalidArgumentError(f"scale={scale!r} must be positive.")
        self.scale = scale
        self.symmetric = symmetric

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        anchor, positive, *negatives = embeddings
        candidates = torch.cat([positive, *negatives], dim=0)
        target = torch.arange(batch.size, device=anchor.device)
        loss = nn.functional.cross_entropy(self.scale * _cosine_matrix(anchor, candidates), target)
        if not self.symmetric:
            return loss
        backward = nn.functional.cross_entropy(self.scale * _cosine_matrix(positive, anchor), target)
        return (loss + backward) / 2
