"""Searching a collection: the checked plan of a search, the engine searches of query texts, hits in a fixed order,
and re-ranking by a cross-encoder (any ``Reranker``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
from qdrant_client import models

from ..documents import DocumentHit
from ..encoder import Bm25
from ..errors import CollectionMismatchError, InvalidArgumentError, InvalidInputError
from ..protocols import Reranker, TextEncoder, TokenEncoder
from ..records import Hit, check_text
from ..search_request import MIN_CANDIDATES, Rerank, SearchRequest
from ..store.base import (
    Diversified,
    Fused,
    Nearest,
    PayloadSelector,
    Rescored,
    ScoredRecord,
    SearchQuery,
    default_search,
)
from ..store.calls import StoreQuery
from ..types import SearchMode
from .filters import engine_filter
from .schema import CollectionConfig
from .vectors import encode_documents, encode_queries

T = TypeVar("T")
#: Reciprocal rank fusion's k: Qdrant's default, and the best of 2, 10 and 60 on BEIR SciFact's train split.
RRF_K = 2
#: MMR's candidates when none are given: twice the points asked for, at least this many, so that diversity picks
#: among points still relevant (SciFact train, diversity 0.5, limit 10, dense: 20 candidates cost 7.4 nDCG@10
#: points, 100 cost 11.8; benchmarks/mmr.py).
MMR_MIN = 20


@dataclass(frozen=True)
class SearchPlan:
    """A checked request as the engine searches it: the request itself, its dense slot resolved, its filter in the
    engine's form, and the candidates each stage draws; ``symmetric`` encodes queries as stored texts
    (duplicates)."""

    request: SearchRequest
    #: The dense slot searched (the request's ``using``, resolved: the primary when it names none) and its encoder.
    using: str
    encoder: TextEncoder
    #: The engine filter of the request's ``query_filter`` (before a path adds its own: texts or chunks only).
    query_filter: models.Filter | None
    candidates: int = MIN_CANDIDATES
    #: Hits each source of a fusion draws; MMR after a fusion picks among the best ``candidates`` of the fusion of
    #: sources as deep as the fusion's own.
    drawn: int = MIN_CANDIDATES
    #: The token encoder of the request's ``rescore`` slot (late interaction; None: none).
    tokens: TokenEncoder | None = None
    symmetric: bool = False

    @property
    def fused_mmr(self) -> bool:
        """Whether MMR re-orders a sparse or hybrid search's candidates (by their own relevance, in the collection)."""
        return self.request.mmr is not None and self.request.mode != "dense"

    def store_query(
        self,
        searches: Sequence[SearchQuery],
        limit: int,
        query_filter: models.Filter | None,
        with_payload: PayloadSelector = True,
    ) -> StoreQuery:
        """The one engine call of every search path (``limit`` points of each search, ``query_filter`` the path's
        own): the request travels with it whole, its engine options read by the engines."""
        return StoreQuery(searches, limit, query_filter, with_payload, self.request)


def check_limit(limit: object) -> None:
    """The one check of a ``limit`` outside a search request (a scroll's page, duplicates)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgumentError(f"limit={limit!r} must be a positive integer.")


def search_plan(
    settings: CollectionConfig, request: SearchRequest, points: int, candidates: int, symmetric: bool = False
) -> SearchPlan:
    """The engine side of a checked request, each slot it names resolved once (an unknown one refused before
    anything is encoded). ``points``: the points the path reads (texts: the depth; documents: chunks of the
    depth's documents); ``candidates``: the path's default when the request gives none (MMR's default instead:
    twice ``points``, at least ``MMR_MIN``; never fewer than the request's depth)."""
    using, encoder = settings.encoder_of(request.using)
    tokens = None if request.rescore is None else settings.token_encoder_of(request.rescore)
    threshold = request.score_threshold  # a finite number (the request's check); dense: in the distance's range
    if threshold is not None and request.mode == "dense":
        distance = settings.layout.slot(using).distance
        low, high = _SCORE_RANGES.get(distance, (-np.inf, np.inf))
        if not low <= threshold <= high:
            raise InvalidArgumentError(
                f"score_threshold={threshold!r} is outside the {distance} score range [{low}, {high}]."
            )
    drawn = max(candidates if request.candidates is None else request.candidates, request.depth)
    if request.candidates is not None:
        candidates = request.candidates
    elif request.diversity is not None:
        candidates = max(2 * points, MMR_MIN)
    return SearchPlan(
        request,
        using,
        encoder,
        engine_filter(request.query_filter),
        max(candidates, request.depth),
        drawn,
        tokens,
        symmetric,
    )


#: The scores each dense distance gives (a threshold outside them would keep every hit, or none).
_SCORE_RANGES = {"cosine": (-1.0, 1.0), "euclid": (0.0, np.inf), "manhattan": (0.0, np.inf)}


def check_queries(queries: Sequence[str]) -> list[str]:
    """The query texts, checked (before anything is encoded or asked)."""
    if isinstance(queries, str) or not isinstance(queries, Sequence):
        raise InvalidInputError(f"queries must be a list of str, not {type(queries).__name__}; wrap it: [query].")
    return [check_text(q, f"queries[{i}]", "pass words to search for") for i, q in enumerate(queries)]


def check_candidates(settings: CollectionConfig, plan: SearchPlan) -> None:
    """Refuse ``candidates=`` on a search no stage of which draws candidates (on the collection's stored slots):
    it would be ignored."""
    request = plan.request
    if request.candidates is None or request.mode == "hybrid" or request.diversity is not None:
        return
    if request.rescore is not None or (request.mode == "dense" and settings.layout.first_stage(plan.using)):
        return
    raise InvalidArgumentError(
        f"candidates={request.candidates} applies where a stage draws candidates (mode='hybrid', diversity=, "
        f"rescore=, a slot with a first stage); this {request.mode} search of slot {plan.using!r} returns its best "
        "hits directly and would ignore it: drop it (a re-ranker draws rerank_candidates=; a deeper HNSW search is "
        "search_params=SearchParams(hnsw_ef=...))."
    )


def require_sparse(settings: CollectionConfig, bm25: Bm25 | None, mode: SearchMode) -> None:
    """Refuse a sparse or hybrid search of a collection without BM25 vectors, naming the fix."""
    if mode != "dense" and bm25 is None:
        raise CollectionMismatchError(
            f"collection {settings.collection_name!r} has no BM25 vectors written by sbert-qdrant, so "
            f"mode={mode!r} cannot search it: use mode='dense', or re-index its texts into a new collection "
            "(TextCollection(new_name, sparse='bm25').upsert_texts(...)); an existing collection is never "
            "recreated silently."
        )


def engine_searches(
    settings: CollectionConfig, bm25: Bm25 | None, texts: list[str], plan: SearchPlan
) -> list[SearchQuery]:
    """Encode query texts and build one engine search each (blocking: run off the event loop)."""
    request, name = plan.request, plan.using
    require_sparse(settings, bm25, request.mode)
    check_candidates(settings, plan)
    dense: list[list[float]] = []
    if request.mode != "sparse" or request.diversity is not None:
        encode = encode_documents if plan.symmetric else encode_queries
        dense = encode(settings, texts, name).tolist()
    sparse = settings.layout.sparse
    lexical = [bm25.embed_query(t) for t in texts] if bm25 is not None and request.mode != "dense" else []
    tokens: list[list[list[float]]] = []
    if plan.tokens is not None:
        encoded = plan.tokens.encode_query(texts, settings.encode_batch_size)
        tokens = [np.asarray(m, dtype=np.float32).tolist() for m in encoded]
    hybrid, mmr = request.hybrid, request.mmr
    searches: list[SearchQuery] = []
    for i in range(len(texts)):
        base: Nearest | Fused | Rescored
        if hybrid is not None:
            lexical_source = Nearest(sparse.name, lexical[i])  # type: ignore[union-attr]  # require_sparse: it is
            sources = (dense_search(settings, name, dense[i], plan), lexical_source)
            weights = None if hybrid.weights is None else (float(hybrid.weights[0]), float(hybrid.weights[1]))
            base = Fused(sources, hybrid.fusion, plan.drawn, weights, RRF_K)
        elif request.mode == "sparse":
            base = Nearest(sparse.name, lexical[i])  # type: ignore[union-attr]
        else:
            base = dense_search(settings, name, dense[i], plan)
        if request.rescore is not None:
            searches.append(Rescored(base, request.rescore, tokens[i], plan.candidates))
        elif mmr is None:
            searches.append(base)
        else:
            source = None if request.mode == "dense" else base
            params = request.search_params
            searches.append(Diversified(name, dense[i], mmr.diversity, plan.candidates, source, params))
    return searches


def dense_search(settings: CollectionConfig, name: str, vector: list[float], plan: SearchPlan) -> Nearest | Rescored:
    """The nearest points of dense slot ``name``; where it has a first stage, its ``candidates`` nearest by the
    vector's first values, re-scored by the full vector in the engine (prefetch, then query). Without
    ``search_params``, a quantized collection's codes are searched oversampled and re-scored by the originals."""
    params = plan.request.search_params
    params = params if params is not None else default_search(settings.quantization)
    first = settings.layout.first_stage(name)
    if first is None:
        return Nearest(name, vector, params)
    return Rescored(Nearest(first.name, vector[: first.size], params), name, vector, plan.candidates)


def mmr_ordered(
    rows: list[ScoredRecord],
    vectors: dict[str, np.ndarray],
    query: Sequence[float],
    diversity: float,
    limit: int,
    distance: str,
) -> list[ScoredRecord]:
    """``limit`` of ``rows`` (a sparse or hybrid search's candidates, best first) picked by maximal marginal
    relevance, in the order picked, each keeping its own score: relevance is the candidate's own score, set on the
    scale of its dense similarity to the query (min-max onto the candidates' similarities), so that ``diversity``
    weighs redundancy (the candidates' dense similarity to those picked) against relevance as MMR after a dense
    search does: ``(1 - diversity) * relevance - diversity * max similarity to a picked one``. Engine-free: the
    same on every engine. A candidate without a stored dense vector is left out."""
    rows = [r for r in tie_ordered(rows, _point_id) if r.id in vectors]
    if not rows:
        return []
    matrix = np.stack([np.asarray(vectors[r.id], dtype=np.float64) for r in rows])
    target = np.asarray(query, dtype=np.float64)
    if distance == "cosine":
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        target /= max(float(np.linalg.norm(target)), 1e-12)
    if distance in ("cosine", "dot"):
        similar, to_query = matrix @ matrix.T, matrix @ target
    else:  # euclid, manhattan: the nearer, the more alike
        order = 1 if distance == "manhattan" else 2
        similar = -np.linalg.norm(matrix[:, None, :] - matrix[None, :, :], ord=order, axis=2)
        to_query = -np.linalg.norm(matrix - target, ord=order, axis=1)
    own = np.asarray([r.score for r in rows], dtype=np.float64)
    low, high = float(own.min()), float(own.max())
    scaled = (own - low) / (high - low) if high > low else np.ones_like(own)
    relevance = float(to_query.min()) + scaled * float(to_query.max() - to_query.min())
    picked = [int(np.argmax(relevance))]
    closest = similar[picked[0]].copy()
    while len(picked) < min(limit, len(rows)):
        value = (1 - diversity) * relevance - diversity * closest
        value[picked] = -np.inf
        best = int(np.argmax(value))
        picked.append(best)
        closest = np.maximum(closest, similar[best])
    return [rows[i] for i in picked]


def payload_selector(settings: CollectionConfig, with_payload: bool, rerank: Reranker | None) -> PayloadSelector:
    """What to fetch with hits: everything, or only the caller's id (hits always carry it), and the text when a
    re-ranker is to read it."""
    layout = settings.layout
    if with_payload:
        return True
    return [layout.id_field, layout.text_field] if rerank is not None else [layout.id_field]


def hits(settings: CollectionConfig, rows: list[ScoredRecord]) -> list[Hit]:
    """Hits in the engine's order; points with equal scores (common after rank fusion) in point-id order, which
    engines do not fix."""
    out = []
    for row in tie_ordered(rows, _point_id):
        key, text, fields = settings.layout.split(row.id, row.payload)
        out.append(Hit(key, row.score, text, fields, row.id))
    return out


def tie_ordered(items: list[T], key: Callable[[T], Any], score: Callable[[T], float] | None = None) -> list[T]:
    """Items in the engine's order, those with equal scores in ``key`` order (engines do not fix that order)."""
    return [item for _, tied in itertools.groupby(items, key=score or _score) for item in sorted(tied, key=key)]


def _point_id(row: ScoredRecord) -> str:
    return row.id


def _score(item: Any) -> float:
    return float(item.score)


# -- re-ranking ----------------------------------------------------------------------------------------------------


def blended_scores(cross: Sequence[float], retrieval: Sequence[float], weight: float) -> list[float]:
    """``weight * cross + (1 - weight) * retrieval``, each min-max scaled over the candidates (a constant list
    scales to 0); ``weight`` 1 returns the cross-encoder's scores as they are."""
    if weight == 1:
        return list(cross)

    def scaled(values: Sequence[float]) -> list[float]:
        low, high = min(values, default=0.0), max(values, default=0.0)
        return [(v - low) / (high - low) if high > low else 0.0 for v in values]

    return [weight * c + (1 - weight) * r for c, r in zip(scaled(cross), scaled(retrieval), strict=True)]


def _weight(rerank: Rerank) -> float:
    """The re-ranker's weight in the blend (1: its score alone)."""
    return 1.0 if rerank.weight is None else float(rerank.weight)


def _cross_scores(settings: CollectionConfig, cross: Reranker, pairs: list[tuple[str, str]]) -> list[float]:
    """One score per pair; equal pairs are scored once, so they tie exactly on every CPU (and cost one pass)."""
    distinct = list(dict.fromkeys(pairs))
    if not distinct:
        return []
    scores = np.asarray(cross.predict(distinct, batch_size=settings.encode_batch_size)).ravel()
    by_pair = {pair: float(score) for pair, score in zip(distinct, scores, strict=True)}
    return [by_pair[pair] for pair in pairs]


def reranked(
    settings: CollectionConfig, queries: list[str], found: list[list[Hit]], rerank: Rerank, limit: int
) -> list[list[Hit]]:
    """Each query's hits re-scored by the re-ranker (blended with their retrieval score by its weight), best
    ``limit`` first (blocking)."""
    pairs = [(q, h.text or "") for q, hits in zip(queries, found, strict=True) for h in hits]
    scores = iter(_cross_scores(settings, rerank.model, pairs))
    out = []
    for hits in found:
        new = blended_scores([next(scores) for _ in hits], [h.score for h in hits], _weight(rerank))
        rescored = [replace(h, score=s, retrieval_score=h.score) for h, s in zip(hits, new, strict=True)]
        out.append(sorted(rescored, key=lambda h: -h.score)[:limit])
    return out


def reranked_documents(
    settings: CollectionConfig, query: str, hits: list[DocumentHit], rerank: Rerank, limit: int, scoring: str
) -> list[DocumentHit]:
    """Documents re-scored by the re-ranker over their listed chunks (each chunk's score blended with its retrieval
    score by its weight, over all listed chunks), best ``limit`` first (blocking)."""
    listed = [c for h in hits for c in h.chunks]
    cross_scores = _cross_scores(settings, rerank.model, [(query, c.text) for c in listed])
    scores = iter(blended_scores(cross_scores, [c.score for c in listed], _weight(rerank)))
    out = []
    for hit in hits:
        chunks = [replace(c, score=next(scores), retrieval_score=c.score) for c in hit.chunks]
        chunks.sort(key=lambda c: -c.score)
        score = chunks[0].score if scoring == "max" else sum(c.score for c in chunks)
        out.append(replace(hit, score=score, chunks=chunks))
    return sorted(out, key=lambda h: -h.score)[:limit]
