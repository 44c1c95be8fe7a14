"""The rows of an encoded dataset as the records a collection writes (used by the driver and by the datasink's
write tasks alike)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...collection import TextCollection
from ...errors import InvalidInputError
from ...records import Deduplicator, Key, UpsertResult, check_text
from ...types import OnConflict
from ._encode import ENCODER_COLUMN, VECTOR_COLUMN, Batch, Columns

#: Rows read (or looked up) at a time when only their ids are wanted.
KEYS_BATCH = 1024


def record(batch: Batch, row: int, number: int, columns: Columns, identity: str) -> dict[str, Any]:
    """Row ``row`` of an encoded batch (``number`` in the run) as a record, its text checked (errors name it)."""
    key = columns.key(batch, row) if columns.id is not None else None
    where = f"row {number}" + (f" ({columns.id}={key!r})" if columns.id is not None else "")
    if columns.id is not None and key is None:
        raise InvalidInputError(f"{where} has no id in column {columns.id!r}; give every row an id.")
    text = check_text(batch[columns.text][row], f"{where}: column {columns.text!r}", "drop or fix that row")
    if str(batch[ENCODER_COLUMN][row]) != identity:
        raise InvalidInputError(
            f"{where} was encoded by {batch[ENCODER_COLUMN][row]}, the rows before it by {identity}: every actor "
            "must load the same model."
        )
    vector = np.asarray(batch[VECTOR_COLUMN][row], dtype=np.float32)
    return {"text": text, "id": key, "payload": columns.payload_of(batch, row), "vector": vector}


def first_repeat(keys: Iterable[Key | None], columns: Columns) -> tuple[int, InvalidInputError] | None:
    """The first row whose explicit id an earlier row has, and its error: the records layer's rule and message
    (``Deduplicator``, as ``upsert_texts`` refuses a repeated id), the rows named by their number in the dataset.
    Text-derived ids are the text's: a repeated text is the same record, written once."""
    if columns.id is None:
        return None
    rows = Deduplicator(name="row {}".format)
    for number, key in enumerate(keys):
        try:
            rows.keep(number, key)
        except InvalidInputError as exc:
            advice = "rows counted from 0 in the dataset's order; give one of the two another id, or drop it"
            return number, InvalidInputError(f"{exc} ({advice}.)")
    return None


def write_records(
    collection: TextCollection,
    records: Iterable[dict[str, Any]],
    identity: str | None,
    *,
    on_conflict: OnConflict,
    documents: bool,
    bulk: bool = False,
    batch_size: int | None = None,
    **chunking: Any,
) -> UpsertResult:
    """The one collection call of both write paths: encoded records (``identity`` made their vectors) stored as
    texts, or as documents cut by ``chunking``; the caller shows the progress."""
    if documents:
        return collection.upsert_documents(
            records, on_conflict=on_conflict, show_progress_bar=False, vectors_from=identity, bulk=bulk, **chunking
        )
    return collection.upsert_texts(  # batch_size None: the engine's default
        records,
        batch_size=batch_size,
        on_conflict=on_conflict,
        show_progress_bar=False,
        vectors_from=identity,
        bulk=bulk,
    )
