"""Pooling: token vectors -> one sentence vector.

Static modes (:class:`Pooling`) follow sentence-transformers; the trainable ones
(:class:`WeightedLayerPooling`, :class:`AttentionPooling`) are sbert-qdrant modules that start out
equal to a static pooling and learn from there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from ..errors import InvalidArgumentError
from .base import EncoderModule
from .features import Features
from .folder import POOLING_MODES, ST_MODE_NAMES, pooling_config, pooling_settings


def _pool_one(mode: str, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Pool ``tokens`` (batch, seq, dim; float32) under a 0/1 ``mask`` (batch, seq, 1).

    The mask is right-padded and may have a zeroed prompt prefix; a row with no counted token pools
    as sentence-transformers does (cls: position 0; mean, last_token: zeros; max: -inf).
    """
    rows = torch.arange(tokens.shape[0], device=tokens.device)
    flags = mask.squeeze(-1)
    if mode == "cls":
        return tokens[rows, flags.argmax(dim=1)]  # argmax gives the first counted position
    if mode == "max":
        return tokens.masked_fill(mask == 0, float("-inf")).amax(dim=1)
    if mode == "last_token":
        last = flags.shape[1] - 1 - flags.flip(1).argmax(dim=1)
        return tokens[rows, last] * flags[rows, last].unsqueeze(-1)
    if mode == "weighted_mean":
        positions = torch.arange(1, tokens.shape[1] + 1, device=tokens.device, dtype=tokens.dtype)
        mask = mask * positions.view(1, -1, 1)
    summed = (tokens * mask).sum(dim=1)
    count = mask.sum(dim=1).clamp(min=1e-9)
    return summed / (count.sqrt() if mode == "mean_sqrt_len" else count)


class Pooling(EncoderModule):
    """Mean (default), max, cls, mean_sqrt_len, weighted_mean or last_token pooling, or several concatenated.

    include_prompt: False leaves a prompt's tokens (``features["prompt_length"]`` leading positions,
    the start token included) out of pooling, as sentence-transformers does for INSTRUCTOR-style models.
    """

    module_type: ClassVar[str] = "sentence_transformers.models.Pooling"

    def __init__(self, dimension: int, modes: str | Sequence[str] = "mean", include_prompt: bool = True) -> None:
        super().__init__()
        chosen = (modes,) if isinstance(modes, str) else tuple(modes)
        unknown = [m for m in chosen if m not in ST_MODE_NAMES]
        if not chosen or unknown or len(set(chosen)) != len(chosen):
            raise InvalidArgumentError(
                f"pooling modes {chosen!r} are not valid; use one or more distinct of {POOLING_MODES}."
            )
        if not isinstance(include_prompt, bool):
            raise InvalidArgumentError(f"include_prompt={include_prompt!r} must be True or False.")
        self.dimension = dimension
        self.modes = chosen
        self.include_prompt = include_prompt

    @property
    def output_dimension(self) -> int:
        return self.dimension * len(self.modes)

    def forward(self, features: Features) -> Features:
        tokens = features["token_embeddings"].float()
        mask = features["attention_mask"]
        if not self.include_prompt and "prompt_length" in features:
            mask = mask.clone()
            mask[:, : int(features["prompt_length"].reshape(-1)[0])] = 0
        mask = mask.unsqueeze(-1).to(tokens.dtype)
        pooled = [_pool_one(mode, tokens, mask) for mode in self.modes]
        features["sentence_embedding"] = pooled[0] if len(pooled) == 1 else torch.cat(pooled, dim=1)
        return features

    def config(self) -> dict[str, Any]:
        return pooling_config(self.dimension, self.modes, self.include_prompt)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Pooling:
        dimension, modes, include_prompt = pooling_settings(config)
        return cls(dimension, modes, include_prompt=include_prompt)


class WeightedLayerPooling(EncoderModule):
    """Replaces ``token_embeddings`` by a learned softmax-weighted sum of hidden layers.

    Layers ``layer_start .. num_layers`` (0 is the embedding layer) take part; the weights start
    equal, so training begins from their plain average. Follow it with a :class:`Pooling`.
    """

    module_type: ClassVar[str] = "sbert_qdrant.WeightedLayerPooling"
    needs_all_layers: ClassVar[bool] = True

    def __init__(self, dimension: int, num_layers: int, layer_start: int = 1) -> None:
        super().__init__()
        if not 0 <= layer_start <= num_layers:
            raise InvalidArgumentError(f"layer_start={layer_start} must lie in 0..num_layers={num_layers}.")
        self.dimension = dimension
        self.num_layers = num_layers
        self.layer_start = layer_start
        self.layer_logits = nn.Parameter(torch.zeros(num_layers - layer_start + 1))

    def forward(self, features: Features) -> Features:
        layers = features["all_layer_embeddings"][self.layer_start :]
        if len(layers) != self.layer_logits.numel():
            raise InvalidArgumentError(
                f"the transformer gave {len(features['all_layer_embeddings']) - 1} layers but this pooling "
                f"was built for num_layers={self.num_layers}; rebuild it with the model's layer count."
            )
        weights = torch.softmax(self.layer_logits.float(), dim=0)
        stacked = torch.stack([layer.float() for layer in layers], dim=0)
        features["token_embeddings"] = torch.einsum("l,lbsd->bsd", weights, stacked)
        return features

    def config(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "num_layers": self.num_layers, "layer_start": self.layer_start}


class AttentionPooling(EncoderModule):
    """Attention over tokens with one learned query; starts as mean pooling (query = 0)."""

    module_type: ClassVar[str] = "sbert_qdrant.AttentionPooling"

    def __init__(self, dimension: int) -> None:
        super().__init__()
        self.dimension = dimension
        self.query = nn.Parameter(torch.zeros(dimension))

    @property
    def output_dimension(self) -> int:
        return self.dimension

    def forward(self, features: Features) -> Features:
        tokens = features["token_embeddings"].float()
        scores = tokens @ self.query.float() / math.sqrt(self.dimension)
        scores = scores.masked_fill(features["attention_mask"] == 0, float("-inf"))
        weights = torch.softmax(scores, dim=1).unsqueeze(-1)
        features["sentence_embedding"] = (weights * tokens).sum(dim=1)
        return features

    def config(self) -> dict[str, Any]:
        return {"dimension": self.dimension}
