"""What a write of records takes besides the records, as one value: the texts' and the documents' writes read it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..records import Key
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
