"""The shapes a store speaks in: collection specs and the records it returns (the protocol is in protocol.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from qdrant_client import models

Distance = Literal["cosine", "dot", "euclid", "manhattan"]
DISTANCES: tuple[Distance, ...] = ("cosine", "dot", "euclid", "manhattan")
Quantization = Literal["int8", "binary"]
Payload = dict[str, Any]
#: Whole payloads (True), none (False), or only the fields named.
PayloadSelector = bool | list[str]


@dataclass(frozen=True)
class VectorSpec:
    """One dense vector of a collection: its size and distance."""

    size: int
    distance: str  # one of DISTANCES for collections we create; as the engine reports it otherwise


@dataclass(frozen=True)
class CollectionSpec:
    """What to create: one named dense vector plus optional index, storage and cluster settings."""

    name: str
    vector_name: str
    vector: VectorSpec
    on_disk: bool = False
    hnsw: models.HnswConfigDiff | None = None
    quantization: Quantization | None = None
    shard_number: int | None = None
    replication_factor: int | None = None
    metadata: Payload = field(default_factory=dict)


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
