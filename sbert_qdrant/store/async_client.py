"""Async stores: qdrant-client's AsyncQdrantClient, and any sync store run in a worker thread (Qdrant Edge)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from qdrant_client import AsyncQdrantClient, models

from ..errors import StoreError
from . import _requests as rq
from .base import CollectionSpec, Payload, ScoredRecord, StoredRecord, VectorSpec, VectorStore
from .client import ClientStore
from .retry import RetryPolicy


class AsyncClientStore:
    """``ClientStore`` for AsyncQdrantClient: the same requests, awaited under the same retry policy."""

    upsert_batch = ClientStore.upsert_batch

    def __init__(self, client: AsyncQdrantClient, retry: RetryPolicy | None = None, close_client: bool = True) -> None:
        self.client = client
        self.retry = retry or RetryPolicy()
        self.close_client = close_client

    async def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self.retry.acall(what, getattr(self.client, method), *args, **kwargs)

    async def describe(self, name: str) -> dict[str, VectorSpec] | None:
        if not await self._call(f"collection_exists({name!r})", "collection_exists", name):
            return None
        return rq.vector_specs(await self._call(f"get_collection({name!r})", "get_collection", name))

    async def create(self, spec: CollectionSpec) -> None:
        try:
            await self._call(f"create_collection({spec.name!r})", "create_collection", **rq.create_kwargs(spec))
        except StoreError:
            if await self.describe(spec.name) != {spec.vector_name: spec.vector}:
                raise

    async def drop(self, name: str) -> None:
        await self._call(f"delete_collection({name!r})", "delete_collection", name)

    async def metadata(self, name: str) -> Payload:
        info = await self._call(f"get_collection({name!r})", "get_collection", name)
        return dict(info.config.metadata or {})

    async def update_metadata(self, name: str, values: Mapping[str, Any]) -> None:
        await self._call(f"update_collection({name!r})", "update_collection", name, metadata=dict(values))

    async def upsert(
        self,
        name: str,
        vector_name: str,
        ids: Sequence[str],
        vectors: np.ndarray,
        payloads: Sequence[Payload],
        wait: bool,
    ) -> None:
        batch = rq.points_batch(vector_name, ids, vectors, payloads)
        await self._call(f"upsert of {len(ids)} points into {name!r}", "upsert", name, points=batch, wait=wait)

    async def existing_ids(self, name: str, ids: Sequence[str]) -> set[str]:
        found = await self._call(f"retrieve from {name!r}", "retrieve", name, list(ids), with_payload=False)
        return {str(r.id) for r in found}

    async def query(
        self,
        name: str,
        vector_name: str,
        vectors: np.ndarray,
        limit: int,
        query_filter: models.Filter | None,
        score_threshold: float | None,
        with_payload: bool,
    ) -> list[list[ScoredRecord]]:
        requests = rq.query_requests(vector_name, vectors, limit, query_filter, score_threshold, with_payload)
        return rq.scored(await self._call(f"query of {name!r}", "query_batch_points", name, requests=requests))

    async def retrieve(self, name: str, vector_name: str, ids: Sequence[str], with_vectors: bool) -> list[StoredRecord]:
        vectors = rq.vectors_selector(vector_name, with_vectors)
        found = await self._call(f"retrieve from {name!r}", "retrieve", name, list(ids), with_vectors=vectors)
        return rq.stored(found, vector_name)

    async def scroll_all(self, name: str, vector_name: str, with_vectors: bool, batch_size: int) -> list[StoredRecord]:
        vectors = rq.vectors_selector(vector_name, with_vectors)
        out: list[StoredRecord] = []
        offset: Any = None
        while True:
            records, offset = await self._call(
                f"scroll of {name!r}", "scroll", name, limit=batch_size, offset=offset, with_vectors=vectors
            )
            out.extend(rq.stored(records, vector_name))
            if offset is None:
                return out

    async def delete(
        self, name: str, ids: Sequence[str] | None, query_filter: models.Filter | None, wait: bool
    ) -> None:
        selector = rq.points_selector(ids, query_filter)
        await self._call(f"delete from {name!r}", "delete", name, points_selector=selector, wait=wait)

    async def count(self, name: str, query_filter: models.Filter | None) -> int:
        result = await self._call(f"count of {name!r}", "count", name, count_filter=query_filter, exact=True)
        return int(result.count)

    async def create_payload_index(self, name: str, field_name: str, schema: models.PayloadSchemaType) -> None:
        await self._call(
            f"create_payload_index({field_name!r}) on {name!r}",
            "create_payload_index",
            name,
            field_name=field_name,
            field_schema=schema,
            wait=True,
        )

    async def optimize(self, name: str) -> None:
        for _ in range(1200):  # a server indexes in the background; wait for green, up to ten minutes
            info = await self._call(f"get_collection({name!r})", "get_collection", name)
            if info.status == models.CollectionStatus.GREEN:
                return
            await asyncio.sleep(0.5)
        raise StoreError(f"collection {name!r} was not green after 600 s of indexing.")

    async def close(self) -> None:
        if self.close_client:
            await self.client.close()


class ThreadedStore:
    """Any sync store (Qdrant Edge) made awaitable: every call runs in a worker thread, off the event loop."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self.upsert_batch = store.upsert_batch

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call

    async def scroll_all(self, name: str, vector_name: str, with_vectors: bool, batch_size: int) -> list[StoredRecord]:
        def collect() -> list[StoredRecord]:
            pages = self.store.scroll(name, vector_name, with_vectors, batch_size)
            return [record for page in pages for record in page]

        return await asyncio.to_thread(collect)
