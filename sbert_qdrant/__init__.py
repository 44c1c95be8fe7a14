"""sbert-qdrant: Sentence-BERT encoders and Qdrant text collections."""

from __future__ import annotations

from importlib import metadata as _metadata

from .aio import AsyncTextCollection
from .collection import DuplicatePair, TextCollection
from .dedup import Calibration
from .documents import ChunkHit, DocumentHit, StoredDocument
from .encoder import (
    DEFAULT_MODEL,
    AttentionPooling,
    Bm25,
    CrossEncoder,
    Dense,
    Normalize,
    Pooling,
    RankedText,
    SentenceEncoder,
    Transformer,
    WeightedLayerPooling,
)
from .errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    DataFormatError,
    InvalidArgumentError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    PartialWriteError,
    SbertQdrantError,
    StoreError,
    StoreInUseError,
    StoreUnavailableError,
    UnsupportedError,
)
from .records import Hit, StoredText, TextRecord, UpsertResult
from .settings import Settings
from .store import RetryPolicy

try:  # pyproject.toml is the one place the version is written; the installed metadata carries it here
    __version__ = _metadata.version("sbert-qdrant")
except _metadata.PackageNotFoundError:  # a source tree on sys.path that pip never installed
    __version__ = "0+unknown"

__all__ = [
    "DEFAULT_MODEL",
    "AsyncTextCollection",
    "AttentionPooling",
    "Bm25",
    "Calibration",
    "ChunkHit",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "CrossEncoder",
    "DataFormatError",
    "Dense",
    "DocumentHit",
    "DuplicatePair",
    "Hit",
    "InvalidArgumentError",
    "InvalidInputError",
    "ModelLoadError",
    "ModelNotFoundError",
    "Normalize",
    "PartialWriteError",
    "Pooling",
    "RankedText",
    "RetryPolicy",
    "SbertQdrantError",
    "SentenceEncoder",
    "Settings",
    "StoreError",
    "StoreInUseError",
    "StoreUnavailableError",
    "StoredDocument",
    "StoredText",
    "TextCollection",
    "TextRecord",
    "Transformer",
    "UnsupportedError",
    "UpsertResult",
    "WeightedLayerPooling",
    "__version__",
]
