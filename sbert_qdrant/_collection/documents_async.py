"""Documents in a collection: long texts stored as chunks, found one hit per document; AsyncTextCollection holds an
``AsyncDocuments`` over its context and its document methods call it.

Written once, for asyncio; ``tools/unasync.py`` derives ``documents_sync.py`` (what TextCollection holds).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..documents import (
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
    first_chunks_only,
    is_stored,
    stale_filter,
    stored_document,
)
from ..errors import UnsupportedError
from ..records import (
    DOCUMENT_KEY,
    CheckedRecord,
    Key,
    PreparedPoint,
    UpsertResult,
    check_id,
    check_ids,
    checked_batches,
)
from ..search_request import DOCUMENT_CHUNKS, MIN_CANDIDATES, SearchRequest
from ..store.base import PointVectors
from ..store.calls import Grouping, Scan
from ..types import OnConflict
from .bulk_async import write
from .context_async import AsyncCollectionContext
from .overlapped_async import Step
from .runtime_async import run_blocking
from .search import (
    check_limit,
    check_queries,
    engine_searches,
    reranked_documents,
    search_plan,
    tie_ordered,
)
from .vectors import FIRST_GROUP, bounded_batch, point_vectors, show_progress
from .writes import WriteOptions, points_write

#: What a document search cannot apply, and why.
_TEXT_OPTIONS = {
    "with_vectors": "a document hit lists its chunks, which carry no vector",
    "with_payload": "a document hit is built from its chunks' payload",
}
#: A group of documents written together: the ids of every input record in it (repeats too), and the documents.
_Group = tuple[list[Key], list[PreparedDocument]]


@dataclass(frozen=True)
class AsyncDocuments:
    """Documents in a text collection: each one split into chunks that fit the encoder, stored as points that carry
    the document's id, payload and the chunk's place; replaced whole, searched one hit per document. The methods
    of ``AsyncTextCollection`` of the same names (documented there) call these."""

    context: AsyncCollectionContext

    async def upsert(
        self,
        documents: Iterable[Any],
        options: WriteOptions,
        chunk_tokens: int | None,
        overlap_tokens: int | None,
        context_field: str | None,
    ) -> UpsertResult:
        """Chunk, embed and store documents; one id per document."""
        context = self.context
        config = context.config
        o = options
        batch = bounded_batch(config, config.check_write(o.batch_size, o.on_conflict, context.store.upsert_batch))
        chunking = Chunking.of(config.document_encoder(), chunk_tokens, overlap_tokens, context_field)
        shape = config.given_vectors(o.vectors_from, o.vectors, rows=True)
        records = checked_batches(documents, o.ids, o.payloads, max(1, batch // 8), o.vectors, shape)
        return await write(
            context,
            _groups(records, chunking.prepare, batch),
            partial(_plan, context, on_conflict=o.on_conflict, wait=o.wait and not o.bulk),
            bulk=o.bulk,
            show_progress=show_progress(config, o.show_progress_bar),
            total=operator.length_hint(documents) or None,
            documents=True,
            unit="document",
        )

    async def delete(self, ids: Sequence[Key], wait: bool) -> None:
        """Delete documents (every chunk) by id; unknown ids are ignored."""
        context = self.context
        context.config.require_writable()
        keys = check_ids(ids)
        await context.ensure(create=False)
        if keys:
            await context.store.delete(context.name, None, documents_filter(keys), wait)

    async def get(self, id: Key) -> StoredDocument | None:
        """A stored document, its text rebuilt from its chunks, or None."""
        context = self.context
        key = check_id(id, "id")
        await context.ensure(create=False)
        name, vector = context.name, context.config.vector_name
        first = await context.store.retrieve(name, vector, [chunk_point_id(key, 0)], False)
        if not first or not first[0].payload:
            return None
        count = int(first[0].payload[DOCUMENT_KEY]["chunks"])
        found = await context.store.retrieve(name, vector, [chunk_point_id(key, i) for i in range(count)], False)
        return stored_document([r.payload for r in found if r.payload])

    async def scroll(self, limit: int, offset: Key | None) -> tuple[list[StoredDocument], Key | None]:
        """A page of stored documents in their first chunk's point-id order, from the document ``offset`` on, and the
        id of the document the next page starts at."""
        context = self.context
        check_limit(limit)
        start = chunk_point_id(check_id(offset, "offset"), 0) if offset is not None else None
        await context.ensure(create=False)
        name, vector = context.name, context.config.vector_name
        first: list[Any] = []
        scan = Scan(vector, batch_size=limit + 1, query_filter=first_chunks_only(None), offset=start)
        async for page in context.store.scroll(name, scan):
            first = page
            break
        keys = [r.payload[DOCUMENT_KEY]["id"] for r in first if r.payload]
        found = [await self.get(key) for key in keys[:limit]]
        return [d for d in found if d is not None], (keys[limit] if len(keys) > limit else None)

    async def search(self, query: str, request: SearchRequest) -> list[DocumentHit]:
        """The ``limit`` documents best matching ``query`` after the first ``offset``, one hit each, with up to
        ``chunks`` matching chunks."""
        context = self.context
        config = await context.config_for(request.using, request.rescore)
        request.refuse("a document search", _TEXT_OPTIONS)
        depth, chunks, score = request.depth, request.chunks or DOCUMENT_CHUNKS, request.score or "max"
        plan = search_plan(config, request, depth * chunks, max(depth * chunks * 4, MIN_CANDIDATES))
        if plan.fused_mmr:
            raise UnsupportedError(
                f"diversity={request.diversity} after mode={request.mode!r} is not supported for documents: MMR over "
                "their chunks would re-order them by dense similarity alone and throw the BM25 relevance away "
                "(1,000 SciFact abstracts, issue 64: hybrid 86.92 nDCG@10, hybrid + MMR 0.2 so 78.17, no better than "
                "dense + MMR 0.2, 77.73); search "
                "documents with mode='dense' and diversity=, or hybrid without it (texts re-order the fused "
                "candidates themselves)."
            )
        texts = check_queries([query])
        await context.ensure(create=False)
        config = context.config  # with the slots the stored collection records
        search = (await run_blocking(engine_searches, config, context.bm25, texts, plan))[0]
        grouped = plan.store_query([search], depth, chunks_only(plan.query_filter))
        groups = await context.store.query_groups(context.name, grouped, Grouping(GROUP_BY, chunks))
        hits = [
            document_hit([(r.score, r.payload or {}) for r in tie_ordered(rows, chunk_index)], score)
            for rows in groups
            if rows
        ]
        shown = request.limit + request.offset
        rerank = request.reranking
        if rerank is not None:
            hits = await run_blocking(reranked_documents, config, texts[0], hits, rerank, shown, score)
        else:
            if score == "sum":
                hits.sort(key=lambda h: -h.score)
            hits = tie_ordered(hits, lambda h: (type(h.id).__name__, str(h.id)))
        return hits[request.offset : shown]


def _groups(
    batches: Iterable[tuple[list[CheckedRecord], list[CheckedRecord]]],
    prepare: Callable[[CheckedRecord], PreparedDocument],
    size: int,
) -> Iterator[_Group]:
    """Documents in groups of about ``size`` chunks (the first of ``FIRST_GROUP``, so that a load's bar moves and its
    first write lands early), each record's id in input order; a document's chunks are never split between
    two writes."""
    ids: list[Key] = []
    group: list[PreparedDocument] = []
    count, limit = 0, min(size, FIRST_GROUP)
    for every, keep in batches:
        kept = {id(record) for record in keep}
        for record in every:
            document = prepare(record) if id(record) in kept else None  # a repeat is written once, counted each time
            if document is not None and group and count + len(document.chunks) > limit:
                yield ids, group
                ids, group, count, limit = [], [], 0, size
            ids.append(record.id)
            if document is not None:
                group.append(document)
                count += len(document.chunks)
    if ids:
        yield ids, group


async def _plan(context: AsyncCollectionContext, group: _Group, on_conflict: OnConflict, wait: bool) -> Step:
    """The write of a group: the documents not stored in this version (``"skip"``: not stored at all)."""
    ids, documents = group
    config = context.config
    wanted = [p for d in documents for p in (d.point_ids if on_conflict == "overwrite" else d.point_ids[:1])]
    found = await context.store.retrieve(context.name, config.vector_name, wanted, False) if wanted else []
    stored = {r.id: r.payload for r in found}
    todo = [d for d in documents if not is_stored(d, stored, any_version=on_conflict == "skip")]
    writing = {id(d) for d in todo}
    points = [p for d in todo for p in d.points()]
    settled = documents if on_conflict == "overwrite" else todo
    return Step(
        ids=ids,
        writes=[d.id for d in todo],
        stored=[d.id for d in documents if id(d) not in writing],
        encode=partial(point_vectors, config, context.bm25, [p.text for p in points], _given(todo)),
        write=partial(_replace, context, points, settled, wait) if settled else None,
    )


def _given(documents: list[PreparedDocument]) -> list[np.ndarray] | None:
    """The chunks' vectors when they were encoded elsewhere (all or none were: ``records.checked_batches``)."""
    given = [row for d in documents if d.vectors is not None for row in d.vectors]
    return given if given else None


async def _replace(
    context: AsyncCollectionContext,
    points: list[PreparedPoint],
    settled: list[PreparedDocument],
    wait: bool,
    vectors: PointVectors | None,
) -> None:
    """Write the new chunks, then remove every other version's chunks of the settled documents (in this order, so
    a document is never missing; a crash in between leaves old chunks that the next run of the same upsert
    removes)."""
    name = context.name
    if points and vectors is not None:
        await context.store.upsert(name, points_write(points, vectors, wait))
    await context.store.delete(name, None, stale_filter(settled), wait)
