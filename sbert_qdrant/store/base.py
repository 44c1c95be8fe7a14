"""The shapes a store speaks in: collection specs and the records it returns (the protocol is in
``protocol_async.py``; ``protocol_sync.py`` is generated from it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from qdrant_client import models

from ..types import Fusion, Quantization, SlotKind

Payload = dict[str, Any]

#: Each storage preset: bits a value of the searched vectors takes, and the oversampling its searches re-score the
#: originals with by default (None: the stored vectors are searched as they are). int8 x2 and binary x4 lose
#: nothing measurable / 7 % of recall@10 on 100,000 sentences (docs/scale.md); docs/collections.md has SciFact's.
STORAGE_PRESETS: dict[Quantization | None, tuple[float, float | None]] = {
    None: (32.0, None),
    "float16": (16.0, None),
    "int8": (8.0, 2.0),
    "binary-2bit": (2.0, 3.0),
    "binary-1.5bit": (1.5, 3.0),
    "binary": (1.0, 4.0),
}


def searched_bytes(size: int, quantization: Quantization | None) -> float:
    """Bytes of one ``size``-value vector as a search reads it in RAM under a storage preset."""
    return size * STORAGE_PRESETS[quantization][0] / 8


def default_search(quantization: Quantization | None) -> models.SearchParams | None:
    """The dense search a preset gets unless the caller gives ``search_params``: its codes' oversampled
    candidates re-scored by the original vectors."""
    oversampling = STORAGE_PRESETS[quantization][1]
    if oversampling is None:
        return None
    return models.SearchParams(quantization=models.QuantizationSearchParams(rescore=True, oversampling=oversampling))


#: Whole payloads (True), none (False), or only the fields named.
PayloadSelector = bool | list[str]
#: A sparse vector: (indices, values), in the same order.
Sparse = tuple[list[int], list[float]]


@dataclass(frozen=True)
class VectorSpec:
    """One named vector of a collection that has a size: its size, distance and kind (``"dense"``, or
    ``"multivector"``: many per point, e.g. a text's token vectors, compared by MaxSim)."""

    size: int
    distance: str  # one of DISTANCES for collections we create; as the engine reports it otherwise
    kind: SlotKind = "dense"


@dataclass(frozen=True)
class CollectionSpec:
    """What to create: named dense (and multi-) vectors, named sparse ones (IDF modifier), index, storage, cluster.

    ``unindexed``: vectors given no HNSW graph (a multivector that only re-scores candidates).
    """

    name: str
    vectors: dict[str, VectorSpec]
    sparse: frozenset[str] = frozenset()
    unindexed: frozenset[str] = frozenset()
    on_disk: bool = False
    hnsw: models.HnswConfigDiff | None = None
    quantization: Quantization | None = None
    shard_number: int | None = None
    replication_factor: int | None = None
    metadata: Payload = field(default_factory=dict)


@dataclass(frozen=True)
class ExistingCollection:
    """What an engine reports of a collection: its dense (and multi-) vectors by name, its sparse vector names,
    its metadata."""

    vectors: dict[str, VectorSpec]
    sparse_vectors: frozenset[str] = frozenset()
    metadata: Payload = field(default_factory=dict)


#: One point's vector in one slot: dense, sparse, or a multivector (a list of dense vectors).
SlotVector = list[float] | Sparse | list[list[float]]


@dataclass(frozen=True)
class PointVectors:
    """The vectors of a batch of points by slot kind, then slot name: a matrix per dense slot (one row per point),
    term weights per sparse slot, and per multivector slot one (vectors, size) matrix per point."""

    dense: Mapping[str, np.ndarray] = field(default_factory=dict)
    sparse: Mapping[str, list[Sparse]] = field(default_factory=dict)
    multivector: Mapping[str, list[np.ndarray]] = field(default_factory=dict)

    def rows(self) -> list[dict[str, SlotVector]]:
        """Each point's vectors by slot name, as plain lists (sparse ones as (indices, values))."""
        columns: dict[str, list[Any]] = {name: matrix.tolist() for name, matrix in self.dense.items()}
        columns |= {name: list(values) for name, values in self.sparse.items()}
        columns |= {name: [m.tolist() for m in matrices] for name, matrices in self.multivector.items()}
        counts = {len(values) for values in columns.values()}
        if len(counts) > 1:
            raise ValueError(f"slots hold vectors of different numbers of points: {sorted(counts)}")
        return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


@dataclass(frozen=True)
class Nearest:
    """The points nearest to one vector under the named vector: dense, sparse, or a multivector (MaxSim)."""

    using: str
    vector: SlotVector
    #: HNSW ef, exact search, quantization rescoring and oversampling of a dense search (None: the engine's).
    params: models.SearchParams | None = None


@dataclass(frozen=True)
class Fused:
    """Each source's ``candidates`` best points, fused by the engine (reciprocal rank or distribution-based)."""

    sources: tuple[Nearest | Rescored, ...]
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
    source: Nearest | Fused | Rescored | None = None
    params: models.SearchParams | None = None


@dataclass(frozen=True)
class Rescored:
    """``candidates`` points of ``source``, re-scored by ``vector`` under the named (multi)vector, in the engine:
    late interaction (MaxSim over token vectors) as the last stage of a search, or a full vector re-scoring what
    its first stage (its first values) found."""

    source: Nearest | Fused | Rescored
    using: str
    vector: SlotVector
    candidates: int


#: One search, as a tree the engine runs: nearest, fused sources, diversified or re-scored candidates.
SearchQuery = Nearest | Fused | Diversified | Rescored


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
