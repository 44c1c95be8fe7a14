"""Grouping search results by a payload value, for engines without their own grouping (Qdrant Edge, local mode)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .base import Payload, ScoredRecord
from .calls import Grouping, StoreQuery


def first_fetch(query: StoreQuery, grouping: Grouping) -> StoreQuery:
    """The best points to fetch first (payloads included) for ``query.limit`` groups; ``wider`` fetches more while
    fewer groups were found and more points exist, so no group is lost to others' points crowding the list."""
    return replace(query, limit=max(query.limit * grouping.size * 2, 64), with_payload=True)


def wider(fetch: StoreQuery) -> StoreQuery:
    """The next fetch: 4x more points."""
    return replace(fetch, limit=4 * fetch.limit)


def groups_found(
    rows: list[ScoredRecord], fetch: StoreQuery, query: StoreQuery, grouping: Grouping
) -> list[list[ScoredRecord]] | None:
    """The query's groups among the rows fetched (each its best points among them), or None when fewer were found
    than asked for and the fetch did not reach the end (fetch ``wider``)."""
    groups = group_rows(rows, grouping.by)
    if len(groups) >= query.limit or len(rows) < fetch.limit:
        return [hits[: grouping.size] for hits in groups[: query.limit]]
    return None


def group_rows(rows: list[ScoredRecord], group_by: str) -> list[list[ScoredRecord]]:
    """Rows grouped by their payload value at ``group_by`` (str and int values apart), groups in the order of their
    best row; rows without the value are left out."""
    groups: dict[tuple[str, Any], list[ScoredRecord]] = {}
    for row in rows:
        value = _value_at(row.payload, group_by)
        if value is not None:
            groups.setdefault((type(value).__name__, value), []).append(row)
    return list(groups.values())


def _value_at(payload: Payload | None, path: str) -> Any:
    """The payload value at a dotted path (e.g. ``document.id``), or None."""
    value: Any = payload
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value
