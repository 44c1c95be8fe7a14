"""AsyncTextCollection: texts in, Qdrant points out; text queries in, typed hits out (asyncio).

Written once, here; ``tools/unasync.py`` derives the sync ``TextCollection`` (``_collection_sync.py``) from this file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Literal

import numpy as np
from qdrant_client import AsyncQdrantClient, models

from ._documents_async import AsyncDocuments
from ._duplicates import DuplicatePair, most_similar_pairs, pair_scores, split_pairs, without_self
from ._filters import engine_filter
from ._pipeline_async import Pipeline, Step
from ._runtime_async import Lock, run_blocking
from ._schema import (
    _NAME,
    CollectionSettings,
    holds_documents,
    paused_indexing,
    stored_threshold,
    with_calibration,
    with_documents,
    with_paused_indexing,
)
from ._search import (
    SearchPlan,
    check_queries,
    engine_searches,
    hits,
    payload_selector,
    rerank_depth,
    reranked,
    search_plan,
)
from ._vectors import point_vectors, show_progress
from .dedup import Calibration, best_f1_threshold
from .documents import chunks_only, encoded_text, first_chunks_only, is_chunk, texts_only
from .encoder import Bm25, CrossEncoder, load_encoder
from .errors import InvalidArgumentError
from .protocols import TextEncoder
from .records import (
    CheckedRecord,
    Hit,
    Key,
    PreparedPoint,
    StoredText,
    UpsertResult,
    check_ids,
    checked_batches,
    point_id,
    split_payload,
    text_point,
)
from .settings import Settings
from .store import RetryPolicy
from .store.base import PointVectors, StoredRecord
from .store.factory import open_async_store
from .store.protocol_async import AsyncVectorStore
from .types import COUNT_KINDS, CountKind, Distance, Fusion, OnConflict, Quantization, SearchMode

__all__ = ["AsyncTextCollection", "DuplicatePair"]


class AsyncTextCollection(AsyncDocuments):
    """A Qdrant collection of texts (and documents) embedded by a SentenceEncoder.

    Engine: ``location=`` (embedded Qdrant Edge on disk), ``url=``/``api_key=`` (a Qdrant server or Qdrant Cloud),
    ``client=`` (an AsyncQdrantClient, ``":memory:"`` included), or ``store=`` (any ``AsyncVectorStore``: the seam
    where tests put an engine that fails on demand). With none, ``QDRANT_URL`` if set, else
    ``SBERT_QDRANT_LOCATION`` (default ``./sbert_qdrant_data``). The collection is created on the first write with
    the encoder's size and cosine distance and, unless ``sparse=None``, a BM25 sparse vector (``sparse="bm25"`` or
    your ``Bm25(...)`` settings) for ``mode="sparse"``/``"hybrid"`` searches; an existing one is checked and used as
    it is, never recreated unless ``recreate=True``. Ids are yours (any str or int given to ``upsert_texts``, else
    the id derived from the text) everywhere. Texts and documents share a collection without mixing: text calls see
    texts only, document calls documents only. A collection another tool wrote is read and searched as it is with
    its vector's name and its text's payload field, e.g. langchain-qdrant's ``vector_name="", text_field=
    "page_content"`` (read-only: writes are refused). ``encoder`` may be any object with what a collection uses
    (``sbert_qdrant.protocols.TextEncoder``); documents also need a tokenizer (``DocumentEncoder``).
    """

    def __init__(
        self,
        collection_name: str,
        encoder: TextEncoder | None = None,
        *,
        location: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: AsyncQdrantClient | None = None,
        store: AsyncVectorStore | None = None,
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
        self._config = CollectionSettings.checked(
            collection_name,
            encoder or load_encoder(settings),
            sparse=sparse,
            vector_name=vector_name,
            distance=distance,
            on_disk=on_disk,
            hnsw=hnsw,
            quantization=quantization,
            shard_number=shard_number,
            replication_factor=replication_factor,
            payload_indexes=payload_indexes,
            encode_batch_size=encode_batch_size,
            show_progress_bar=show_progress_bar,
            text_field=text_field,
        )
        self._store: AsyncVectorStore = open_async_store(location, url, api_key, client, settings, retry, store)
        self._recreate = recreate
        self._ready = False
        self._ready_lock = Lock()
        #: BM25 of the collection as it is (None until checked or created, and for a dense-only collection).
        self._bm25: Bm25 | None = None
        #: Whether the collection holds documents (as it was opened, or written by this instance): only then do
        #: text reads pay for the filter that leaves chunks out (local mode evaluates it point by point).
        self._documents = False

    @property
    def collection_name(self) -> str:
        return self._config.collection_name

    @property
    def encoder(self) -> TextEncoder:
        return self._config.encoder

    @property
    def distance(self) -> str:
        """The distance of the dense vectors (``"cosine"``, ``"dot"``, ``"euclid"``, ``"manhattan"``)."""
        return self._config.distance

    def __repr__(self) -> str:
        return self._config.describe(type(self).__name__, self._store)

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def _ensure(self, create: bool) -> None:
        """Check (and on a write, create) the collection once per instance."""
        async with self._ready_lock:
            if self._ready:
                return
            config, name = self._config, self.collection_name
            if self._recreate and create:
                await self._store.drop(name)
                self._recreate = False
            existing = await self._store.describe(name)
            if existing is not None:
                self._bm25 = config.existing_bm25(existing)
                self._documents = holds_documents(existing.metadata)
            elif not create:
                raise config.missing()
            else:
                await self._store.create(config.spec())
                for field_name, schema in config.payload_indexes_to_create().items():
                    await self._store.create_payload_index(name, field_name, schema)
                self._bm25 = config.bm25
                self._documents = False
            self._ready = True

    async def _ensure_writable(self, bulk: bool, documents: bool = False) -> None:
        """Create the collection if needed; record, before the first chunk is written, that it holds documents;
        for a bulk load, pause the engine's background indexing (recorded too, so that ``optimize`` restores it
        even after a crash)."""
        await self._ensure(create=True)
        name = self.collection_name
        if documents and not self._documents:
            await self._store.update_metadata(name, with_documents(await self._store.metadata(name)))
            self._documents = True
        threshold = await self._store.indexing_threshold(name) if bulk else None
        if threshold is None:
            return  # not a bulk load, or an engine without background indexing
        current = await self._store.metadata(name)
        if paused_indexing(current) is None and threshold != 0:
            await self._store.update_metadata(name, with_paused_indexing(current, threshold))
        await self._store.set_indexing_threshold(name, 0)

    async def _finish(self, bulk: bool) -> None:
        """End a bulk load: every write applied, background indexing restored, the index built."""
        if bulk:
            # A point operation with wait=True returns once every earlier write of each shard's queue is applied.
            await self._store.delete(self.collection_name, None, _NOTHING, True)
            await self.optimize()

    def _texts_only(self, query_filter: models.Filter | None) -> models.Filter | None:
        """The filter of a text read: chunks left out when the collection holds documents."""
        return texts_only(query_filter) if self._documents else query_filter

    async def exists(self) -> bool:
        """Whether the collection exists in the engine."""
        return await self._store.describe(self.collection_name) is not None

    async def create_payload_index(self, field_name: str, schema: models.PayloadSchemaType) -> None:
        """Index a payload field so that filters on it stay fast (creates the collection if needed)."""
        await self._ensure(create=True)
        await self._store.create_payload_index(self.collection_name, field_name, schema)

    async def optimize(self) -> None:
        """After a load: Edge builds its HNSW index now; a server gets back the background indexing a bulk load
        paused (also one that crashed) and is waited on until green."""
        await self._ensure(create=False)
        name = self.collection_name
        current = await self._store.metadata(name)
        paused = paused_indexing(current)
        if paused is not None:
            await self._store.set_indexing_threshold(name, paused)
            await self._store.update_metadata(name, with_paused_indexing(current, None))
        await self._store.optimize(name)

    async def delete_collection(self) -> None:
        """Drop the collection and everything in it."""
        await self._store.drop(self.collection_name)
        self._ready = False
        self._documents = False

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
        *,
        vectors: Sequence[Any] | None = None,
        vectors_from: str | None = None,
        bulk: bool = False,
    ) -> UpsertResult:
        """Embed and store texts; returns one id per record: yours, else the one derived from its text.

        ``texts`` is a list of str (with optional ``ids`` and ``payloads`` lists) or an iterable of records
        (``TextRecord``, ``{"text", "payload", "id"}`` dicts, or str), streamed in batches. Re-running writes the
        same points again (``on_conflict="overwrite"``) or leaves stored ids alone without encoding them
        (``"skip"``). Batch k+1 is encoded while batch k is written; at most two batches of vectors are held.

        Vectors encoded elsewhere (another process, a Ray worker, a GPU box) are written as given with
        ``vectors_from=`` the identity of the encoder that made them (``encoder.identity``; another model's is
        refused): ``vectors`` holds one per text of a list, or each record carries its ``vector``. They are checked
        (size, finite, unit length when the encoder normalizes); BM25 is computed here from the text.

        ``bulk=True`` loads many points into a server fast: background indexing paused during the load, writes not
        waited on one by one, then one wait for all of them and the index built once (``optimize``; a crashed bulk
        load leaves indexing paused until the next ``optimize()`` or bulk load ends). Edge and local mode index on
        ``optimize()`` only, so there it just builds the index at the end.
        """
        config = self._config
        batch = config.check_write(batch_size, on_conflict, self._store.upsert_batch)
        shape = config.given_vectors(vectors_from, vectors)
        pipeline = Pipeline(
            self.collection_name,
            partial(self._plan_texts, on_conflict=on_conflict, wait=wait and not bulk),
            partial(self._ensure_writable, bulk),
            show_progress(config, show_progress_bar),
        )
        result = await pipeline.run(checked_batches(texts, ids, payloads, batch, vectors, shape))
        await self._finish(bulk)
        return result

    async def _plan_texts(
        self, batch: tuple[list[CheckedRecord], list[CheckedRecord]], on_conflict: OnConflict, wait: bool
    ) -> Step:
        every, keep = batch
        return await self._plan_points([r.id for r in every], [text_point(r) for r in keep], on_conflict, wait)

    async def _plan_copies(self, batch: list[StoredRecord], on_conflict: OnConflict, wait: bool) -> Step:
        """The write of stored points of another collection, re-encoded (``reembed``)."""
        points = [PreparedPoint(r.id, r.id, encoded_text(r.payload or {}), dict(r.payload or {})) for r in batch]
        return await self._plan_points([r.id for r in batch], points, on_conflict, wait)

    async def _plan_points(
        self, ids: list[Key], points: list[PreparedPoint], on_conflict: OnConflict, wait: bool
    ) -> Step:
        """The write of a batch: ``ids`` of every record in it, ``points`` those to write unless already stored
        (``on_conflict="skip"``)."""
        if on_conflict == "skip" and points:
            stored = await self._store.existing_ids(self.collection_name, [p.point_id for p in points])
            todo = [p for p in points if p.point_id not in stored]
        else:
            todo = points
        writing = {p.point_id for p in todo}
        return Step(
            ids=ids,
            writes=[p.id for p in todo],
            stored=[p.id for p in points if p.point_id not in writing],
            encode=partial(point_vectors, self._config, self._bm25, [p.text for p in todo], _given(todo)),
            write=partial(self._write_points, todo, wait) if todo else None,
        )

    async def _write_points(self, points: list[PreparedPoint], wait: bool, vectors: PointVectors | None) -> None:
        if vectors is not None:
            ids, payloads = [p.point_id for p in points], [p.payload for p in points]
            await self._store.upsert(self.collection_name, ids, vectors, payloads, wait)

    async def reembed(
        self,
        collection_name: str,
        encoder: TextEncoder,
        *,
        batch_size: int | None = None,
        on_conflict: OnConflict = "overwrite",
        bulk: bool = False,
        show_progress_bar: bool | None = None,
    ) -> UpsertResult:
        """Copy every text and document into the collection ``collection_name`` (on the same engine), encoded by
        ``encoder``: the same ids, payloads and chunks (each re-encoded with its document's context), BM25 with
        this collection's settings, the collection created with this one's; returns the point ids written (texts
        and chunks). Re-running resumes (``on_conflict="skip"``). This collection is left as it is: move readers
        with ``set_alias`` (atomic, on a server or local mode) or, on Qdrant Edge, by opening the new name, then
        ``delete_collection`` it. A calibrated duplicate threshold is not copied (it belongs to the old model).
        Holds every point's payload (not its vector) in memory while it copies.
        """
        config = self._config
        config.require_writable()
        batch = config.check_write(batch_size, on_conflict, self._store.upsert_batch)
        if collection_name == self.collection_name:
            raise InvalidArgumentError(
                f"collection_name={collection_name!r} is this collection; re-embed into a new one, then move readers."
            )
        target = type(self)(
            collection_name,
            encoder,
            store=self._store,
            vector_name=config.vector_name,
            sparse=None,  # set below: this collection's BM25 settings, once known
            distance=config.distance,
            on_disk=config.on_disk,
            hnsw=config.hnsw,
            quantization=config.quantization,
            shard_number=config.shard_number,
            replication_factor=config.replication_factor,
            payload_indexes=config.payload_indexes,
            encode_batch_size=config.encode_batch_size,
            show_progress_bar=config.show_progress_bar,
        )
        await self._ensure(create=False)
        target._config = replace(target._config, bm25=self._bm25, bm25_explicit=self._bm25 is not None)
        records: list[StoredRecord] = []
        async for page in self._store.scroll(self.collection_name, config.vector_name, False, 1024, None):
            records.extend(page)
        pipeline = Pipeline(
            collection_name,
            partial(target._plan_copies, on_conflict=on_conflict, wait=not bulk),
            partial(target._ensure_writable, bulk, documents=self._documents),
            show_progress(config, show_progress_bar),
            unit="point",
        )
        result = await pipeline.run(records[i : i + batch] for i in range(0, len(records), batch))
        await target._finish(bulk)
        return result

    async def set_alias(self, alias: str) -> None:
        """Make ``alias`` name this collection, moved atomically from the collection it named (a server, local
        mode): readers open ``TextCollection(alias, encoder)`` and switch over with no gap. Qdrant Edge has no
        aliases (open the new name there)."""
        if not isinstance(alias, str) or not _NAME.fullmatch(alias) or alias == self.collection_name:
            raise InvalidArgumentError(
                f"alias={alias!r} must be a valid collection name (1-255 letters, digits, '_', '-' or '.') other "
                "than the collection's own."
            )
        await self._ensure(create=False)
        await self._store.set_alias(alias, self.collection_name)

    async def delete_texts(
        self, ids: Sequence[Key] | None = None, *, query_filter: models.Filter | None = None, wait: bool = True
    ) -> None:
        """Delete texts by id (as ``upsert_texts`` returned them; unknown ones are ignored) or by a filter; a
        document's chunks are never touched (``delete_documents`` deletes documents)."""
        self._config.require_writable()
        if (ids is None) == (query_filter is None):
            raise InvalidArgumentError("pass ids= (the ids upsert_texts returned) or query_filter=, exactly one.")
        points: list[models.ExtendedPointId] = [point_id(key) for key in check_ids(ids)] if ids is not None else []
        selected = engine_filter(query_filter) if ids is None else None
        await self._ensure(create=False)
        if ids is not None and not points:
            return
        if ids is not None and not self._documents:
            await self._store.delete(self.collection_name, [str(p) for p in points], None, wait)
            return
        if ids is not None:
            selected = models.Filter(must=[models.HasIdCondition(has_id=points)])
        await self._store.delete(self.collection_name, None, texts_only(selected), wait)

    # -- reads -----------------------------------------------------------------------------------------------------

    async def count(self, query_filter: models.Filter | None = None, *, kind: CountKind = "texts") -> int:
        """Stored texts, all or those matching the filter; ``kind="documents"`` counts documents instead, and
        ``kind="chunks"`` the chunks of documents."""
        if kind not in COUNT_KINDS:
            raise InvalidArgumentError(f"kind={kind!r} must be one of {COUNT_KINDS}.")
        selected = engine_filter(query_filter)
        await self._ensure(create=False)
        only = {"texts": self._texts_only, "documents": first_chunks_only, "chunks": chunks_only}[kind](selected)
        return await self._store.count(self.collection_name, only)

    async def get(self, ids: Sequence[Key], with_vectors: bool = False) -> list[StoredText]:
        """Stored texts by id, in the order asked; unknown ids (and documents' ids) are left out."""
        point_ids = [point_id(key) for key in check_ids(ids)]
        await self._ensure(create=False)
        found = await self._store.retrieve(self.collection_name, self._config.vector_name, point_ids, with_vectors)
        return _stored_texts(point_ids, found, self._config.text_field)

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
        search_params: models.SearchParams | None = None,
    ) -> list[Hit]:
        """The ``limit`` stored texts best matching ``query``, best first (documents: ``search_documents``).

        mode: ``"dense"`` (cosine of the SBERT vectors), ``"sparse"`` (BM25) or ``"hybrid"`` (both, fused by the
        engine with ``fusion="dbsf"`` — distribution-based score fusion — or ``"rrf"`` — reciprocal rank, with
        ``weights=(dense, sparse)``); the score is the mode's own. diversity: 0..1 re-ranks ``candidates`` hits by
        maximal marginal relevance (dense vectors).
        candidates: hits each stage draws (default ``max(limit, 100)``). rerank: a CrossEncoder that re-scores the
        best ``rerank_candidates`` hits, (query, text) pairs, and keeps the best ``limit`` of them by its score.
        search_params: the dense search's ``models.SearchParams``: ``hnsw_ef``, ``exact=True``, and for a quantized
        collection ``quantization=QuantizationSearchParams(rescore=True, oversampling=2.0)`` (Qdrant Edge and a
        server; qdrant-client's local mode searches exactly and ignores them).
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
            search_params=search_params,
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
        search_params: models.SearchParams | None = None,
    ) -> list[list[Hit]]:
        """``search_text`` for many queries: one encode, one batched query (and one cross-encoder pass)."""
        depth = rerank_depth(rerank, rerank_candidates, limit)
        plan = search_plan(mode, fusion, weights, diversity, candidates, depth, search_params)
        found = await self._search(queries, depth, query_filter, score_threshold, with_payload, plan, rerank)
        if rerank is None or not found:
            return found
        return await run_blocking(reranked, self._config, list(queries), found, rerank, limit)

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
        config = self._config
        texts, selected = check_queries(config, queries, limit, query_filter, score_threshold, plan)
        await self._ensure(create=False)
        if not texts:
            return []
        searches = await run_blocking(engine_searches, config, self._bm25, texts, plan)
        found = await self._store.query(
            self.collection_name,
            searches,
            limit,
            self._texts_only(selected),
            score_threshold,
            payload_selector(config, with_payload, rerank),
        )
        return [hits(config, rows) for rows in found]

    # -- duplicates ------------------------------------------------------------------------------------------------

    async def _threshold(self, threshold: float | None) -> float:
        if threshold is not None:
            return threshold
        await self._ensure(create=False)
        return stored_threshold(await self._store.metadata(self.collection_name))

    async def find_duplicates(
        self, text_or_texts: str | Sequence[str], threshold: float | None = None, limit: int = 10
    ) -> list[Hit] | list[list[Hit]]:
        """Stored texts at or above the duplicate threshold (given, else calibrated, else the default).

        The record stored from the very same text (without an id of its own) is not its own duplicate.
        """
        texts: list[str] = [text_or_texts] if isinstance(text_or_texts, str) else list(text_or_texts)
        cut = await self._threshold(threshold)
        found = await self._search(texts, limit + 1, None, cut, True, SearchPlan(symmetric=True))
        results = without_self(texts, found, limit)
        return results[0] if isinstance(text_or_texts, str) else results

    async def calibrate_threshold(self, labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> Calibration:
        """Best-F1 cosine threshold on (text, text, is_duplicate) pairs, stored with the collection."""
        left, right, labels = split_pairs(labelled_pairs)
        scores = await run_blocking(pair_scores, self._config, left, right)
        calibration = best_f1_threshold(scores, labels)
        await self._ensure(create=True)
        current = await self._store.metadata(self.collection_name)
        await self._store.update_metadata(self.collection_name, with_calibration(current, calibration))
        return calibration

    async def mine_duplicates(
        self, threshold: float | None = None, top_k: int = 5, limit: int | None = None, block_size: int = 2048
    ) -> list[DuplicatePair]:
        """The most similar pairs of stored texts (paraphrase mining), best first, each text's ``top_k`` best;
        ``block_size`` texts are compared with all at a time (memory: ``block_size`` x texts scores)."""
        cut = await self._threshold(threshold)
        records: list[StoredRecord] = []
        pages = self._store.scroll(self.collection_name, self._config.vector_name, True, 1024, self._texts_only(None))
        async for page in pages:
            records.extend(page)
        return await run_blocking(most_similar_pairs, self._config, records, cut, top_k, limit, block_size)


#: Matches no point: the filter of the barrier write that ends a bulk load.
_NOTHING = models.Filter(must=[models.HasIdCondition(has_id=["00000000-0000-0000-0000-000000000000"])])


def _given(points: list[PreparedPoint]) -> list[np.ndarray] | None:
    """The points' vectors when they were encoded elsewhere (all or none were: ``records.checked_batches``)."""
    given = [p.vector for p in points if p.vector is not None]
    return given if given else None


def _stored_texts(order: list[str], found: list[StoredRecord], text_field: str) -> list[StoredText]:
    """The texts found, in the order asked (by point id); missing ones and documents' chunks left out."""
    by_id = {r.id: r for r in found if not is_chunk(r.payload or {})}
    out = []
    for point in dict.fromkeys(order):
        record = by_id.get(point)
        if record is not None:
            key, text, fields = split_payload(point, record.payload, text_field)
            out.append(StoredText(key, text, fields, record.vector, point))
    return out
