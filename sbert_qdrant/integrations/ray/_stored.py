"""Resume (``on_conflict="skip"``): which of a dataset's rows are stored before the run, found by the driver with
ids-only lookups (``TextCollection.stored_ids``, batch by batch) and handed to the actors as one sorted array of
16-byte point ids in Ray's object store: each actor maps it, read-only and shared, instead of holding its own set,
so an actor's own memory does not grow with the ids stored (16 bytes an id, once per node)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import numpy as np
import ray

from ...errors import InvalidInputError
from ...records import point_id

#: A point id (a UUID) as 16 bytes: rows of the sorted array.
_POINT = np.dtype("S16")


def stored_mark(key: Any) -> str | None:
    """How a stored id is looked up: its point id (None for a key that is not an id)."""
    try:
        return point_id(key)
    except InvalidInputError:
        return None


def points(marks: Iterable[str | None]) -> np.ndarray:
    """Point ids as 16-byte rows (a missing one: 16 zero bytes, never a stored point's)."""
    raw = b"".join(uuid.UUID(mark).bytes if mark is not None else bytes(16) for mark in marks)
    return np.frombuffer(raw, dtype=_POINT)


class StoredIds:
    """The point ids stored before the run, sorted, in Ray's object store (``ray.put``): picklable by reference."""

    def __init__(self, points: np.ndarray) -> None:
        self.count = len(points)
        self._ref = ray.put(np.sort(points)) if self.count else None
        self._points: np.ndarray | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"count": self.count, "_ref": self._ref, "_points": None}

    def marks(self, keys: Iterable[Any]) -> np.ndarray:
        """Per key, whether its point is stored (a key that is not an id: not stored)."""
        wanted = points([stored_mark(key) for key in keys])
        if self._ref is None:
            return np.zeros(len(wanted), dtype=bool)
        if self._points is None:  # mapped from the object store, not copied
            self._points = ray.get(self._ref)
        stored = self._points
        at = np.minimum(np.searchsorted(stored, wanted), len(stored) - 1)
        return (stored[at] == wanted) & (wanted != _EMPTY)


_EMPTY = np.zeros((), dtype=_POINT)[()]
