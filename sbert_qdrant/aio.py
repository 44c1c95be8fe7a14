"""AsyncTextCollection: TextCollection for asyncio, over AsyncQdrantClient; encoding runs off the event loop."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from qdrant_client import AsyncQdrantClient, models

from ._collection_core import CollectionCore, DuplicatePair, OnConflict
from .dedup import Calibration, best_f1_threshold
from .encoder import SentenceEncoder
from .errors import InvalidArgumentError
from .records import Hit, Key, PreparedPoint, StoredText, UpsertResult, prepared_chunks
from .settings import Settings
from .store import EdgeStore, RetryPolicy
from .store.async_client import AsyncClientStore, ThreadedStore
from .store.base import Distance, Quantization
from .store.factory import open_async_client, retry_policy


class AsyncTextCollection(CollectionCore):
    """The async twin of ``TextCollection`` (same arguments, same results, methods awaited).

    Engine: ``client=AsyncQdrantClient(...)``, ``url=``/``api_key=``, or ``location=`` (embedded Qdrant Edge, its
    calls in a worker thread); with none, ``QDRANT_URL`` if set, else ``SBERT_QDRANT_LOCATION``.
    """

    def __init__(
        self,
        collection_name: str,
        encoder: SentenceEncoder | None = None,
        *,
        location: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: AsyncQdrantClient | None = None,
        vector_name: str = "text",
        distance: Distance = "cosine",
        on_disk: bool = False,
        hnsw: models.HnswConfigDiff | None = None,
        quantization: Quantization | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        payload_indexes: Mapping[str, models.PayloadSchemaType] | None = None,
        recreate: bool = False,
        retry: RetryPolicy | None = None,
        encode_batch_size: int = 32,
        settings: Settings | None = None,
    ) -> None:
        settings = settings or Settings()
        super().__init__(
            collection_name,
            encoder or SentenceEncoder.load(settings.model, device=settings.device, precision=settings.precision),  # type: ignore[arg-type]
            vector_name=vector_name,
            distance=distance,
            on_disk=on_disk,
            hnsw=hnsw,
            quantization=quantization,
            shard_number=shard_number,
            replication_factor=replication_factor,
            payload_indexes=payload_indexes,
            recreate=recreate,
            encode_batch_size=encode_batch_size,
            show_progress_bar=False,
        )
        self.store: AsyncClientStore | ThreadedStore
        if location is not None or (client is None and url is None and not settings.qdrant_url):
            if client is not None or url is not None:
                raise InvalidArgumentError("pass one of location=, url= or client=, not several.")
            self.store = ThreadedStore(EdgeStore(location if location is not None else settings.location))
        else:
            async_client, owned = open_async_client(url, api_key, client, settings)
            self.store = AsyncClientStore(async_client, retry or retry_policy(settings), close_client=owned)
        self._ready = False
        self._ready_lock = asyncio.Lock()

    async def _ensure(self, create: bool) -> None:
        async with self._ready_lock:
            if self._ready:
                return
            if self.recreate and create:
                await self.store.drop(self.collection_name)
                self.recreate = False
            existing = await self.store.describe(self.collection_name)
            if existing is None:
                self.require_creatable(create)
                await self.store.create(self.spec())
                for field_name, schema in self.payload_indexes.items():
                    await self.store.create_payload_index(self.collection_name, field_name, schema)
            else:
                self.check_existing(existing)
            self._ready = True

    async def _encode(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.encode, texts)

    async def exists(self) -> bool:
        return await self.store.describe(self.collection_name) is not None

    async def create_payload_index(self, field_name: str, schema: models.PayloadSchemaType) -> None:
        await self._ensure(create=True)
        await self.store.create_payload_index(self.collection_name, field_name, schema)

    async def optimize(self) -> None:
        await self._ensure(create=False)
        await self.store.optimize(self.collection_name)

    async def delete_collection(self) -> None:
        await self.store.drop(self.collection_name)
        self._ready = False

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> AsyncTextCollection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def upsert_texts(
        self,
        texts: Iterable[Any],
        ids: Sequence[Key] | None = None,
        payloads: Sequence[Mapping[str, Any] | None] | None = None,
        batch_size: int | None = None,
        wait: bool = True,
        on_conflict: OnConflict = "overwrite",
    ) -> UpsertResult:
        """See ``TextCollection.upsert_texts``: batch k+1 is encoded in a thread while batch k is written."""
        chunks = prepared_chunks(
            texts, ids, payloads, self.check_upsert_args(batch_size, on_conflict, self.store.upsert_batch)
        )
        result = UpsertResult()
        first = next(chunks, None)  # a list input is fully checked here, before anything is written
        if first is None:
            return result
        await self._ensure(create=True)
        stored: list[str] = []
        pending: tuple[asyncio.Task[None], list[str]] | None = None
        try:
            for chunk_ids, points in itertools.chain([first], chunks):
                result.extend(chunk_ids)
                todo = await self._to_write(points, on_conflict)
                vectors = await self._encode([p.text for p in todo]) if todo else None
                await _finish(pending, result, stored)
                pending = None
                if todo and vectors is not None:
                    pending = (asyncio.create_task(self._write(todo, vectors, wait)), [p.id for p in todo])
                written_now = {p.id for p in todo}
                stored.extend(i for i in chunk_ids if i not in written_now)
                result.skipped += len(chunk_ids) - len(todo)
            await _finish(pending, result, stored)
        except Exception as exc:
            if pending is not None:
                await asyncio.gather(pending[0], return_exceptions=True)
                if not pending[0].cancelled() and pending[0].exception() is None:
                    stored.extend(pending[1])
            raise self.partial_write_error(exc, list(result), stored) from exc
        return result

    async def _to_write(self, points: list[PreparedPoint], on_conflict: OnConflict) -> list[PreparedPoint]:
        if on_conflict == "overwrite" or not points:
            return points
        stored = await self.store.existing_ids(self.collection_name, [p.id for p in points])
        return [p for p in points if p.id not in stored]

    async def _write(self, points: list[PreparedPoint], vectors: np.ndarray, wait: bool) -> None:
        ids, payloads = [p.id for p in points], [p.payload for p in points]
        await self.store.upsert(self.collection_name, self.vector_name, ids, vectors, payloads, wait)

    async def delete_texts(
        self,
        ids: Sequence[str] | None = None,
        *,
        keys: Sequence[Key] | None = None,
        query_filter: models.Filter | None = None,
        wait: bool = True,
    ) -> None:
        point_ids, query_filter = self.delete_selector(ids, keys, query_filter)
        await self._ensure(create=False)
        await self.store.delete(self.collection_name, point_ids, query_filter, wait)

    async def count(self, query_filter: models.Filter | None = None) -> int:
        await self._ensure(create=False)
        return int(await self.store.count(self.collection_name, query_filter))

    async def get(
        self, ids: Sequence[str] | None = None, *, keys: Sequence[Key] | None = None, with_vectors: bool = False
    ) -> list[StoredText]:
        point_ids = self.lookup_ids(ids, keys)
        await self._ensure(create=False)
        found = await self.store.retrieve(self.collection_name, self.vector_name, point_ids, with_vectors)
        return self.stored_texts(point_ids, found)

    async def search_text(
        self,
        query: str,
        limit: int = 10,
        query_filter: models.Filter | None = None,
        score_threshold: float | None = None,
        with_payload: bool = True,
    ) -> list[Hit]:
        return (await self.search_texts([query], limit, query_filter, score_threshold, with_payload))[0]

    async def search_texts(
        self,
        queries: Sequence[str],
        limit: int = 10,
        query_filter: models.Filter | None = None,
        score_threshold: float | None = None,
        with_payload: bool = True,
    ) -> list[list[Hit]]:
        texts = self.check_search_args(queries, limit, score_threshold)
        await self._ensure(create=False)
        if not texts:
            return []
        vectors = await self._encode(texts)
        found = await self.store.query(
            self.collection_name, self.vector_name, vectors, limit, query_filter, score_threshold, with_payload
        )
        return [self.hits(rows) for rows in found]

    async def _threshold(self, threshold: float | None) -> float:
        if threshold is not None:
            return threshold
        await self._ensure(create=False)
        return self.resolve_threshold(self.threshold_from(await self.store.metadata(self.collection_name)))

    async def find_duplicates(
        self, text_or_texts: str | Sequence[str], threshold: float | None = None, limit: int = 10
    ) -> list[Hit] | list[list[Hit]]:
        texts: list[str] = [text_or_texts] if isinstance(text_or_texts, str) else list(text_or_texts)
        found = await self.search_texts(texts, limit + 1, score_threshold=await self._threshold(threshold))
        results = self.without_self(texts, found, limit)
        return results[0] if isinstance(text_or_texts, str) else results

    async def calibrate_threshold(self, labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> Calibration:
        left, right, labels = self.split_pairs(labelled_pairs)
        scores = await asyncio.to_thread(self.pair_scores, left, right)
        calibration = best_f1_threshold(scores, labels)
        await self._ensure(create=True)
        current = await self.store.metadata(self.collection_name)
        await self.store.update_metadata(self.collection_name, self.calibration_metadata(calibration, current))
        self._calibrated = calibration.threshold
        return calibration

    async def mine_duplicates(
        self, threshold: float | None = None, top_k: int = 5, limit: int | None = None, chunk_size: int = 2048
    ) -> list[DuplicatePair]:
        cut = await self._threshold(threshold)
        records = await self.store.scroll_all(self.collection_name, self.vector_name, True, 1024)
        ids = [r.id for r in records]
        texts = [self.text_of(r.payload) for r in records]
        rows = [r.vector for r in records]
        return await asyncio.to_thread(self.pairs_from, ids, texts, rows, cut, top_k, limit, chunk_size)


async def _finish(
    pending: tuple[asyncio.Task[None], list[str]] | None, result: UpsertResult, stored: list[str]
) -> None:
    if pending is None:
        return
    task, ids = pending
    await task
    result.written += len(ids)
    stored.extend(ids)
