"""Writes from the Ray workers, in parallel: a ``Datasink`` whose tasks each open the collection (through a factory,
e.g. on a Qdrant server) and write their rows through its own pipeline (ids, payloads, checks, batches under the
server's request limit, the retry policy of sbert-qdrant's server store), by the rule of the driver's path: rows
stored before the run are left out and counted as skipped, errors number the dataset's rows, ids come back in the
dataset's order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from ray.data import Datasink
from ray.data.block import Block, BlockAccessor
from ray.data.datasource.datasink import WriteResult

from ...collection import TextCollection
from ...errors import InvalidInputError, PartialWriteError, SbertQdrantError
from ...protocols import TextEncoder
from ...records import Key, UpsertResult, WriteLedger
from ...settings import Settings
from ...types import OnConflict
from ._encode import ENCODER_COLUMN, Batch, Columns
from ._rows import encoded_row, record, write_records
from ._stored import stored_mark


def open_on_server(name: str, encoder: TextEncoder, url: str) -> TextCollection:
    """The collection ``name`` on the server at ``url``, opened in a worker (API key: its ``QDRANT_API_KEY``)."""
    return TextCollection(name, encoder, url=url, settings=Settings())


@dataclass
class _Stop:
    """Where a write task stopped: the first row (within the task) it did not store, the cause, and the row itself
    when the row was the cause (so that the driver names it by its number in the dataset)."""

    row: int
    cause: SbertQdrantError
    bad_row: Batch | None = None
    identity: str = ""


@dataclass
class _Part:
    """What one write task did: every row's id in order, which rows are stored (written now or before), counts."""

    task: int
    name: str
    keys: list[Key | None] = field(default_factory=list)
    done: list[bool] = field(default_factory=list)
    written: int = 0
    skipped: int = 0
    stop: _Stop | None = None


class QdrantDatasink(Datasink[_Part]):
    """``dataset.write_datasink(QdrantDatasink(...))`` for an encoded dataset (``EncodeTexts``/``EncodeDocuments``):
    every write task opens a collection with ``open_collection`` (a picklable callable, run in the worker, e.g.
    ``functools.partial(TextCollection, name, encoder, url=url)``) and writes its rows; ``result`` holds every row's id
    in the dataset's order and the counts. A task that meets a bad row stops there; the others write theirs, then a
    ``PartialWriteError`` names the first bad row by its number in the dataset and lists what was and was not
    stored."""

    def __init__(
        self,
        open_collection: Callable[[], TextCollection],
        columns: Columns,
        on_conflict: OnConflict,
        documents: bool,
        chunking: dict[str, Any] | None = None,
    ) -> None:
        self.open_collection = open_collection
        self.columns = columns
        self.on_conflict = on_conflict
        self.documents = documents
        self.chunking = chunking or {}
        self.result = UpsertResult()

    def write(self, blocks: Iterable[Block], ctx: Any) -> _Part:
        with self.open_collection() as collection:
            part = _Part(ctx.task_idx, collection.collection_name)
            for block in blocks:
                batch = cast(Batch, BlockAccessor.for_block(block).to_numpy())
                if part.stop is None:
                    part.stop = self._write_batch(collection, batch, part)
                else:  # stopped: the rest of the task's rows are only listed (unwritten, and counted for numbering)
                    self._list(batch, part)
        return part

    def _list(self, batch: Batch, part: _Part) -> int:
        """Add a batch's rows to the task's list, not stored yet; where they start in the task."""
        start, rows = len(part.keys), len(batch[self.columns.text])
        part.keys.extend(self.columns.key(batch, row) for row in range(rows))
        part.done.extend([False] * rows)
        return start

    def _write_batch(self, collection: TextCollection, batch: Batch, part: _Part) -> _Stop | None:
        start, rows = self._list(batch, part), len(batch[self.columns.text])
        if not rows:
            return None
        identity = str(batch[ENCODER_COLUMN][0])
        records, places = [], []
        for row in range(rows):
            try:
                found = encoded_row(batch, row, start + row, self.columns, identity)
            except InvalidInputError as exc:  # numbered again by the driver, which knows the rows before this task
                bad_row = {name: column[row : row + 1] for name, column in batch.items()}
                return _Stop(start + row, exc, bad_row, identity)
            if found is None:
                part.done[start + row] = True
                part.skipped += 1
            else:
                records.append(found)
                places.append(start + row)
        if not records:
            return None
        try:
            result = write_records(
                collection, records, identity, on_conflict=self.on_conflict, documents=self.documents, **self.chunking
            )
        except PartialWriteError as exc:
            stored = set(map(stored_mark, exc.written_ids))
            for place in places:
                part.done[place] = stored_mark(part.keys[place]) in stored
            first_unstored = next((place for place in places if not part.done[place]), start)
            return _Stop(first_unstored, _crossing(exc.__cause__, exc))
        except SbertQdrantError as exc:
            return _Stop(start, _crossing(exc, exc))
        for place, key in zip(places, result, strict=True):
            part.keys[place], part.done[place] = key, True
        part.written += result.written
        part.skipped += result.skipped
        return None

    def on_write_complete(self, write_result: WriteResult[_Part]) -> None:
        """The parts in the dataset's order (the write tasks' order) as one result, or the error of the first stop."""
        keys: list[Key | None] = []
        done: list[bool] = []
        first = None
        for part in sorted(write_result.write_returns, key=lambda p: p.task):
            if part.stop is not None and first is None:
                first = (len(keys) + part.stop.row, part.stop, part.name)
            keys.extend(part.keys)
            done.extend(part.done)
            self.result.written += part.written
            self.result.skipped += part.skipped
        names = [part.name for part in write_result.write_returns]
        repeat = self._first_repeat(keys, names[0] if names else "")
        if repeat is not None and (first is None or repeat[0] < first[0]):
            first = repeat
        if first is not None:
            raise self._error(*first, keys, done)
        self.result.extend(key for key in keys if key is not None)  # None only where a task stopped

    def _first_repeat(self, keys: list[Key | None], name: str) -> tuple[int, _Stop, str] | None:
        """The first row whose explicit id an earlier row of the dataset has (each write task wrote its own, so
        the point holds the later row): the stop it makes, as in ``on_write_complete``."""
        if self.columns.id is None:  # text-derived ids: a repeated text is the same record
            return None
        seen: dict[str, int] = {}
        for number, key in enumerate(keys):
            mark = stored_mark(key)
            if mark is None:
                continue
            earlier = seen.setdefault(mark, number)
            if earlier != number:
                cause = InvalidInputError(
                    f"row {number} repeats row {earlier} ({self.columns.id}={key!r}, the same point; written by "
                    "different write tasks, the point holds one of them): ids must be unique in one run. Fix the "
                    "dataset and re-run."
                )
                return number, _Stop(0, cause), name
        return None

    def _error(self, number: int, stop: _Stop, name: str, keys: list[Key | None], done: list[bool]) -> Exception:
        cause: SbertQdrantError = stop.cause
        if stop.bad_row is not None:
            try:  # the same check again, the row named by its number in the dataset
                record(stop.bad_row, 0, number, self.columns, stop.identity)
            except InvalidInputError as exc:
                cause = exc
        ledger = WriteLedger()
        ledger.add(keys)
        written = [key for key, stored in zip(keys, done, strict=True) if stored]
        ledger.stored(written)
        if not ledger.any_stored:
            return cause
        error = ledger.error(
            f"upsert into {name!r} stopped at row {number} after storing {len(written)} records "
            f"({type(cause).__name__}: {cause}). Re-run with on_conflict='skip' to write the rest."
        )
        error.__cause__ = cause
        return error


def _crossing(cause: BaseException | None, error: SbertQdrantError) -> SbertQdrantError:
    """The error a worker hands to the driver: ``cause`` where it is this package's own and crosses intact (pickled
    by its message alone), else ``error``'s message."""
    if isinstance(cause, SbertQdrantError) and not isinstance(cause, PartialWriteError):
        return cause
    return SbertQdrantError(str(error))
