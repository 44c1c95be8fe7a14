"""Resume (``on_conflict="skip"``): which of a dataset's rows are stored before the run, found by the driver with
ids-only lookups (``TextCollection.stored_ids``, batch by batch), and dropped before the actors: the stored ids go to
the tasks that read the dataset as one sorted array of 16-byte point ids in Ray's object store (each task maps it,
read-only and shared), so a stored row is never encoded and never crosses the object store to an actor."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import ray

from ...records import Key, UpsertResult, id_mark
from ._encode import Batch, Columns

#: A point id (a UUID) as 16 bytes: rows of the sorted array.
_POINT = np.dtype("S16")


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
        wanted = points([id_mark(key) for key in keys])
        if self._ref is None:
            return np.zeros(len(wanted), dtype=bool)
        if self._points is None:  # mapped from the object store, not copied
            self._points = ray.get(self._ref)
        stored = self._points
        at = np.minimum(np.searchsorted(stored, wanted), len(stored) - 1)
        return (stored[at] == wanted) & (wanted != _EMPTY)


_EMPTY = np.zeros((), dtype=_POINT)[()]


def drop_stored(batch: Batch, stored: StoredIds, columns: Columns) -> Batch:
    """A batch without its rows stored before the run (run in tasks before the actors)."""
    keep = ~stored.marks(columns.key(batch, row) for row in range(len(batch[columns.text])))
    return {name: column[keep] for name, column in batch.items()}


class Resume:
    """A resumed run's rows: every row's id in the dataset's order and which were stored before the run (dropped
    before the actors); what the write paths need to number the rows sent and to put the stored ones back."""

    def __init__(self, keys: Sequence[Key | None], stored: np.ndarray, ids: StoredIds) -> None:
        self.keys = keys
        self.stored = stored
        self.ids = ids
        #: The dataset's number of each row sent to the actors (the rows not stored), in order.
        self.sent = np.flatnonzero(~stored)

    @property
    def missing(self) -> int:
        return len(self.sent)

    def number(self, sent: int) -> int:
        """The dataset's number of the ``sent``-th row sent to the actors."""
        return int(self.sent[sent]) if sent < len(self.sent) else len(self.keys) + sent - len(self.sent)

    def stored_keys(self) -> list[Key]:
        return [key for key, done in zip(self.keys, self.stored, strict=True) if done and key is not None]

    def merge(self, written: UpsertResult) -> UpsertResult:
        """The collection's result of the rows sent, with the rows stored before the run put back in their places,
        as skipped."""
        passed = iter(written)
        ids = [key if done else next(passed) for key, done in zip(self.keys, self.stored, strict=True)]
        return UpsertResult(ids, written.written, written.skipped + int(self.stored.sum()))  # type: ignore[arg-type]
