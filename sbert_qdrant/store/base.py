"""The store protocol: what a text collection needs from a Qdrant engine, in vectors and payloads only."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from qdrant_client import models

Distance = Literal["cosine", "dot", "euclid", "manhattan"]
DISTANCES: tuple[Distance, ...] = ("cosine", "dot", "euclid", "manhattan")
Quantization = Literal["int8", "binary"]
Payload = dict[str, Any]


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


class VectorStore(Protocol):
    """A Qdrant engine seen as named collections of (id, vector, payload) points."""

    #: Texts per ``upsert_texts`` batch when the caller gives none: the encoder sorts each batch by length, so a
    #: wider window pads less; a remote engine also bounds the request size.
    upsert_batch: int

    def describe(self, name: str) -> dict[str, VectorSpec] | None:
        """The dense vectors of an existing collection by name, or None when it does not exist."""

    def create(self, spec: CollectionSpec) -> None: ...

    def drop(self, name: str) -> None: ...

    def metadata(self, name: str) -> Payload: ...

    def update_metadata(self, name: str, values: Mapping[str, Any]) -> None:
        """Merge values into the collection's metadata."""

    def upsert(
        self,
        name: str,
        vector_name: str,
        ids: Sequence[str],
        vectors: np.ndarray,
        payloads: Sequence[Payload],
        wait: bool,
    ) -> None: ...

    def existing_ids(self, name: str, ids: Sequence[str]) -> set[str]: ...

    def query(
        self,
        name: str,
        vector_name: str,
        vectors: np.ndarray,
        limit: int,
        query_filter: models.Filter | None,
        score_threshold: float | None,
        with_payload: bool,
    ) -> list[list[ScoredRecord]]:
        """Nearest neighbours of each row of ``vectors``, one list per row."""

    def retrieve(self, name: str, vector_name: str, ids: Sequence[str], with_vectors: bool) -> list[StoredRecord]: ...

    def scroll(self, name: str, vector_name: str, with_vectors: bool, batch_size: int) -> Iterator[list[StoredRecord]]:
        """Every point, a page at a time."""

    def delete(self, name: str, ids: Sequence[str] | None, query_filter: models.Filter | None, wait: bool) -> None: ...

    def count(self, name: str, query_filter: models.Filter | None) -> int: ...

    def create_payload_index(self, name: str, field_name: str, schema: models.PayloadSchemaType) -> None: ...

    def optimize(self, name: str) -> None:
        """Make the collection fast to search (Edge: build HNSW; a server: wait until it is green)."""

    def close(self) -> None: ...
