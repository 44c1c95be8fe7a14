"""AsyncTextCollection: texts in, Qdrant points out; text queries in, typed hits out (asyncio).

Written once, here; ``tools/unasync.py`` derives the sync ``TextCollection`` (``collection.py``) from this file.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from qdrant_client import AsyncQdrantClient, models
from tqdm.auto import tqdm

from ._collection_core import CollectionCore, DuplicatePair, OnConflict, SearchMode, SearchPlan
from ._documents_async import AsyncDocuments
from ._filters import engine_filter
from ._runtime_async import Lock, Writer, run_blocking
from .dedup import Calibration, best_f1_threshold
from .encoder import Bm25, CrossEncoder, SentenceEncoder
from .records import Hit, Key, PreparedPoint, StoredText, UpsertResult, prepared_chunks
from .settings import Settings
from .store import RetryPolicy
from .store.async_protocol import AsyncVectorStore
from .store.base import Distance, Fusion, PointVectors, Quantization, StoredRecord
from .store.factory import open_async_store

__all__ = ["AsyncTextCollection", "DuplicatePair"]


class AsyncTextCollection(AsyncDocuments):
    """A Qdrant collection of texts embedded by a SentenceEncoder.

    Engine: ``location=`` (embedded Qdrant Edge on disk), ``url=``/``api_key=`` (a Qdrant server or Qdrant Cloud),
    or ``client=`` (an AsyncQdrantClient, ``":memory:"`` included). With none, ``QDRANT_URL`` if set, else
    ``SBERT_QDRANT_LOCATION`` (default ``./sbert_qdrant_data``). The collection is created on the first write with
    the encoder's size and cosine distance and, unless ``sparse=None``, a BM25 sparse vector (``sparse="bm25"`` or
    your ``Bm25(...)`` settings) for ``mode="sparse"``/``"hybrid"`` searches; an existing one is checked and used as
    it is, never recreated unless ``recreate=True``. Ids are yours (any str or int given to ``upsert_texts``, else
    the id derived from the text) everywhere. A collection another tool wrote is read and searched as it is with
    its vector's name and its text's payload field, e.g. langchain-qdrant's ``vector_name="", text_field=
    "page_content"`` (read-only: writes are refused).
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
        text_field: str = "text",
        sparse: Bm25 | Literal["bm25"] | None = "bm25",
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
        show_progress_bar: bool | None = None,
        settings: Settings | None = None,
    ) -> None:
        settings = settings or Settings()
        self._core = CollectionCore(
            collection_name,
            encoder or SentenceEncoder.load(settings.model, device=settings.device, precision=settings.precision),
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
            show_progress_bar=show_progress_bar,
            sparse=sparse,
            text_field=text_field,
        )
        self._store: AsyncVectorStore = open_async_store(location, url, api_key, client, settings, retry)
        self._ready = False
        self._ready_lock = Lock()

    @property
    def collection_name(self) -> str:
        return self._core.collection_name

    @property
    def encoder(self) -> SentenceEncoder:
        return self._core.encoder

    def __repr__(self) -> str:
        return self._core.describe(type(self).__name__, self._store)

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def _ensure(self, create: bool) -> None:
        """Check (and on a write, create) the collection once per instance."""
        async with self._ready_lock:
            if self._ready:
                return
            core = self._core
            if core.recreate and create:
                await self._store.drop(core.collection_name)
                core.recreate = False
            existing = await self._store.describe(core.collection_name)
            if existing is None:
                core.require_creatable(create)
                await self._store.create(core.spec())
                core.created()
                for field_name, schema in core.payload_indexes.items():
                    await self._store.create_payload_index(core.collection_name, field_name, schema)
            else:
                core.check_existing(existing)
            self._ready = True

    async def exists(self) -> bool:
        """Whether the collection exists in the engine."""
        return await self._store.describe(self.collection_name) is not None

    async def create_payload_index(self, field_name: str, schema: models.PayloadSchemaType) -> None:
        """Index a payload field so that filters on it stay fast (creates the collection if needed)."""
        await self._ensure(create=True)
        await self._store.create_payload_index(self.collection_name, field_name, schema)

    async def optimize(self) -> None:
        """After a bulk load: Edge builds its HNSW index now; a server is waited on until green."""
        await self._ensure(create=False)
        await self._store.optimize(self.collection_name)

    async def delete_collection(self) -> None:
        """Drop the collection and everything in it."""
        await self._store.drop(self.collection_name)
        self._ready = False
        self._core.calibrated = None

    async def close(self) -> None:
        """Release the engine (an Edge folder's lock, a client this collection opened)."""
        await self._store.close()

    async def __aenter__(self) -> AsyncTextCollection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- writes ----------------------------------------------------------------------------------------------------

    async def upsert_texts(
        self,
        texts: Iterable[Any],
        ids: Sequence[Key] | None = None,
        payloads: Sequence[Mapping[str, Any] | None] | None = None,
        batch_size: int | None = None,
        wait: bool = True,
        on_conflict: OnConflict = "overwrite",
        show_progress_bar: bool | None = None,
    ) -> UpsertResult:
        """Embed and store texts; returns one id per record: yours, else the one derived from its text.

        ``texts`` is a list of str (with optional ``ids`` and ``payloads`` lists) or an iterable of records
        (``TextRecord``, ``{"text", "payload", "id"}`` dicts, or str), streamed in batches. Re-running writes the
        same points again (``on_conflict="overwrite"``) or leaves stored ids alone without encoding them
        (``"skip"``). Batch k+1 is encoded while batch k is written; at most two batches of vectors are held.
        """
        core = self._core
        batch = core.check_upsert_args(batch_size, on_conflict, self._store.upsert_batch)
        chunks = prepared_chunks(texts, ids, payloads, batch)
        first = next(chunks, None)  # a list input is fully checked here, before anything is written
        result = UpsertResult()
        if first is None:
            return result
        await self._ensure(create=True)
        stored: list[str] = []  # point ids known to be stored: written by this call or already there
        seen: list[PreparedPoint] = []
        show = core.progress(show_progress_bar)
        async with Writer() as writer:
            pending: tuple[Any, list[str]] | None = None
            with tqdm(desc="Upserting", unit="text", disable=not show) as bar:
                try:
                    for every, points in itertools.chain([first], chunks):
                        result.extend(p.id for p in every)
                        seen.extend(every)
                        todo = await self._to_write(points, on_conflict)
                        vectors = await run_blocking(core.embed_documents, [p.text for p in todo]) if todo else None
                        if pending is not None:
                            await _land(writer, pending, result, stored)
                            pending = None
                        if todo and vectors is not None:
                            pending = (writer.start(self._write, todo, vectors, wait), [p.point_id for p in todo])
                        written_now = {p.point_id for p in todo}
                        stored.extend(p.point_id for p in points if p.point_id not in written_now)  # already there
                        result.skipped += len(every) - len(todo)
                        bar.update(len(every))
                    if pending is not None:
                        await _land(writer, pending, result, stored)
                except Exception as exc:
                    if pending is not None and await writer.settle(pending[0]):
                        stored.extend(pending[1])  # the write in flight landed
                    raise core.partial_write_error(exc, seen, stored) from exc
        return result

    async def _to_write(self, points: list[PreparedPoint], on_conflict: OnConflict) -> list[PreparedPoint]:
        if on_conflict == "overwrite" or not points:
            return points
        stored = await self._store.existing_ids(self.collection_name, [p.point_id for p in points])
        return [p for p in points if p.point_id not in stored]

    async def _write(self, points: list[PreparedPoint], vectors: PointVectors, wait: bool) -> None:
        ids, payloads = [p.point_id for p in points], [p.payload for p in points]
        await self._store.upsert(self.collection_name, ids, vectors, payloads, wait)

    async def delete_texts(
        self, ids: Sequence[Key] | None = None, *, query_filter: models.Filter | None = None, wait: bool = True
    ) -> None:
        """Delete by id (as ``upsert_texts`` returned them; unknown ones are ignored) or by a filter."""
        point_ids, selected = self._core.delete_selector(ids, query_filter)
        await self._ensure(create=False)
        await self._store.delete(self.collection_name, point_ids, selected, wait)

    # -- reads -----------------------------------------------------------------------------------------------------

    async def count(self, query_filter: models.Filter | None = None) -> int:
        """Stored texts, all or those matching the filter."""
        selected = engine_filter(query_filter)
        await self._ensure(create=False)
        return await self._store.count(self.collection_name, selected)

    async def get(self, ids: Sequence[Key], with_vectors: bool = False) -> list[StoredText]:
        """Stored texts by id, in the order asked; unknown ids are left out."""
        point_ids = self._core.point_ids(ids)
        await self._ensure(create=False)
        found = await self._store.retrieve(self.collection_name, self._core.vector_name, point_ids, with_vectors)
        return self._core.stored_texts(point_ids, found)

    async def search_text(
        self,
        query: str,
        limit: int = 10,
        query_filter: models.Filter | None = None,
        score_threshold: float | None = None,
        with_payload: bool = True,
        *,
        mode: SearchMode = "dense",
        fusion: Fusion = "dbsf",
        weights: Sequence[float] | None = None,
        diversity: float | None = None,
        candidates: int | None = None,
        rerank: CrossEncoder | None = None,
        rerank_candidates: int = 50,
    ) -> list[Hit]:
        """The ``limit`` stored texts best matching ``query``, best first.

        mode: ``"dense"`` (cosine of the SBERT vectors), ``"sparse"`` (BM25) or ``"hybrid"`` (both, fused by the
        engine with ``fusion="dbsf"`` — distribution-based score fusion — or ``"rrf"`` — reciprocal rank, with
        ``weights=(dense, sparse)``); the score is the mode's own. diversity: 0..1 re-ranks ``candidates`` hits by
        maximal marginal relevance (dense vectors).
        candidates: hits each stage draws (default ``max(limit, 100)``). rerank: a CrossEncoder that re-scores the
        best ``rerank_candidates`` hits, (query, text) pairs, and keeps the best ``limit`` of them by its score.
        """
        found = await self.search_texts(
            [query],
            limit,
            query_filter,
            score_threshold,
            with_payload,
            mode=mode,
            fusion=fusion,
            weights=weights,
            diversity=diversity,
            candidates=candidates,
            rerank=rerank,
            rerank_candidates=rerank_candidates,
        )
        return found[0]

    async def search_texts(
        self,
        queries: Sequence[str],
        limit: int = 10,
        query_filter: models.Filter | None = None,
        score_threshold: float | None = None,
        with_payload: bool = True,
        *,
        mode: SearchMode = "dense",
        fusion: Fusion = "dbsf",
        weights: Sequence[float] | None = None,
        diversity: float | None = None,
        candidates: int | None = None,
        rerank: CrossEncoder | None = None,
        rerank_candidates: int = 50,
    ) -> list[list[Hit]]:
        """``search_text`` for many queries: one encode, one batched query (and one cross-encoder pass)."""
        core = self._core
        depth = core.rerank_depth(rerank, rerank_candidates, limit)
        plan = core.search_plan(mode, fusion, weights, diversity, candidates, depth)
        found = await self._search(queries, depth, query_filter, score_threshold, with_payload, plan, rerank)
        if rerank is None or not found:
            return found
        return await run_blocking(core.reranked, list(queries), found, rerank, limit)

    async def _search(
        self,
        queries: Sequence[str],
        limit: int,
        query_filter: models.Filter | None,
        score_threshold: float | None,
        with_payload: bool,
        plan: SearchPlan,
        rerank: CrossEncoder | None = None,
    ) -> list[list[Hit]]:
        core = self._core
        texts, selected = core.check_search_args(queries, limit, query_filter, score_threshold, plan)
        await self._ensure(create=False)
        if not texts:
            return []
        searches = await run_blocking(core.search_queries, texts, plan)
        found = await self._store.query(
            self.collection_name,
            searches,
            limit,
            selected,
            score_threshold,
            core.payload_selector(with_payload, rerank),
        )
        return [core.hits(rows) for rows in found]

    # -- duplicates ------------------------------------------------------------------------------------------------

    async def _threshold(self, threshold: float | None) -> float:
        if threshold is not None:
            return threshold
        await self._ensure(create=False)
        return self._core.resolve_threshold(self._core.threshold_from(await self._store.metadata(self.collection_name)))

    async def find_duplicates(
        self, text_or_texts: str | Sequence[str], threshold: float | None = None, limit: int = 10
    ) -> list[Hit] | list[list[Hit]]:
        """Stored texts at or above the duplicate threshold (given, else calibrated, else the default).

        The record stored from the very same text (without an id of its own) is not its own duplicate.
        """
        texts: list[str] = [text_or_texts] if isinstance(text_or_texts, str) else list(text_or_texts)
        cut = await self._threshold(threshold)
        found = await self._search(texts, limit + 1, None, cut, True, SearchPlan(symmetric=True))
        results = self._core.without_self(texts, found, limit)
        return results[0] if isinstance(text_or_texts, str) else results

    async def calibrate_threshold(self, labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> Calibration:
        """Best-F1 cosine threshold on (text, text, is_duplicate) pairs, stored with the collection."""
        core = self._core
        left, right, labels = core.split_pairs(labelled_pairs)
        scores = await run_blocking(core.pair_scores, left, right)
        calibration = best_f1_threshold(scores, labels)
        await self._ensure(create=True)
        current = await self._store.metadata(self.collection_name)
        await self._store.update_metadata(self.collection_name, core.calibration_metadata(calibration, current))
        core.calibrated = calibration.threshold
        return calibration

    async def mine_duplicates(
        self, threshold: float | None = None, top_k: int = 5, limit: int | None = None, chunk_size: int = 2048
    ) -> list[DuplicatePair]:
        """The most similar pairs of stored texts (paraphrase mining), best first, each text's ``top_k`` best."""
        cut = await self._threshold(threshold)
        records: list[StoredRecord] = []
        async for page in self._store.scroll(self.collection_name, self._core.vector_name, True, 1024):
            records.extend(page)
        return await run_blocking(self._core.pairs_from, records, cut, top_k, limit, chunk_size)


async def _land(writer: Writer, pending: tuple[Any, list[str]], result: UpsertResult, stored: list[str]) -> None:
    """Wait for the write in flight; count its points as stored once it has landed."""
    handle, point_ids = pending
    await writer.wait(handle)
    result.written += len(point_ids)
    stored.extend(point_ids)
