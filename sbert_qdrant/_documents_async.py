"""The document methods of AsyncTextCollection: long texts stored as chunks, found one hit per document.

Written once, for asyncio; ``tools/unasync.py`` derives ``_documents_sync.py`` (the methods of TextCollection).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from qdrant_client import models

from ._collection_core import CollectionCore, OnConflict, SearchMode, tie_ordered
from ._runtime_async import Writer, run_blocking
from .documents import (
    DOCUMENT_KEY,
    GROUP_BY,
    DocumentHit,
    PreparedDocument,
    Scoring,
    StoredDocument,
    chunk_point_id,
    chunks_only,
    document_hit,
    documents_filter,
    is_stored,
    prepare_document,
    stale_filter,
    stored_document,
)
from .encoder import CrossEncoder
from .errors import InvalidArgumentError
from .records import Key, PreparedPoint, UpsertResult, check_id, check_ids, prepared_chunks
from .store.async_protocol import AsyncVectorStore
from .store.base import Fusion, PointVectors, ScoredRecord


class _AsyncHost(Protocol):
    """What the document methods use of their collection."""

    _core: CollectionCore
    _store: AsyncVectorStore

    async def _ensure(self, create: bool) -> None: ...


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
    ) -> UpsertResult:
        """Chunk, embed and store documents; returns one id per document (yours, else derived from its text).

        Each document is split with the encoder's tokenizer into chunks of at most ``chunk_tokens`` (default: all
        the encoder reads), at sentence or word boundaries, neighbours sharing ``overlap_tokens`` (default: an
        eighth of a chunk). A changed document replaces
        all its chunks (its new chunks are written first, then the old version's removed; re-running after a crash
        in between removes them); an unchanged one is not re-encoded. ``on_conflict="skip"`` leaves any stored
        version alone. ``documents`` takes the same shapes as ``upsert_texts``' texts.
        """
        core = self._core
        batch = core.check_upsert_args(batch_size, on_conflict, self._store.upsert_batch)
        budget = core.chunk_budget(chunk_tokens)
        overlap = budget // 8 if overlap_tokens is None else overlap_tokens
        records = prepared_chunks(documents, ids, payloads, max(1, batch // 8))
        prepared = (
            [prepare_document(p, i, core.offsets, budget, overlap) for i, p in enumerate(keep)] for _, keep in records
        )
        first = next(prepared, None)  # a list input is fully checked here, before anything is written
        result = UpsertResult()
        if first is None:
            return result
        await self._ensure(create=True)
        seen: list[PreparedPoint] = []  # one per document: its id and its first chunk's point id
        landed: list[str] = []
        async with Writer() as writer:
            pending: tuple[Any, list[str]] | None = None
            try:
                for group in _groups(itertools.chain([first], prepared), batch):
                    result.extend(d.id for d in group)
                    seen.extend(PreparedPoint(d.id, d.point_ids[0], "", {}) for d in group)
                    todo = await _to_write(self, group, on_conflict)
                    points = [p for d in todo for p in d.points()]
                    vectors = await run_blocking(core.embed_documents, [p.text for p in points]) if points else None
                    if pending is not None:
                        await writer.wait(pending[0])
                        landed.extend(pending[1])
                    settled = group if on_conflict == "overwrite" else todo
                    handle = writer.start(_replace, self, points, vectors, settled, wait)
                    pending = (handle, [d.point_ids[0] for d in group])
                    result.written += len(todo)
                    result.skipped += len(group) - len(todo)
                if pending is not None:
                    await writer.wait(pending[0])
            except Exception as exc:
                if pending is not None and await writer.settle(pending[0]):
                    landed.extend(pending[1])
                raise core.partial_write_error(exc, seen, landed) from exc
        return result

    async def delete_documents(self: _AsyncHost, ids: Sequence[Key], wait: bool = True) -> None:
        """Delete documents (every chunk) by id; unknown ids are ignored."""
        keys = check_ids(ids)
        await self._ensure(create=False)
        if keys:
            await self._store.delete(self._core.collection_name, None, documents_filter(keys), wait)

    async def get_document(self: _AsyncHost, id: Key) -> StoredDocument | None:
        """A stored document, its text rebuilt from its chunks, or None."""
        key = check_id(id, "id")
        core = self._core
        await self._ensure(create=False)
        name, vector = core.collection_name, core.vector_name
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
    ) -> list[DocumentHit]:
        """The ``limit`` documents best matching ``query``, one hit each, with up to ``chunks`` matching chunks.

        score: ``"max"`` ranks documents by their best chunk; ``"sum"`` re-ranks the documents found by the sum of
        their listed chunks' scores. A server (and local mode) groups in the engine; on Qdrant Edge the best chunks
        are fetched until ``limit`` documents are found, so no document is crowded out by another's chunks.
        rerank: a CrossEncoder that re-scores the listed chunks of the best ``rerank_candidates`` documents.
        """
        core = self._core
        depth = core.rerank_depth(rerank, rerank_candidates, limit)
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise InvalidArgumentError(f"chunks={chunks!r} must be a positive integer.")
        if score not in ("max", "sum"):
            raise InvalidArgumentError(f"score={score!r} must be 'max' or 'sum'.")
        if candidates is None:
            candidates = max(depth * chunks * 4, 100)
        plan = core.search_plan(mode, fusion, weights, None, candidates, depth)
        texts, selected = core.check_search_args([query], depth, query_filter, score_threshold, plan)
        await self._ensure(create=False)
        search = (await run_blocking(core.search_queries, texts, plan))[0]
        groups = await self._store.query_groups(
            core.collection_name, search, GROUP_BY, depth, chunks, chunks_only(selected), score_threshold
        )
        hits = [
            document_hit([(r.score, r.payload or {}) for r in tie_ordered(rows, _chunk_index)], score)
            for rows in groups
            if rows
        ]
        if rerank is not None:
            return await run_blocking(core.reranked_documents, texts[0], hits, rerank, limit, score)
        if score == "sum":
            hits.sort(key=lambda h: -h.score)
        return tie_ordered(hits, lambda h: (type(h.id).__name__, str(h.id)))


async def _to_write(host: _AsyncHost, group: list[PreparedDocument], on_conflict: OnConflict) -> list[PreparedDocument]:
    """The documents to (re)write: not stored in this version (``"skip"``: not stored at all)."""
    core = host._core
    wanted = [point for d in group for point in (d.point_ids if on_conflict == "overwrite" else d.point_ids[:1])]
    found = await host._store.retrieve(core.collection_name, core.vector_name, wanted, False)
    stored = {r.id: r.payload for r in found}
    return [d for d in group if not is_stored(d, stored, any_version=on_conflict == "skip")]


async def _replace(
    host: _AsyncHost,
    points: list[PreparedPoint],
    vectors: PointVectors | None,
    settled: list[PreparedDocument],
    wait: bool,
) -> None:
    """Write the new chunks, then remove every other version's chunks of the settled documents (in this order, so
    a document is never missing; a crash in between leaves old chunks that the next run of the same upsert
    removes)."""
    name = host._core.collection_name
    if points and vectors is not None:
        await host._store.upsert(name, [p.point_id for p in points], vectors, [p.payload for p in points], wait)
    if settled:
        await host._store.delete(name, None, stale_filter(settled), wait)


def _groups(documents: Iterable[list[PreparedDocument]], size: int) -> Iterator[list[PreparedDocument]]:
    """Documents in groups of about ``size`` chunks; a document's chunks are never split between two writes."""
    group: list[PreparedDocument] = []
    count = 0
    for document in itertools.chain.from_iterable(documents):
        if group and count + len(document.chunks) > size:
            yield group
            group, count = [], 0
        group.append(document)
        count += len(document.chunks)
    if group:
        yield group


def _chunk_index(row: ScoredRecord) -> int:
    return int((row.payload or {})[DOCUMENT_KEY]["chunk"])
