"""What every objective shares: the batch it receives, its example checks, and how it tokenizes and collates examples.

Bi-encoder objectives (:class:`SentenceObjective`) embed each text column on its own; cross-encoder objectives
(``CrossEncoderObjective``) read the two texts of a pair together.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

import torch
from torch import nn

from ...encoder import CrossEncoder, MultiVectorEncoder, SentenceEncoder
from ...encoder.features import Features
from ...errors import InvalidInputError
from ...types import LabelKind
from ..data import Example

logger = logging.getLogger(__name__)

#: The model an objective trains.
ModelT = TypeVar("ModelT", SentenceEncoder, CrossEncoder, MultiVectorEncoder)
#: What the Trainer trains.
Trainable = SentenceEncoder | CrossEncoder | MultiVectorEncoder
#: Token id rows per column, as :meth:`Objective.tokenize` returns them.
Columns = list[list[list[int]]]


@dataclass
class Batch:
    """``size`` examples, each text column collated on its own (padded to that column's longest text)."""

    features: list[Features]
    size: int
    labels: torch.Tensor | None = None


class Objective(nn.Module, Generic[ModelT]):
    """A training objective over a model (``encoder``); ``forward(batch)`` returns the scalar loss.

    Subclasses declare how many texts an example holds (``min_texts``..``max_texts``) and the label they need
    (``label_kind``, None for unlabelled examples), and how examples become batches (``tokenize``, once per run,
    then ``collate`` per batch). The model is a sub-module, so its parameters train.
    """

    min_texts: ClassVar[int] = 2
    max_texts: ClassVar[int] = 2
    label_kind: ClassVar[LabelKind | None] = None

    def __init__(self, encoder: ModelT) -> None:
        super().__init__()
        self.encoder: ModelT = encoder

    def tokenize(self, examples: Sequence[Example]) -> Columns:
        """The examples' token ids, in columns that ``collate`` reads."""
        raise NotImplementedError

    def collate(self, columns: Columns, index: list[int]) -> list[Features]:
        """The model inputs of the examples at ``index`` on the model's device."""
        raise NotImplementedError

    def check_examples(self, examples: Sequence[Example], name: str = "examples") -> None:
        """Refuse examples this objective cannot use, naming the first bad one."""
        if not examples:
            raise InvalidInputError(f"{name} is empty; {type(self).__name__} needs at least one example.")
        width = len(examples[0].texts)
        for i, example in enumerate(examples):
            count = len(example.texts)
            if count != width or not self.min_texts <= count <= self.max_texts:
                allowed = (
                    f"{self.min_texts}" if self.min_texts == self.max_texts else f"{self.min_texts}..{self.max_texts}"
                )
                raise InvalidInputError(
                    f"{name}[{i}] has {count} texts; {type(self).__name__} needs {allowed}, the same in every "
                    f"example (the first has {width})."
                )
            if (example.label is None) != (self.label_kind is None):
                need = f"a {self.label_kind} label" if self.label_kind else "no label"
                raise InvalidInputError(f"{name}[{i}] has label {example.label!r}; {type(self).__name__} needs {need}.")

    def batch_labels(self, batch: Batch) -> torch.Tensor:
        """The batch's labels, or an error when an objective that needs them gets none."""
        if batch.labels is None:
            raise InvalidInputError(f"{type(self).__name__} needs labelled examples; this batch has no labels.")
        return batch.labels

    def labels_tensor(self, labels: Sequence[float | int | None]) -> torch.Tensor | None:
        """Labels as a tensor of the dtype this objective's loss takes (None when unlabelled)."""
        if self.label_kind is None:
            return None
        dtype = torch.long if self.label_kind == "class" else torch.float32
        return torch.tensor(labels, dtype=dtype)


class SentenceObjective(Objective[SentenceEncoder]):
    """An objective over a bi-encoder (:class:`SentenceEncoder`): each text column is embedded on its own."""

    def embed(self, batch: Batch) -> list[torch.Tensor]:
        """One float32 ``(size, dim)`` tensor per text column, one forward pass per column.

        Separate passes pad each column to its own longest text; one pass over all columns would pad short
        hypotheses to the longest premise (about a third more tokens on NLI).
        """
        return [self.encoder(features)["sentence_embedding"].float() for features in batch.features]

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.loss(self.embed(batch), batch)

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        """The loss of a batch from its columns' embeddings (what ``MatryoshkaLoss`` calls on truncated ones)."""
        raise NotImplementedError

    def tokenize(self, examples: Sequence[Example]) -> Columns:
        """One column of token ids per text position."""
        columns = []
        for c in range(len(examples[0].texts)):
            ids, cut = self.encoder.transformer.tokenize([e.texts[c] for e in examples])
            if cut:
                logger.warning("%d of %d training texts were truncated to max_seq_length.", cut, len(ids))
            columns.append(ids)
        return columns

    def collate(self, columns: Columns, index: list[int]) -> list[Features]:
        """One padded batch per column."""
        collate, device = self.encoder.transformer.collate, self.encoder.device
        return [collate([column[i] for i in index], device) for column in columns]


def make_batch(objective: Objective, examples: Sequence[Example]) -> Batch:
    """Tokenize and collate examples for ``objective`` on its model's device (for ad-hoc use and tests)."""
    objective.check_examples(examples)
    features = objective.collate(objective.tokenize(examples), list(range(len(examples))))
    labels = objective.labels_tensor([e.label for e in examples])
    return Batch(features, len(examples), None if labels is None else labels.to(objective.encoder.device))
