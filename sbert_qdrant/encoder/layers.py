"""Layers applied to the pooled sentence vector: Dense projection and L2 normalisation."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from ..errors import InvalidArgumentError, ModelLoadError
from .base import EncoderModule
from .features import Features

#: Activations a saved Dense may name; anything else is refused rather than imported.
_ACTIVATIONS: dict[str, type[nn.Module]] = {
    "torch.nn.modules.activation.Tanh": nn.Tanh,
    "torch.nn.modules.linear.Identity": nn.Identity,
    "torch.nn.modules.activation.ReLU": nn.ReLU,
    "torch.nn.modules.activation.GELU": nn.GELU,
    "torch.nn.modules.activation.Sigmoid": nn.Sigmoid,
}
_SHORT_NAMES = {cls.__name__.lower(): name for name, cls in _ACTIVATIONS.items()}


def l2_normalize(vectors: torch.Tensor) -> torch.Tensor:
    """Unit-length rows (zero rows stay zero)."""
    return nn.functional.normalize(vectors, p=2, dim=1)


class Dense(EncoderModule):
    """A linear projection of the sentence vector (e.g. 384 -> 128 to shrink Qdrant memory)."""

    module_type: ClassVar[str] = "sentence_transformers.models.Dense"

    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation: str = "identity") -> None:
        super().__init__()
        name = _SHORT_NAMES.get(activation.lower(), activation)
        if name not in _ACTIVATIONS:
            raise InvalidArgumentError(
                f"activation {activation!r} is not supported; use one of {sorted(_SHORT_NAMES)}."
            )
        self.activation_name = name
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.activation = _ACTIVATIONS[name]()

    @property
    def output_dimension(self) -> int:
        return self.linear.out_features

    def forward(self, features: Features) -> Features:
        vectors = features["sentence_embedding"].to(self.linear.weight.dtype)
        features["sentence_embedding"] = self.activation(self.linear(vectors))
        return features

    def config(self) -> dict[str, Any]:
        return {
            "in_features": self.linear.in_features,
            "out_features": self.linear.out_features,
            "bias": self.linear.bias is not None,
            "activation_function": self.activation_name,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Dense:
        try:
            return cls(
                int(config["in_features"]),
                int(config["out_features"]),
                bool(config.get("bias", True)),
                str(config.get("activation_function", "torch.nn.modules.activation.Tanh")),
            )
        except KeyError as exc:
            raise ModelLoadError(f"Dense config {config!r} lacks {exc}.") from None


class Normalize(EncoderModule):
    """L2-normalises the sentence vector, so that dot product equals cosine."""

    module_type: ClassVar[str] = "sentence_transformers.models.Normalize"

    def forward(self, features: Features) -> Features:
        features["sentence_embedding"] = l2_normalize(features["sentence_embedding"])
        return features

    def config(self) -> dict[str, Any]:
        return {}

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)  # sentence-transformers writes an empty folder

    @classmethod
    def load(cls, folder: Path) -> Normalize:
        return cls()
