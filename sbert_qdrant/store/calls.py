"""The values a call to a store takes, one per call: a query (one batch of searches), a grouping of its hits, a
write of points, a scan of every point. A new option of a call is one field here plus its engines' cases; a query
carries the caller's ``SearchRequest`` whole, so that a search option the engine applies as it is is a field of the
request that the engines read, never copied here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from qdrant_client import models

from ..search_request import SearchRequest
from .base import Payload, PayloadSelector, PointVectors, SearchQuery


@dataclass(frozen=True)
class StoreQuery:
    """One batch of engine searches: each search's best ``limit`` points, one list per search (the filter applies
    at every stage of each). Made by ``SearchPlan.store_query`` only (in the package): ``limit``, the filter and
    the payload are the collection's (depth or candidates; texts or chunks only; what a hit needs), ``request`` is
    the caller's, whose engine options (``score_threshold``, and any the engines read) each applies as they are."""

    searches: Sequence[SearchQuery]
    limit: int
    query_filter: models.Filter | None = None
    with_payload: PayloadSelector = True
    request: SearchRequest = field(default_factory=SearchRequest)


@dataclass(frozen=True)
class Grouping:
    """A search's hits grouped by the payload value at ``by`` (best point first), ``size`` best points a group."""

    by: str
    size: int


@dataclass(frozen=True)
class StoreWrite:
    """A batch of points to write: ids, their vectors by slot and payloads; ``wait`` until the engine applied it."""

    ids: Sequence[str]
    vectors: PointVectors
    payloads: Sequence[Payload]
    wait: bool = True


@dataclass(frozen=True)
class Scan:
    """A read of every point (those matching ``query_filter``), ``batch_size`` a page, from the point id
    ``offset`` on (None: the first); the vectors of slot ``vector_name`` with each when ``with_vectors``."""

    vector_name: str
    with_vectors: bool = False
    batch_size: int = 1024
    query_filter: models.Filter | None = None
    offset: str | None = None
