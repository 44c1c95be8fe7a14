"""MaxSimRankingLoss: ColBERT-style contrastive training of a late-interaction (multi-vector) model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from ...encoder.features import Features
from ...encoder.multivector import MultiVectorEncoder
from ...errors import InvalidArgumentError
from ...types import LabelKind
from ..data import Example
from .base import Batch, Columns, Objective


class MaxSimRankingLoss(Objective[MultiVectorEncoder]):
    """Each query must pick its own positive by MaxSim among every positive and hard negative in the batch.

    Inputs: (query, positive) or (query, positive, negative, ...) with mined hard negatives; no label. A text's
    score is MaxSim (for each query token its best document token, summed), documents without their skiplist
    tokens, as ``encode_query`` / ``encode_document`` read them; the loss is the cross-entropy of ``scale * MaxSim``
    over the batch's candidates. ``train_transformer=False`` (the default) trains the token projection alone, the
    transformer run without gradients (about a third of the cost of a step, and it may stay shared with a dense
    encoder); True trains both.
    """

    min_texts: ClassVar[int] = 2
    max_texts: ClassVar[int] = 16
    label_kind: ClassVar[LabelKind | None] = None

    def __init__(self, encoder: MultiVectorEncoder, scale: float = 1.0, train_transformer: bool = False) -> None:
        super().__init__(encoder)
        if not scale > 0:
            raise InvalidArgumentError(f"scale={scale!r} must be positive.")
        if encoder.projection is None and not train_transformer:
            raise InvalidArgumentError(
                "the encoder has no token projection and train_transformer=False leaves nothing to train; make one "
                "with MultiVectorEncoder.from_encoder(encoder, dimension=128), or pass train_transformer=True."
            )
        self.scale = scale
        self.train_transformer = train_transformer

    def train(self, mode: bool = True) -> MaxSimRankingLoss:
        """Training mode, but a frozen transformer stays in eval mode (no dropout: it reads as it will serve)."""
        super().train(mode)
        if not self.train_transformer:
            self.encoder.transformer.eval()
        return self

    def tokenize(self, examples: Sequence[Example]) -> Columns:
        """One column of token ids per text position (the query first)."""
        tokenize = self.encoder.transformer.tokenize
        return [tokenize([e.texts[c] for e in examples])[0] for c in range(len(examples[0].texts))]

    def collate(self, columns: Columns, index: list[int]) -> list[Features]:
        """One padded batch per column."""
        collate, device = self.encoder.transformer.collate, self.encoder.device
        return [collate([column[i] for i in index], device) for column in columns]

    def _tokens(self, features: Features, document: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Token vectors ``(batch, tokens, dim)`` and the mask of those MaxSim reads (no padding, no skiplist)."""
        with torch.set_grad_enabled(self.train_transformer and torch.is_grad_enabled()):
            hidden = self.encoder.transformer(features)["token_embeddings"]
        mask = features["attention_mask"].bool()
        if document and self.encoder.skiplist_ids:
            skip = torch.tensor(sorted(self.encoder.skiplist_ids), device=mask.device)
            mask &= ~torch.isin(features["input_ids"], skip)
        return self.encoder.token_vectors(hidden).float(), mask

    def maxsim(self, batch: Batch) -> torch.Tensor:
        """MaxSim of every query against every candidate, ``(size, size * (texts - 1))``, positives first."""
        query, query_mask = self._tokens(batch.features[0], document=False)
        columns = [self._tokens(features, document=True) for features in batch.features[1:]]
        width = max(tokens.shape[1] for tokens, _ in columns)
        documents = torch.cat([nn.functional.pad(t, (0, 0, 0, width - t.shape[1])) for t, _ in columns])
        masks = torch.cat([nn.functional.pad(m, (0, width - m.shape[1])) for _, m in columns])
        pairs = torch.einsum("qid,cjd->qcij", query, documents)  # query token i against candidate token j
        best = pairs.masked_fill(~masks[None, :, None, :], float("-inf")).amax(dim=-1)
        return (best.nan_to_num(0.0, neginf=0.0) * query_mask[:, None, :]).sum(dim=-1)

    def forward(self, batch: Batch) -> torch.Tensor:
        target = torch.arange(batch.size, device=self.encoder.device)
        return nn.functional.cross_entropy(self.scale * self.maxsim(batch), target)
