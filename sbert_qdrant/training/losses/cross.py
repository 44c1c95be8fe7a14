"""Cross-encoder objectives: binary cross-entropy for duplicate / relevant pairs, MSE on gold similarity scores,
listwise softmax cross-entropy over (query, positive, negatives...) groups."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from ...encoder import CrossEncoder
from ...encoder.features import Features
from ...errors import InvalidArgumentError
from ...types import LabelKind
from ..data import Example
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


class CrossEncoderListwiseLoss(CrossEncoderObjective):
    """Softmax cross-entropy over each group's logits: the query's positive must outscore its negatives.

    Inputs: (query, positive, negative_1, ..., negative_k) with the same k in every example; no label. The k + 1
    pairs (query, text) of a group are scored in one forward pass, and the loss is the cross-entropy of
    ``scale * logits`` with target 0 (the positive). Hard negatives (the query's nearest texts by a retriever) train
    it for re-ranking. ``predict``'s scores order candidates; its sigmoid is not a calibrated probability.
    """

    min_texts: ClassVar[int] = 3
    max_texts: ClassVar[int] = 64
    label_kind: ClassVar[LabelKind | None] = None

    def __init__(self, encoder: CrossEncoder, scale: float = 1.0) -> None:
        super().__init__(encoder)
        if scale <= 0:
            raise InvalidArgumentError(f"scale={scale!r} must be positive.")
        self.scale = scale

    def _with_types(self) -> bool:
        return "token_type_ids" in self.encoder.transformer.tokenizer.model_input_names

    def tokenize(self, examples: Sequence[Example]) -> Columns:
        """Per candidate position: the (query, candidate) pairs' token ids, then their segment ids when taken."""
        columns: Columns = []
        cut = 0
        for c in range(1, len(examples[0].texts)):
            ids, types, cut_here = self.encoder.pair_token_ids([(e.texts[0], e.texts[c]) for e in examples])
            cut += cut_here
            columns += [ids] if types is None else [ids, types]
        if cut:
            logger.warning("%d training pairs were truncated to max_seq_length.", cut)
        return columns

    def collate(self, columns: Columns, index: list[int]) -> list[Features]:
        """One padded batch of every pair, group by group (query i's candidates at rows i * (k + 1) ...)."""
        stride = 2 if self._with_types() else 1
        positions = range(0, len(columns), stride)
        ids = [columns[c][i] for i in index for c in positions]
        types = [columns[c + 1][i] for i in index for c in positions] if stride == 2 else None
        return [self.encoder.collate(ids, types)]

    def forward(self, batch: Batch) -> torch.Tensor:
        scores = self.scale * self.logits(batch).view(batch.size, -1)
        target = torch.zeros(batch.size, dtype=torch.long, device=scores.device)
        return nn.functional.cross_entropy(scores, target)
