"""Regression objectives on the cosine of a pair: CosineSimilarityLoss (MSE) and CoSENTLoss (ranking)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ...encoder import SentenceEncoder
from ...types import LabelKind
from .base import Batch, SentenceObjective


def _pair_cosine(embeddings: list[torch.Tensor]) -> torch.Tensor:
    u, v = embeddings
    return nn.functional.cosine_similarity(u, v, dim=1)


class CosineSimilarityLoss(SentenceObjective):
    """Mean squared error between cos(u, v) and a gold score in 0..1 (the SBERT paper's regression objective).

    Inputs: (sentence1, sentence2) pairs with a score label (read STS-B with ``read_scored_pairs``).
    """

    label_kind: ClassVar[LabelKind | None] = "score"

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        return nn.functional.mse_loss(_pair_cosine(embeddings), self.batch_labels(batch))


class CoSENTLoss(SentenceObjective):
    """CoSENT: every pair scored higher by gold should have the higher cosine (log-sum-exp over misordered pairs).

    Inputs: (sentence1, sentence2) pairs with a score label; only the order of the scores matters.
    scale: sharpness of the penalty (20, as in the CoSENT paper).
    """

    label_kind: ClassVar[LabelKind | None] = "score"

    def __init__(self, encoder: SentenceEncoder, scale: float = 20.0) -> None:
        super().__init__(encoder)
        self.scale = scale

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        cosine = _pair_cosine(embeddings) * self.scale
        # diff[i, j] = cos_j - cos_i, counted where gold says pair i is more similar than pair j.
        diff = cosine[None, :] - cosine[:, None]
        gold = self.batch_labels(batch)
        misordered = gold[:, None] > gold[None, :]
        diff = diff.masked_fill(~misordered, float("-inf"))
        zero = torch.zeros(1, device=diff.device, dtype=diff.dtype)
        return torch.logsumexp(torch.cat([zero, diff.flatten()]), dim=0)
