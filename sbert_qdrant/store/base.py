"""The shapes a store speaks in: collection specs and the records it returns (the protocol is in
``protocol_async.py``; ``protocol_sync.py`` is generated from it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from qdrant_client import models

from ..types import Fusion, Quantization

Payload = dict[str, Any]
#: Whole payloads (True), none (False), or only the fields named.
PayloadSelector = bool | list[str]
#: A sparse vector: (indices, values), in the same order.
Sparse = tuple[list[int], list[float]]


@dataclass(frozen=True)
class VectorSpec:
    """One dense vector of a collection: its size and distance."""

    size: int
    distance: str  # one of DISTANCES for collections we create; as the engine reports it otherwise


@dataclass(frozen=True)
class CollectionSpec:
    """What to create: one named dense vector, an optional sparse one (IDF modifier), index, storage, cluster."""

    name: str
    vector_name: str
    vector: VectorSpec
    sparse_name: str | None = None
    on_disk: bool = False
    hnsw: models.HnswConfigDiff | None = None
    quantization: Quantization | None = None
    shard_number: int | None = None
    replication_factor: int | None = None
    metadata: Payload = field(default_factory=dict)


@dataclass(frozen=True)
class ExistingCollection:
    """What an engine reports of a collection: its dense vectors by name, its sparse vector names, its metadata."""

    vectors: dict[str, VectorSpec]
    sparse_vectors: frozenset[str] = frozenset()
    metadata: Payload = field(default_factory=dict)


@dataclass(frozen=True)
class PointVectors:
    """The vectors of a batch of points: a dense matrix (one row per point) and optional sparse ones."""

    dense_name: str
    dense: np.ndarray
    sparse_name: str | None = None
    sparse: list[Sparse] | None = None


@dataclass(frozen=True)
class Nearest:
    """The points nearest to one vector (dense or sparse) under the named vector."""

    using: str
    vector: list[float] | Sparse
    #: HNSW ef, exact search, quantization rescoring and oversampling of a dense search (None: the engine's).
    params: models.SearchParams | None = None


@dataclass(frozen=True)
class Fused:
    """Each source's ``candidates`` best points, fused by the engine (reciprocal rank or distribution-based)."""

    sources: tuple[Nearest, ...]
    fusion: Fusion
    candidates: int
    weights: tuple[float, ...] | None = None
    rrf_k: int = 2


@dataclass(frozen=True)
class Diversified:
    """Maximal marginal relevance over ``candidates`` points (of ``source``, else nearest to ``vector``)."""

    using: str
    vector: list[float]
    diversity: float
    candidates: int
    source: Nearest | Fused | None = None
    params: models.SearchParams | None = None


#: One search, as a tree the engine runs: nearest, fused sources, or diversified candidates.
SearchQuery = Nearest | Fused | Diversified


@dataclass(frozen=True)
class ScoredRecord:
    """One search result as stored: id, score and (when asked) payload."""

    id: str
    score: float
    payload: Payload | None


@dataclass(frozen=True)
class StoredRecord:
    """One stored point: id, payload and (when asked) its vector."""

    id: str
    payload: Payload | None
    vector: np.ndarray | None
