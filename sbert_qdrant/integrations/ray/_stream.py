"""The driver's write path: the encoded rows streamed from Ray to this process as records for the collection, with
one progress bar that moves as the actors' batches arrive (the rows' total where it is known without a read)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ray.data
from tqdm.auto import tqdm

from ...errors import PartialWriteError, SbertQdrantError
from ...records import UpsertResult, WriteLedger
from ._encode import ENCODER_COLUMN, Batch, Columns
from ._interrupt import pulled
from ._rows import KEYS_BATCH, record
from ._stored import Resume


def keys(dataset: ray.data.Dataset, columns: Columns) -> Iterator[Any]:
    """Every row's id as the collection will see it, in the dataset's order, read from the id (else text) column."""
    wanted = [columns.text] if columns.id is None else [columns.id]
    selected = dataset.select_columns(wanted)
    selected.context.execution_options.preserve_order = True  # the order of the encoded rows, row for row
    for batch in pulled(selected.iter_batches(batch_size=KEYS_BATCH, batch_format="numpy")):
        for row in range(len(batch[wanted[0]])):
            yield columns.key(batch, row)


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def known_rows(dataset: ray.data.Dataset) -> int | None:
    """The dataset's rows where Ray knows them without reading anything (in-memory data, Parquet metadata), else
    None. No public API tells it without a read: Ray's own ``_meta_count``, where this Ray has it."""
    meta_count = getattr(dataset, "_meta_count", None)
    try:
        return meta_count() if callable(meta_count) else None
    except Exception:  # noqa: BLE001 (a private API that changed: no total shown, nothing else lost)
        return None


class Stream:
    """The encoded rows of a run as records for the collection; with a resume, the rows stored before the run (never
    sent to the actors) are put back in the result, so that it lists every row's id in the dataset's order. The bar
    counts to ``total``, the rows sent (None: not known)."""

    def __init__(
        self,
        encoded: ray.data.Dataset,
        columns: Columns,
        source: ray.data.Dataset,
        resume: Resume | None,
        show_progress: bool,
        unit: str,
        total: int | None,
    ) -> None:
        self._progress = tqdm(total=total, unit=unit, desc="Encoding", disable=not show_progress)
        self._iterator = batches = pulled(encoded.iter_batches(batch_size=None, batch_format="numpy"))
        first = next(batches, None)
        #: The identity of the encoder that made the vectors (None: no rows).
        self.identity = str(first[ENCODER_COLUMN][0]) if first is not None and len(first[ENCODER_COLUMN]) else None
        self._batches: Iterator[Batch] = itertools.chain([first], batches) if first is not None else iter(())
        self._columns = columns
        self._source = source
        self._resume = resume

    def records(self) -> Iterator[dict[str, Any]]:
        sent = 0
        for batch in self._batches:
            rows = len(batch[ENCODER_COLUMN])
            self._progress.update(rows)  # the batch is encoded: it arrived from the actors
            for row in range(rows):
                number = self._resume.number(sent) if self._resume is not None else sent
                yield record(batch, row, number, self._columns, self.identity or "")
                sent += 1

    def write(self, upsert: Callable[[Iterator[dict[str, Any]]], UpsertResult]) -> UpsertResult:
        """The run's result from ``upsert`` of the records; where it stops part-way, its error with every row."""
        try:
            written = upsert(self.records())
            return self._resume.merge(written) if self._resume is not None else written
        except PartialWriteError as exc:
            raise self._complete(exc) from exc.__cause__
        except SbertQdrantError as exc:  # nothing new stored: still a partial run where rows were stored before it
            if self._resume is None or not self._resume.stored.any():
                raise
            partial = PartialWriteError(str(exc), written_ids=[], unwritten_ids=[])
            raise self._complete(partial) from exc
        finally:  # a run stopped part-way stops Ray's execution now, not when (or after Ray's end) it is collected
            self._progress.close()
            self._iterator.close()

    def _complete(self, exc: PartialWriteError) -> PartialWriteError:
        """``exc`` with every row of the dataset in the dataset's order: the rows stored before the run among the
        written ones, the rows never read (the run stopped first) among the unwritten ones."""
        ledger = WriteLedger()
        if self._resume is not None:
            ledger.add(self._resume.keys)
            ledger.stored(self._resume.stored_keys())
        else:
            ledger.add(keys(self._source, self._columns))
        ledger.stored(exc.written_ids)
        return ledger.error(str(exc))
