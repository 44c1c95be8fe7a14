"""sbert-qdrant: Sentence-BERT encoders and Qdrant text collections."""

from __future__ import annotations

from .encoder import (
    DEFAULT_MODEL,
    AttentionPooling,
    Dense,
    Normalize,
    Pooling,
    SentenceEncoder,
    Transformer,
    WeightedLayerPooling,
)
from .errors import (
    InvalidArgumentError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    SbertQdrantError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL",
    "AttentionPooling",
    "Dense",
    "InvalidArgumentError",
    "InvalidInputError",
    "ModelLoadError",
    "ModelNotFoundError",
    "Normalize",
    "Pooling",
    "SbertQdrantError",
    "SentenceEncoder",
    "Transformer",
    "WeightedLayerPooling",
    "__version__",
]
