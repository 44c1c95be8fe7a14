"""The document methods of AsyncTextCollection: long texts stored as chunks, found one hit per document.

Written once, for asyncio; ``tools/unasync.py`` derives ``_documents_sync.py`` (the methods of TextCollection).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

import numpy as np
from qdrant_client import models

from ._pipeline_async import Pipeline, Step
from ._runtime_async import run_blocking
from ._schema import CollectionSettings
from ._search import check_queries, engine_searches, rerank_depth, reranked_documents, search_plan, tie_ordered
from ._vectors import point_vectors, show_progress
from .documents import (
    GROUP_BY,
    Chunking,
    DocumentHit,
    PreparedDocument,
    StoredDocument,
    chunk_index,
    chunk_point_id,
    chunks_only,
    document_hit,
    documents_filter,
    is_stored,
    stale_filter,
    stored_document,
)
from .encoder import Bm25, CrossEncoder
from .errors import InvalidArgumentError
from .records import DOCUMENT_KEY, CheckedRecord, Key, PreparedPoint, UpsertResult, check_id, check_ids, checked_batches
from .store.base import PointVectors
from .store.protocol_async import AsyncVectorStore
from .types import Fusion, OnConflict, Scoring, SearchMode

#: A group of documents written together: the ids of every input record in it (repeats too), and the documents.
_Group = tuple[list[Key], list[PreparedDocument]]


class _AsyncHost(Protocol):
    """What the document methods use of their collection."""

    _config: CollectionSettings
    _store: AsyncVectorStore
    _bm25: Bm25 | None

    async def _ensure(self, create: bool) -> None: ...

    async def _ensure_writable(self, bulk: bool, documents: bool = False) -> None: ...

    async def _finish(self, bulk: bool) -> None: ...


class AsyncDocuments:
    """Documents in a text collection: each one split into chunks that fit the encoder, stored as points that carry
    the document's id, payload and the chunk's place; replaced whole, searched one hit per document."""

    async def upsert_documents(
        self: _AsyncHost,
        documents: Iterable[Any],
        ids: Sequence[Key] | None = None,
        payloads: Sequence[Mapping[str, Any] | None] | None = None,
        chunk_tokens: int | None = None,
        overlap_tokens: int | None = None,
        batch_size: int | None = None,
        wait: bool = True,
        on_conflict: OnConflict = "overwrite",
        show_progress_bar: bool | None = None,
        *,
        context_field: str | None = None,
        vectors: Sequence[Any] | None = None,
        vectors_from: str | None = None,
        bulk: bool = False,
    ) -> UpsertResult:
        """Chunk, embed and store documents; returns one id per document (yours, else derived from its text).

        Each document is split with the encoder's tokenizer into chunks of at most ``chunk_tokens`` (default: all
        the encoder reads), at sentence or word boundaries, neighbours sharing ``overlap_tokens`` (default: an
        eighth of a chunk). ``context_field`` names a payload field (a title, a heading) put before every chunk of
        its document when the chunk is encoded (dense and BM25), so that a chunk from the middle keeps its topic;
        the stored chunk text and offsets are the document's own. A changed document replaces all its chunks (its
        new chunks are written first, then the old version's removed; re-running after a crash in between removes
        them); an unchanged one is not re-encoded. ``on_conflict="skip"`` leaves any stored version alone.
        ``documents`` takes the same shapes as ``upsert_texts``' texts; ``batch_size`` counts chunks. Chunk vectors
        encoded elsewhere come as in ``upsert_texts``, one array per document with a row per input of
        ``Chunking.of(encoder, chunk_tokens, overlap_tokens, context_field).inputs(text, payload)``. ``bulk`` as in
        ``upsert_texts``.
        """
        config = self._config
        batch = config.check_write(batch_size, on_conflict, self._store.upsert_batch)
        chunking = Chunking.of(config.document_encoder(), chunk_tokens, overlap_tokens, context_field)
        shape = config.given_vectors(vectors_from, vectors, rows=True)
        records = checked_batches(documents, ids, payloads, max(1, batch // 8), vectors, shape)
        pipeline = Pipeline(
            config.collection_name,
            partial(_plan, self, on_conflict=on_conflict, wait=wait and not bulk),
            partial(self._ensure_writable, bulk, documents=True),
            show_progress(config, show_progress_bar),
            unit="document",
        )
        result = await pipeline.run(_groups(records, chunking.prepare, batch))
        await self._finish(bulk)
        return result

    async def delete_documents(self: _AsyncHost, ids: Sequence[Key], wait: bool = True) -> None:
        """Delete documents (every chunk) by id; unknown ids are ignored."""
        self._config.require_writable()
        keys = check_ids(ids)
        await self._ensure(create=False)
        if keys:
            await self._store.delete(self._config.collection_name, None, documents_filter(keys), wait)

    async def get_document(self: _AsyncHost, id: Key) -> StoredDocument | None:
        """A stored document, its text rebuilt from its chunks, or None."""
        key = check_id(id, "id")
        await self._ensure(create=False)
        name, vector = self._config.collection_name, self._config.vector_name
        first = await self._store.retrieve(name, vector, [chunk_point_id(key, 0)], False)
        if not first or not first[0].payload:
            return None
        count = int(first[0].payload[DOCUMENT_KEY]["chunks"])
        found = await self._store.retrieve(name, vector, [chunk_point_id(key, i) for i in range(count)], False)
        return stored_document([r.payload for r in found if r.payload])

    async def search_documents(
        self: _AsyncHost,
        query: str,
        limit: int = 10,
        query_filter: models.Filter | None = None,
        score_threshold: float | None = None,
        *,
        mode: SearchMode = "dense",
        fusion: Fusion = "dbsf",
        weights: Sequence[float] | None = None,
        chunks: int = 3,
        score: Scoring = "max",
        candidates: int | None = None,
        rerank: CrossEncoder | None = None,
        rerank_candidates: int = 50,
        search_params: models.SearchParams | None = None,
    ) -> list[DocumentHit]:
        """The ``limit`` documents best matching ``query``, one hit each, with up to ``chunks`` matching chunks.

        score: ``"max"`` ranks documents by their best chunk; ``"sum"`` re-ranks the documents found by the sum of
        their listed chunks' scores. A server (and local mode) groups in the engine; on Qdrant Edge the best chunks
        are fetched until ``limit`` documents are found, so no document is crowded out by another's chunks.
        rerank: a CrossEncoder that re-scores the listed chunks of the best ``rerank_candidates`` documents.
        search_params: as in ``search_text``.
        """
        config = self._config
        depth = rerank_depth(rerank, rerank_candidates, limit)
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise InvalidArgumentError(f"chunks={chunks!r} must be a positive integer.")
        if score not in ("max", "sum"):
            raise InvalidArgumentError(f"score={score!r} must be 'max' or 'sum'.")
        if candidates is None:
            candidates = max(depth * chunks * 4, 100)
        plan = search_plan(mode, fusion, weights, None, candidates, depth, search_params)
        texts, selected = check_queries(config, [query], depth, query_filter, score_threshold, plan)
        await self._ensure(create=False)
        search = (await run_blocking(engine_searches, config, self._bm25, texts, plan))[0]
        groups = await self._store.query_groups(
            config.collection_name, search, GROUP_BY, depth, chunks, chunks_only(selected), score_threshold
        )
        hits = [
            document_hit([(r.score, r.payload or {}) for r in tie_ordered(rows, chunk_index)], score)
            for rows in groups
            if rows
        ]
        if rerank is not None:
            return await run_blocking(reranked_documents, config, texts[0], hits, rerank, limit, score)
        if score == "sum":
            hits.sort(key=lambda h: -h.score)
        return tie_ordered(hits, lambda h: (type(h.id).__name__, str(h.id)))


def _groups(
    batches: Iterable[tuple[list[CheckedRecord], list[CheckedRecord]]],
    prepare: Callable[[CheckedRecord], PreparedDocument],
    size: int,
) -> Iterator[_Group]:
    """Documents in groups of about ``size`` chunks, each record's id in input order; a document's chunks are never
    split between two writes."""
    ids: list[Key] = []
    group: list[PreparedDocument] = []
    count = 0
    for every, keep in batches:
        kept = {id(record) for record in keep}
        for record in every:
            document = prepare(record) if id(record) in kept else None  # a repeat is written once, counted each time
            if document is not None and group and count + len(document.chunks) > size:
                yield ids, group
                ids, group, count = [], [], 0
            ids.append(record.id)
            if document is not None:
                group.append(document)
                count += len(document.chunks)
    if ids:
        yield ids, group


async def _plan(host: _AsyncHost, group: _Group, on_conflict: OnConflict, wait: bool) -> Step:
    """The write of a group: the documents not stored in this version (``"skip"``: not stored at all)."""
    ids, documents = group
    config = host._config
    wanted = [p for d in documents for p in (d.point_ids if on_conflict == "overwrite" else d.point_ids[:1])]
    found = await host._store.retrieve(config.collection_name, config.vector_name, wanted, False) if wanted else []
    stored = {r.id: r.payload for r in found}
    todo = [d for d in documents if not is_stored(d, stored, any_version=on_conflict == "skip")]
    writing = {id(d) for d in todo}
    points = [p for d in todo for p in d.points()]
    settled = documents if on_conflict == "overwrite" else todo
    return Step(
        ids=ids,
        writes=[d.id for d in todo],
        stored=[d.id for d in documents if id(d) not in writing],
        encode=partial(point_vectors, config, host._bm25, [p.text for p in points], _given(todo)),
        write=partial(_replace, host, points, settled, wait) if settled else None,
    )


def _given(documents: list[PreparedDocument]) -> list[np.ndarray] | None:
    """The chunks' vectors when they were encoded elsewhere (all or none were: ``records.checked_batches``)."""
    given = [row for d in documents if d.vectors is not None for row in d.vectors]
    return given if given else None


async def _replace(
    host: _AsyncHost,
    points: list[PreparedPoint],
    settled: list[PreparedDocument],
    wait: bool,
    vectors: PointVectors | None,
) -> None:
    """Write the new chunks, then remove every other version's chunks of the settled documents (in this order, so
    a document is never missing; a crash in between leaves old chunks that the next run of the same upsert
    removes)."""
    name = host._config.collection_name
    if points and vectors is not None:
        await host._store.upsert(name, [p.point_id for p in points], vectors, [p.payload for p in points], wait)
    await host._store.delete(name, None, stale_filter(settled), wait)
