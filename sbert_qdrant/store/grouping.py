"""Grouping search results by a payload value, for engines without their own grouping (Qdrant Edge, local mode)."""

from __future__ import annotations

from typing import Any

from .base import Payload, ScoredRecord


def first_fetch(limit: int, group_size: int) -> int:
    """Points to fetch first; a store fetches 4x more while fewer than ``limit`` groups were found and more exist."""
    return max(limit * group_size * 2, 64)


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
