"""OnlineContrastiveLoss: contrastive loss on the hard pairs of each batch (the Quora duplicate recipe)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ...encoder import SentenceEncoder
from ...errors import InvalidArgumentError
from ...types import LabelKind
from .base import Batch, SentenceObjective


class OnlineContrastiveLoss(SentenceObjective):
    """Pull hard duplicates together, push hard non-duplicates beyond ``margin`` in cosine distance.

    Inputs: (text1, text2) pairs labelled 1 (duplicate) or 0. Only the hard pairs count: duplicates farther
    apart than the closest non-duplicate, and non-duplicates closer than the farthest duplicate.
    """

    label_kind: ClassVar[LabelKind | None] = "binary"

    def __init__(self, encoder: SentenceEncoder, margin: float = 0.5) -> None:
        super().__init__(encoder)
        if margin <= 0:
            raise InvalidArgumentError(f"margin={margin!r} must be positive (a cosine distance, e.g. 0.5).")
        self.margin = margin

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        u, v = embeddings
        distance = 1 - nn.functional.cosine_similarity(u, v, dim=1)
        duplicate = self.batch_labels(batch) > 0.5
        pos, neg = distance[duplicate], distance[~duplicate]
        # With one side missing from the batch, compare against the other side's mean instead.
        hard_pos = pos[pos > (neg.min() if len(neg) > 1 else pos.mean())] if len(pos) else pos
        hard_neg = neg[neg < (pos.max() if len(pos) > 1 else neg.mean())] if len(neg) else neg
        return hard_pos.pow(2).sum() + torch.relu(self.margin - hard_neg).pow(2).sum()
