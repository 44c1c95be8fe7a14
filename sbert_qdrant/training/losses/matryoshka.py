"""MatryoshkaLoss: any bi-encoder objective summed over the leading dimensions of the embeddings, so that a vector
cut to its first 64, 128 or 256 numbers (``truncate_dim``) still ranks well (Matryoshka Representation Learning,
Kusupati et al. 2022)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...encoder.features import Features
from ...errors import InvalidArgumentError
from ..data import Example
from .base import Batch, Columns, SentenceObjective
from .softmax import SoftmaxLoss


class MatryoshkaLoss(SentenceObjective):
    """``inner``'s loss on the embeddings cut to each of ``dims``, weighted by ``weights`` (1 each) and summed.

    The texts are embedded once per batch; each dimension re-scores the same embeddings cut to their first ``d``
    numbers, so the cost is the inner loss's, not one pass per dimension. ``inner`` reads the examples (its columns,
    its labels); any bi-encoder objective works but ``SoftmaxLoss``, whose classifier takes full-size vectors.

    ```python
    loss = MatryoshkaLoss(MultipleNegativesRankingLoss(encoder), dims=(384, 256, 128, 64))
    ```
    """

    def __init__(self, inner: SentenceObjective, dims: Sequence[int], weights: Sequence[float] | None = None) -> None:
        if not isinstance(inner, SentenceObjective) or isinstance(inner, (SoftmaxLoss, MatryoshkaLoss)):
            raise InvalidArgumentError(
                f"MatryoshkaLoss wraps a bi-encoder objective on the embeddings (MultipleNegativesRankingLoss, "
                f"CoSENTLoss, ...), not {type(inner).__name__}: SoftmaxLoss's classifier takes full-size vectors."
            )
        super().__init__(inner.encoder)
        size = inner.encoder.dimension
        chosen = list(dims) if isinstance(dims, Sequence) and not isinstance(dims, str) else []
        if not chosen or any(isinstance(d, bool) or not isinstance(d, int) or not 0 < d <= size for d in chosen):
            raise InvalidArgumentError(
                f"dims={dims!r} must be a non-empty list of dimensions between 1 and the encoder's {size}, "
                f"e.g. ({size}, {size // 2}, {size // 4})."
            )
        if len(set(chosen)) != len(chosen):
            raise InvalidArgumentError(f"dims={dims!r} names a dimension twice; give each once.")
        factors = [1.0] * len(chosen) if weights is None else list(weights)
        if len(factors) != len(chosen) or any(
            isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0 for w in factors
        ):
            raise InvalidArgumentError(
                f"weights={weights!r} must give one non-negative number per dimension of dims={chosen}, or be None."
            )
        self.inner = inner
        self.dims = tuple(chosen)
        self.weights = tuple(float(w) for w in factors)

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        return torch.stack([w * self.inner.loss([e[:, :d] for e in embeddings], batch) for d, w in self.terms()]).sum()

    def losses(self, batch: Batch) -> dict[int, torch.Tensor]:
        """The inner loss at each dimension, unweighted (what each cut contributes; for inspection)."""
        embeddings = self.embed(batch)
        return {d: self.inner.loss([e[:, :d] for e in embeddings], batch) for d, _ in self.terms()}

    def terms(self) -> list[tuple[int, float]]:
        return list(zip(self.dims, self.weights, strict=True))

    # the inner objective reads the examples

    def tokenize(self, examples: Sequence[Example]) -> Columns:
        return self.inner.tokenize(examples)

    def collate(self, columns: Columns, index: list[int]) -> list[Features]:
        return self.inner.collate(columns, index)

    def check_examples(self, examples: Sequence[Example], name: str = "examples") -> None:
        self.inner.check_examples(examples, name)

    def labels_tensor(self, labels: Sequence[float | int | None]) -> torch.Tensor | None:
        return self.inner.labels_tensor(labels)
