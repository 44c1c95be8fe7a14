"""What every objective shares: the batch it receives and how it embeds the batch's text columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from ...encoder import SentenceEncoder
from ...encoder.base import Features
from ...errors import InvalidInputError
from ..data import Example, LabelKind


@dataclass
class Batch:
    """``size`` examples, each text column collated on its own (padded to that column's longest text)."""

    features: list[Features]
    size: int
    labels: torch.Tensor | None = None


class Objective(nn.Module):
    """A training objective over an encoder; ``forward(batch)`` returns the scalar loss.

    Subclasses declare how many texts an example holds (``min_texts``..``max_texts``) and the label they need
    (``label_kind``, None for unlabelled examples). The encoder is a sub-module, so its parameters train.
    """

    min_texts: ClassVar[int] = 2
    max_texts: ClassVar[int] = 2
    label_kind: ClassVar[LabelKind | None] = None

    def __init__(self, encoder: SentenceEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def embed(self, batch: Batch) -> list[torch.Tensor]:
        """One float32 ``(size, dim)`` tensor per text column, one forward pass per column.

        Separate passes pad each column to its own longest text; one pass over all columns would pad short
        hypotheses to the longest premise (about a third more tokens on NLI).
        """
        return [self.encoder(features)["sentence_embedding"].float() for features in batch.features]

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


def make_batch(objective: Objective, examples: Sequence[Example]) -> Batch:
    """Tokenize and collate examples for ``objective`` on its encoder's device (for ad-hoc use and tests)."""
    objective.check_examples(examples)
    encoder = objective.encoder
    columns = [encoder.tokenize([example.texts[c] for example in examples]) for c in range(len(examples[0].texts))]
    labels = objective.labels_tensor([e.label for e in examples])
    return Batch(columns, len(examples), None if labels is None else labels.to(encoder.device))
