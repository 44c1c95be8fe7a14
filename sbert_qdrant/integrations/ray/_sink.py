"""Writes from the Ray workers, in parallel: a ``Datasink`` whose tasks each open the collection (through a factory,
e.g. on a Qdrant server, from plain values: ``WriteTarget``, no model) and write their rows through its own pipeline
(ids, payloads, checks, batches under the server's request limit, the retry policy of sbert-qdrant's server store), by
the rule of the driver's path: rows stored before the run (dropped before the actors) are put back as skipped, errors
number the dataset's rows, ids come back in the dataset's order. The write tasks ask no CPU (``WRITE_CPUS``): actors
holding every CPU cannot starve them, and the actors' output, which only the writes drain, cannot fill the object
store for good.
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
from ...layout import PointLayout
from ...records import Key, UpsertResult, WriteLedger, id_mark
from ...settings import Settings
from ...types import OnConflict
from ._encode import ENCODER_COLUMN, Batch, Columns
from ._own import Written
from ._rows import first_repeat, record, write_records
from ._stored import Resume

#: CPUs a write task asks of Ray: none (writing waits on the server; an encoding actor pool may hold every CPU).
WRITE_CPUS = 0


@dataclass(frozen=True)
class WriteTarget:
    """The collection a write task opens, as plain values: its name, the server's address, its layout and its
    encoder as ``Written`` (identity, size; no model: one does not pickle at int8, and weighs ~90 MB at fp32)."""

    name: str
    url: str
    layout: PointLayout
    encoder: Written


def open_on_server(target: WriteTarget) -> TextCollection:
    """The collection ``target`` names on its server, opened in a worker (API key: its ``QDRANT_API_KEY``)."""
    return TextCollection(target.name, target.encoder, url=target.url, layout=target.layout, settings=Settings())


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
    ``functools.partial(open_on_server, target)``) and writes its rows; ``result`` holds every row's id
    in the dataset's order and the counts (with ``resume``, the rows stored before the run, which were not sent, put
    back as skipped). A task that meets a bad row stops there; the others write theirs, then a ``PartialWriteError``
    names the first bad row by its number in the dataset and lists what was and was not stored. Run it with
    ``write_datasink(sink, ray_remote_args={"num_cpus": WRITE_CPUS})`` where actors may hold every CPU."""

    def __init__(
        self,
        open_collection: Callable[[], TextCollection],
        columns: Columns,
        on_conflict: OnConflict,
        documents: bool,
        chunking: dict[str, Any] | None = None,
        resume: Resume | None = None,
    ) -> None:
        self.open_collection = open_collection
        self.columns = columns
        self.on_conflict = on_conflict
        self.documents = documents
        self.chunking = chunking or {}
        self.resume = resume
        self.result = UpsertResult()

    def write(self, blocks: Iterable[Block], ctx: Any) -> _Part:
        with self.open_collection() as collection:
            part = _Part(ctx.task_idx, collection.collection_name)
            for block in blocks:
                accessor = BlockAccessor.for_block(block)
                if not accessor.num_rows():  # a block whose rows were all stored before the run: no columns either
                    continue
                batch = cast(Batch, accessor.to_numpy())
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
        records = []
        for row in range(rows):
            try:
                records.append(record(batch, row, start + row, self.columns, identity))
            except InvalidInputError as exc:  # numbered again by the driver, which knows the rows before this task
                bad_row = {name: column[row : row + 1] for name, column in batch.items()}
                return _Stop(start + row, exc, bad_row, identity)
        places = range(start, start + rows)
        try:
            result = write_records(
                collection, records, identity, on_conflict=self.on_conflict, documents=self.documents, **self.chunking
            )
        except PartialWriteError as exc:
            stored = set(map(id_mark, exc.written_ids))
            for place in places:
                part.done[place] = id_mark(part.keys[place]) in stored
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
        written = skipped = 0
        for part in sorted(write_result.write_returns, key=lambda p: p.task):
            if part.stop is not None and first is None:
                first = (len(keys) + part.stop.row, part.stop, part.name)
            keys.extend(part.keys)
            done.extend(part.done)
            written, skipped = written + part.written, skipped + part.skipped
        names = [part.name for part in write_result.write_returns]
        # Each write task wrote its own rows: a repeat in another task is seen here only, after both wrote.
        repeat = first_repeat(keys, self.columns)
        if repeat is not None and (first is None or repeat[0] < first[0]):
            both = InvalidInputError(f"{repeat[1]} Both rows were written, by two write tasks: the point holds one.")
            first = (repeat[0], _Stop(0, both), names[0])
        if first is not None:
            raise self._error(*first, keys, done)
        sent = UpsertResult((key for key in keys if key is not None), written, skipped)  # None only where it stopped
        self.result = self.resume.merge(sent) if self.resume is not None else sent

    def _error(self, sent: int, stop: _Stop, name: str, keys: list[Key | None], done: list[bool]) -> Exception:
        number = self.resume.number(sent) if self.resume is not None else sent
        cause: SbertQdrantError = stop.cause
        if stop.bad_row is not None:
            try:  # the same check again, the row named by its number in the dataset
                record(stop.bad_row, 0, number, self.columns, stop.identity)
            except InvalidInputError as exc:
                cause = exc
        ledger = WriteLedger()
        written = [key for key, stored in zip(keys, done, strict=True) if stored]
        if self.resume is not None:
            ledger.add(self.resume.keys)
            ledger.stored(self.resume.stored_keys())
        else:
            ledger.add(keys)
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
