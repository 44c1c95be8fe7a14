"""Cross-encoder objectives: binary cross-entropy for duplicate / relevant pairs, MSE on gold similarity scores."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from ...encoder import CrossEncoder
from ...encoder.base import Features
from ...errors import InvalidArgumentError
from ..data import Example, LabelKind
from .base import Batch, Columns, Objective

logger = logging.getLogger(__name__)


class CrossEncoderObjective(Objective[CrossEncoder]):
    """An objective over a :class:`CrossEncoder` with one score per pair: both texts of a pair read together."""

    def __init__(self, encoder: CrossEncoder) -> None:
        super().__init__(encoder)
        if encoder.num_labels != 1:
            raise InvalidArgumentError(
                f"{type(self).__name__} trains one score per pair, but the cross-encoder has "
                f"num_labels={encoder.num_labels}; start one with CrossEncoder.from_transformer(num_labels=1)."
            )

    def tokenize(self, examples: Sequence[Example]) -> Columns:
        """Pair token ids, then their segment ids when the model takes them."""
        ids, types, cut = self.encoder.pair_token_ids([(e.texts[0], e.texts[1]) for e in examples])
        if cut:
            logger.warning("%d of %d training pairs were truncated to max_seq_length.", cut, len(ids))
        return [ids] if types is None else [ids, types]

    def collate(self, columns: Columns, index: list[int]) -> list[Features]:
        ids = [columns[0][i] for i in index]
        types = [columns[1][i] for i in index] if len(columns) > 1 else None
        return [self.encoder.collate(ids, types)]

    def logits(self, batch: Batch) -> torch.Tensor:
        """One float32 logit per pair, shape ``(size,)``."""
        return self.encoder(batch.features[0])[:, 0].float()


class CrossEncoderBCELoss(CrossEncoderObjective):
    """Binary cross-entropy of the pair's logit against a 0/1 label (duplicate, relevant, ...).

    Inputs: (text1, text2) pairs labelled 1 or 0 (read Quora with ``read_binary_pairs``), or a soft label in 0..1
    (a teacher's probability). The trained model scores pairs with sigmoid(logit), sentence-transformers' default
    activation for one label.
    """

    label_kind: ClassVar[LabelKind | None] = "binary"

    def forward(self, batch: Batch) -> torch.Tensor:
        return nn.functional.binary_cross_entropy_with_logits(self.logits(batch), self.batch_labels(batch))


class CrossEncoderMSELoss(CrossEncoderObjective):
    """Mean squared error between sigmoid(logit) and a gold score in 0..1 (STS regression).

    Inputs: (sentence1, sentence2) pairs with a score label (read STS-B with ``read_scored_pairs``, which scales
    0..5 to 0..1), so ``predict``'s default sigmoid output estimates the gold score.
    """

    label_kind: ClassVar[LabelKind | None] = "score"

    def forward(self, batch: Batch) -> torch.Tensor:
        return nn.functional.mse_loss(torch.sigmoid(self.logits(batch)), self.batch_labels(batch))
