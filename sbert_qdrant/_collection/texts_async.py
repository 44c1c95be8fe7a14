"""Texts in a collection: one point each, written, read, searched and mined for duplicates; AsyncTextCollection
holds an ``AsyncTexts`` over its context and its text methods call it (the arguments are documented there).

Written once, for asyncio; ``tools/unasync.py`` derives ``texts_sync.py`` (what TextCollection holds).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from qdrant_client import models

from ..dedup import Calibration, best_f1_threshold
from ..documents import first_chunks_only, is_chunk, texts_only
from ..errors import InvalidArgumentError, UnsupportedError
from ..layout import PointLayout
from ..records import (
    CheckedRecord,
    Hit,
    Key,
    PreparedPoint,
    StoredText,
    UpsertResult,
    check_id,
    check_ids,
    checked_batches,
    point_id,
)
from ..search_request import MIN_CANDIDATES, SearchRequest
from ..store.base import Diversified, PointVectors, ScoredRecord, StoredRecord
from ..store.calls import Scan
from ..types import OnConflict
from .bulk_async import write
from .context_async import AsyncCollectionContext
from .duplicates import DuplicatePair, most_similar_pairs, pair_scores, split_pairs, without_self
from .filters import engine_filter
from .overlapped_async import Step
from .runtime_async import run_blocking
from .schema import stored_threshold, with_calibration
from .search import (
    SearchPlan,
    check_candidates,
    check_limit,
    check_queries,
    dense_search,
    engine_searches,
    hits,
    mmr_ordered,
    payload_selector,
    reranked,
    search_plan,
)
from .vectors import bounded_batch, point_vectors, show_progress
from .writes import WriteOptions, points_write

#: What a text search cannot apply, and why.
_DOCUMENT_OPTIONS = {
    "chunks": "a text search returns one hit per text; chunks are listed by search_documents",
    "score": "a text's score is its own; documents are scored from chunks by search_documents",
}
#: What a search by a vector (or by a stored text's vector) cannot apply, and why.
_VECTOR_REFUSED = {
    **_DOCUMENT_OPTIONS,
    "mode": "a vector is searched densely; search_text takes a text for sparse and hybrid modes",
    "fusion": "a vector is searched densely (no fusion)",
    "weights": "a vector is searched densely (no fusion)",
    "diversity": "MMR re-orders a text query's hits: use search_text(query, diversity=...)",
    "rescore": "late interaction needs the query's tokens: use search_text(query, rescore=...)",
    "rerank": "a re-ranker reads the query's text: use search_text(query, rerank=...)",
}


@dataclass(frozen=True)
class AsyncTexts:
    """The text side of a collection (documents' chunks are never seen or touched here)."""

    context: AsyncCollectionContext

    async def upsert(self, texts: Iterable[Any], options: WriteOptions) -> UpsertResult:
        """Embed (or take as given) and store texts; one id per record."""
        context = self.context
        config = context.config
        o = options
        batch = bounded_batch(config, config.check_write(o.batch_size, o.on_conflict, context.store.upsert_batch))
        shape = config.given_vectors(o.vectors_from, o.vectors)
        return await write(
            context,
            checked_batches(texts, o.ids, o.payloads, batch, o.vectors, shape, config.layout.reserved),
            partial(_plan, context, on_conflict=o.on_conflict, wait=o.wait and not o.bulk),
            bulk=o.bulk,
            show_progress=show_progress(config, o.show_progress_bar),
            total=operator.length_hint(texts) or None,
        )

    async def delete(self, ids: Sequence[Key] | None, query_filter: models.Filter | None, wait: bool) -> None:
        """Delete texts by id or by a filter, never a document's chunk."""
        context = self.context
        context.config.require_writable()
        if (ids is None) == (query_filter is None):
            raise InvalidArgumentError("pass ids= (the ids upsert_texts returned) or query_filter=, exactly one.")
        points: list[models.ExtendedPointId] = [point_id(key) for key in check_ids(ids)] if ids is not None else []
        selected = engine_filter(query_filter) if ids is None else None
        await context.ensure(create=False)
        if ids is not None and not points:
            return
        if ids is not None and not context.documents:
            await context.store.delete(context.name, [str(p) for p in points], None, wait)
            return
        if ids is not None:
            selected = models.Filter(must=[models.HasIdCondition(has_id=points)])
        await context.store.delete(context.name, None, texts_only(selected), wait)

    async def get(self, ids: Sequence[Key], with_vectors: bool) -> list[StoredText]:
        """Stored texts by id, in the order asked."""
        context = self.context
        point_ids = [point_id(key) for key in check_ids(ids)]
        await context.ensure(create=False)
        config = context.config
        found = await context.store.retrieve(context.name, config.vector_name, point_ids, with_vectors)
        return _stored_texts(point_ids, found, config.layout)

    async def search(self, queries: Sequence[str], request: SearchRequest) -> list[list[Hit]]:
        """Each query's ``limit`` best texts after the first ``offset``, re-ranked when ``rerank`` is given."""
        request.refuse("a text search", _DOCUMENT_OPTIONS)
        found = await self._search(queries, request)
        rerank = request.reranking
        if rerank is not None and found:
            shown = request.limit + request.offset
            found = await run_blocking(reranked, self.context.config, list(queries), found, rerank, shown)
        return await self._paged(found, request.offset, request.with_vectors)

    async def search_vector(self, vector: Sequence[float] | np.ndarray, request: SearchRequest) -> list[Hit]:
        """The ``limit`` texts nearest to a dense vector of the slot ``using``."""
        return await self._nearest(vector, await self._vector_plan(request))

    async def _vector_plan(self, request: SearchRequest) -> SearchPlan:
        """The plan of a search by a vector of the slot ``using``."""
        config = await self.context.config_for(request.using)
        request.refuse("a search by vector", _VECTOR_REFUSED)
        return search_plan(config, request, request.depth, max(request.depth, MIN_CANDIDATES))

    async def _nearest(
        self, vector: Sequence[float] | np.ndarray, plan: SearchPlan, exclude: str | None = None
    ) -> list[Hit]:
        """The ``limit`` texts nearest to a dense vector of the plan's slot (``exclude``: a point left out)."""
        context, request = self.context, plan.request
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape != (plan.encoder.dimension,) or not np.isfinite(query).all():
            raise InvalidArgumentError(
                f"vector has shape {np.shape(vector)}: pass {plan.encoder.dimension} finite numbers, a vector of the "
                f"model of slot {plan.using!r} (its encode_query)."
            )
        selected = plan.query_filter
        if exclude is not None:
            selected = models.Filter(
                must=[selected] if selected else None, must_not=[models.HasIdCondition(has_id=[exclude])]
            )
        await context.ensure(create=False)
        config = context.config
        check_candidates(config, plan)
        search = dense_search(config, plan.using, query.tolist(), plan)
        selector = payload_selector(config, request.with_payload, None)
        call = plan.store_query([search], request.depth, context.texts_only(selected), selector)
        found = await context.store.query(context.name, call)
        return (await self._paged([hits(config, found[0])], request.offset, request.with_vectors))[0]

    async def search_similar(self, id: Key, request: SearchRequest) -> list[Hit]:
        """ "More like this": the texts nearest to the stored text ``id`` in the slot ``using``, itself left out."""
        context = self.context
        point = point_id(check_id(id, "id"))
        plan = await self._vector_plan(request)
        await context.ensure(create=False)
        found = await context.store.retrieve(context.name, plan.using, [point], True)
        if not found or found[0].vector is None or is_chunk(found[0].payload or {}):
            raise InvalidArgumentError(f"id={id!r} is not a stored text; pass an id upsert_texts returned.")
        return await self._nearest(found[0].vector, plan, exclude=point)

    async def scroll(
        self, scroll_filter: models.Filter | None, limit: int, offset: Key | None, with_vectors: bool
    ) -> tuple[list[StoredText], Key | None]:
        """A page of stored texts in point-id order, from the text ``offset`` on, and the id the next page starts at."""
        context = self.context
        check_limit(limit)
        start = point_id(check_id(offset, "offset")) if offset is not None else None
        selected = engine_filter(scroll_filter)
        await context.ensure(create=False)
        config = context.config
        first: list[StoredRecord] = []
        pages = context.store.scroll(
            context.name, Scan(config.vector_name, with_vectors, limit + 1, context.texts_only(selected), start)
        )
        async for page in pages:
            first = page
            break
        texts = [StoredText(*config.layout.split(r.id, r.payload), r.vector, r.id) for r in first[: limit + 1]]
        return texts[:limit], (texts[limit].id if len(texts) > limit else None)

    async def _paged(self, found: list[list[Hit]], offset: int, with_vectors: bool) -> list[list[Hit]]:
        """Each list's hits after the first ``offset``, with their stored vectors when asked for."""
        found = [rows[offset:] for rows in found]
        if not with_vectors or not any(found):
            return found
        context = self.context
        points = list(dict.fromkeys(h.point_id for rows in found for h in rows))
        stored = await context.store.retrieve(context.name, context.config.vector_name, points, True)
        vectors = {r.id: r.vector for r in stored}
        return [[replace(h, vector=vectors.get(h.point_id)) for h in rows] for rows in found]

    async def _search(self, queries: Sequence[str], request: SearchRequest, symmetric: bool = False) -> list[list[Hit]]:
        """The engine's best texts for each query, as many as the request's depth (before any re-ranker)."""
        context = self.context
        config = await context.config_for(request.using, request.rescore)
        depth = request.depth
        plan = search_plan(config, request, depth, max(depth, MIN_CANDIDATES), symmetric)
        texts = check_queries(queries)
        await context.ensure(create=False)
        config = context.config  # with the slots the stored collection records
        if not texts:
            return []
        searches = await run_blocking(engine_searches, config, context.bm25, texts, plan)
        selector = payload_selector(config, request.with_payload, request.rerank)
        selected = context.texts_only(plan.query_filter)
        if plan.fused_mmr:  # MMR over the fused (or BM25) candidates by their own relevance, here: every engine alike
            diversified = [s for s in searches if isinstance(s, Diversified) and s.source is not None]
            sources = [s.source for s in diversified if s.source is not None]
            query = plan.store_query(sources, plan.candidates, selected, selector)
            found = await self._diversified(diversified, await context.store.query(context.name, query), depth)
        else:
            found = await context.store.query(context.name, plan.store_query(searches, depth, selected, selector))
        if context.documents and not any(found):
            await self._require_texts()
        return [hits(config, rows) for rows in found]

    async def _diversified(
        self, searches: list[Diversified], found: list[list[ScoredRecord]], limit: int
    ) -> list[list[ScoredRecord]]:
        """Each search's candidates re-ordered by MMR (``mmr_ordered``), its ``limit`` first, their dense vectors
        read from the store."""
        if not searches:
            return found
        context, using = self.context, searches[0].using
        points = list(dict.fromkeys(r.id for rows in found for r in rows))
        stored = await context.store.retrieve(context.name, using, points, True) if points else []
        vectors = {r.id: r.vector for r in stored if r.vector is not None}
        distance = context.config.layout.slot(using).distance
        return [
            mmr_ordered(rows, vectors, search.vector, search.diversity, limit, distance)
            for search, rows in zip(searches, found, strict=True)
        ]

    async def _require_texts(self) -> None:
        """Say why a text search of a collection holding documents and no texts finds nothing (never silently)."""
        context = self.context
        if await context.store.count(context.name, context.texts_only(None)):
            return
        documents = await context.store.count(context.name, first_chunks_only(None))
        raise UnsupportedError(
            f"collection {context.name!r} holds {documents} documents and no texts: a text search never returns a "
            "piece of a document. Search them one hit per document with search_documents(query) (CLI: search "
            "--documents; LangChain and LlamaIndex: SbertDocumentRetriever)."
        )

    async def find_duplicates(self, texts: list[str], threshold: float | None, limit: int) -> list[list[Hit]]:
        """Each text's stored duplicates, the record stored from the very same text left out."""
        check_limit(limit)
        cut = await self._threshold(threshold)
        found = await self._search(texts, SearchRequest(limit=limit + 1, score_threshold=cut), symmetric=True)
        return without_self(texts, found, limit)

    async def calibrate_threshold(self, labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> Calibration:
        """Best-F1 threshold on labelled pairs, stored with the collection."""
        context = self.context
        left, right, labels = split_pairs(labelled_pairs)
        scores = await run_blocking(pair_scores, context.config, left, right)
        calibration = best_f1_threshold(scores, labels)
        await context.ensure(create=True)
        current = await context.store.metadata(context.name)
        await context.store.update_metadata(context.name, with_calibration(current, calibration))
        return calibration

    async def mine_duplicates(
        self, threshold: float | None, top_k: int, limit: int | None, block_size: int
    ) -> list[DuplicatePair]:
        """The most similar pairs of stored texts, best first."""
        context = self.context
        cut = await self._threshold(threshold)
        records: list[StoredRecord] = []
        config = context.config
        scan = Scan(config.vector_name, with_vectors=True, query_filter=context.texts_only(None))
        async for page in context.store.scroll(context.name, scan):
            records.extend(page)
        return await run_blocking(most_similar_pairs, config, records, cut, top_k, limit, block_size)

    async def _threshold(self, threshold: float | None) -> float:
        """The duplicate threshold: given, else calibrated, else the default."""
        if threshold is not None:
            return threshold
        await self.context.ensure(create=False)
        return stored_threshold(await self.context.store.metadata(self.context.name))


async def _plan(
    context: AsyncCollectionContext,
    batch: tuple[list[CheckedRecord], list[CheckedRecord]],
    on_conflict: OnConflict,
    wait: bool,
) -> Step:
    """The write of a batch of texts: every record's id, the points of those kept (a repeat is written once)."""
    every, keep = batch
    points = [context.config.layout.point(r) for r in keep]
    return await plan_points(context, [r.id for r in every], points, on_conflict, wait)


async def plan_points(
    context: AsyncCollectionContext, ids: list[Key], points: list[PreparedPoint], on_conflict: OnConflict, wait: bool
) -> Step:
    """The write of a batch of text points: ``ids`` of every record in it, ``points`` those to write unless already
    stored (``on_conflict="skip"``)."""
    if on_conflict == "skip" and points:
        stored = await context.store.existing_ids(context.name, [p.point_id for p in points])
        todo = [p for p in points if p.point_id not in stored]
    else:
        todo = points
    writing = {p.point_id for p in todo}
    return Step(
        ids=ids,
        writes=[p.id for p in todo],
        stored=[p.id for p in points if p.point_id not in writing],
        encode=partial(point_vectors, context.config, context.bm25, [p.text for p in todo], _given(todo)),
        write=partial(_write_points, context, todo, wait) if todo else None,
    )


async def _write_points(
    context: AsyncCollectionContext, points: list[PreparedPoint], wait: bool, vectors: PointVectors | None
) -> None:
    if vectors is not None:
        await context.store.upsert(context.name, points_write(points, vectors, wait))


def _given(points: list[PreparedPoint]) -> list[np.ndarray] | None:
    """The points' vectors when they were encoded elsewhere (all or none were: ``records.checked_batches``)."""
    given = [p.vector for p in points if p.vector is not None]
    return given if given else None


def _stored_texts(order: list[str], found: list[StoredRecord], layout: PointLayout) -> list[StoredText]:
    """The texts found, in the order asked (by point id); missing ones and documents' chunks left out."""
    by_id = {r.id: r for r in found if not is_chunk(r.payload or {})}
    out = []
    for point in dict.fromkeys(order):
        record = by_id.get(point)
        if record is not None:
            key, text, fields = layout.split(point, record.payload)
            out.append(StoredText(key, text, fields, record.vector, point))
    return out
