"""The store protocol: what a text collection needs from a Qdrant engine, in vectors and payloads only.

An engine subclasses the protocol explicitly: the optional capabilities (aliases, background indexing) then default
to a clear ``UnsupportedError`` naming the engine (``engine``), and an engine that has them overrides them.

Written once, for asyncio (``AsyncVectorStore``); ``tools/unasync.py`` derives ``protocol_sync.py`` (``VectorStore``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from qdrant_client import models

from ..errors import UnsupportedError
from .base import CollectionSpec, ExistingCollection, Payload, ScoredRecord, StoredRecord
from .calls import Grouping, Scan, StoreQuery, StoreWrite


class AsyncVectorStore(Protocol):
    """A Qdrant engine seen as named collections of (id, vector, payload) points."""

    #: Texts per ``upsert_texts`` batch when the caller gives none: the encoder sorts each batch by length, so a
    #: wider window pads less; a remote engine also bounds the request size.
    upsert_batch: int
    #: The engine's name in messages ("Qdrant Edge", "qdrant-client").
    engine: str

    async def describe(self, name: str) -> ExistingCollection | None:
        """An existing collection's vectors and metadata, or None when it does not exist."""

    async def names(self) -> list[str]:
        """The names of the collections in the engine, sorted."""

    async def create(self, spec: CollectionSpec) -> None: ...

    async def drop(self, name: str) -> None: ...

    async def metadata(self, name: str) -> Payload: ...

    async def update_metadata(self, name: str, values: Mapping[str, Any]) -> None:
        """Merge values into the collection's metadata."""

    async def upsert(self, name: str, write: StoreWrite) -> None: ...

    async def existing_ids(self, name: str, ids: Sequence[str]) -> set[str]: ...

    async def query(self, name: str, query: StoreQuery) -> list[list[ScoredRecord]]:
        """The best ``query.limit`` points of each search, one list per search."""

    async def query_groups(self, name: str, query: StoreQuery, grouping: Grouping) -> list[list[ScoredRecord]]:
        """The best ``query.limit`` groups of the one search's points, each with its ``grouping.size`` best points,
        payloads included."""

    async def retrieve(
        self, name: str, vector_name: str, ids: Sequence[str], with_vectors: bool
    ) -> list[StoredRecord]: ...

    def scroll(self, name: str, scan: Scan) -> AsyncIterator[list[StoredRecord]]:
        """Every point the scan reads, a page at a time."""

    async def delete(
        self, name: str, ids: Sequence[str] | None, query_filter: models.Filter | None, wait: bool
    ) -> None: ...

    async def count(self, name: str, query_filter: models.Filter | None) -> int: ...

    async def create_payload_index(self, name: str, field_name: str, schema: models.PayloadSchemaType) -> None: ...

    async def optimize(self, name: str) -> None:
        """Make the collection fast to search (Edge: build HNSW; a server: wait until it is green)."""

    async def indexing_threshold(self, name: str) -> int | None:
        """Size (KB of vectors) from which the engine indexes a segment in the background; None (the default) for
        an engine that indexes only when asked (Qdrant Edge) or never (local mode)."""
        return None

    async def set_indexing_threshold(self, name: str, threshold: int) -> None:
        """Set it (0: no background indexing, for a bulk load)."""
        raise UnsupportedError(f"{self.engine} has no background indexing to pause; it indexes on optimize().")

    async def set_alias(self, alias: str, name: str) -> None:
        """Make ``alias`` name the collection ``name`` (moved atomically from another collection it named)."""
        raise UnsupportedError(
            f"{self.engine} has no collection aliases ({alias!r} -> {name!r}); open the collection by its own name."
        )

    async def close(self) -> None: ...
