"""What a write of records takes besides the records, as one value the texts' and the documents' writes read; and
the store write of a batch of points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..records import Key, PreparedPoint
from ..store.base import PointVectors
from ..store.calls import StoreWrite
from ..types import OnConflict


@dataclass(frozen=True)
class WriteOptions:
    """The arguments ``upsert_texts`` and ``upsert_documents`` share (documented there), checked by the write."""

    ids: Sequence[Key] | None = None
    payloads: Sequence[Mapping[str, Any] | None] | None = None
    batch_size: int | None = None
    wait: bool = True
    on_conflict: OnConflict = "overwrite"
    show_progress_bar: bool | None = None
    vectors: Sequence[Any] | None = None
    vectors_from: str | None = None
    bulk: bool = False

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> WriteOptions:
        """The options among a write method's arguments (its ``locals()``), by name."""
        return cls(**{f.name: arguments[f.name] for f in fields(cls)})


def points_write(points: Sequence[PreparedPoint], vectors: PointVectors, wait: bool) -> StoreWrite:
    """The store write of prepared points and their vectors."""
    return StoreWrite([p.point_id for p in points], vectors, [p.payload for p in points], wait)
