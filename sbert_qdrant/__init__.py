"""sbert-qdrant: Sentence-BERT encoders and Qdrant text collections."""

from __future__ import annotations

import importlib as _importlib
import typing as _typing
from importlib import metadata as _metadata

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

if _typing.TYPE_CHECKING:
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
    from .records import Hit, StoredText, TextRecord, UpsertResult
    from .settings import Settings
    from .store import RetryPolicy

#: Public names imported on first use (PEP 562), so that ``import sbert_qdrant`` (and a CLI verb or an MCP server
#: that has not yet touched a model) starts without loading torch, transformers and qdrant-client.
_LAZY = {
    "AsyncTextCollection": ".aio",
    "DuplicatePair": ".collection",
    "TextCollection": ".collection",
    "Calibration": ".dedup",
    "ChunkHit": ".documents",
    "DocumentHit": ".documents",
    "StoredDocument": ".documents",
    "DEFAULT_MODEL": ".encoder",
    "AttentionPooling": ".encoder",
    "Bm25": ".encoder",
    "CrossEncoder": ".encoder",
    "Dense": ".encoder",
    "Normalize": ".encoder",
    "Pooling": ".encoder",
    "RankedText": ".encoder",
    "SentenceEncoder": ".encoder",
    "Transformer": ".encoder",
    "WeightedLayerPooling": ".encoder",
    "Hit": ".records",
    "StoredText": ".records",
    "TextRecord": ".records",
    "UpsertResult": ".records",
    "Settings": ".settings",
    "RetryPolicy": ".store",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
