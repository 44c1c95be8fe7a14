"""The one overlapped write of a collection, for texts, documents and precomputed vectors alike: batch k+1 is
checked and encoded while batch k is written; what landed is counted, and a failure says which records are stored.

Written once, for asyncio; ``tools/unasync.py`` derives ``overlapped_sync.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tqdm.auto import tqdm

from .._allocation import gc_paused
from ..records import Key, UpsertResult, WriteLedger
from ..store.base import PointVectors
from .progress import LoggedProgress, progress_bar
from .runtime_async import Writer, run_blocking

B = TypeVar("B")


@dataclass(frozen=True)
class Step:
    """What one batch writes: its records' ids (every one, in input order), the records it writes and those already
    stored (left alone), a blocking ``encode`` of its points (reporting ``progress(done, total)`` as it goes), and
    the ``write`` of those vectors (None: nothing)."""

    ids: list[Key]
    writes: list[Key]
    stored: list[Key]
    encode: Callable[[Callable[[int, int], None]], PointVectors | None]
    write: Callable[[PointVectors | None], Awaitable[None]] | None


@dataclass
class OverlappedWrite(Generic[B]):
    """A write of ``batches`` into ``collection_name``: ``plan`` turns a checked batch into its step (asking the
    store what is stored), ``ensure`` makes the collection exist once the first batch has passed its checks."""

    collection_name: str
    plan: Callable[[B], Awaitable[Step]]
    ensure: Callable[[], Awaitable[None]]
    show_progress: bool = False
    unit: str = "text"
    #: Records the input holds, where known (a list, a counted file): the bar's total and ETA.
    total: int | None = None

    async def run(self, batches: Iterable[B]) -> UpsertResult:
        """Write every batch; ``UpsertResult.written`` counts records written once their write has landed."""
        batches = iter(batches)
        with (
            progress_bar("Upserting", self.unit, self.total, self.show_progress) as bar,
            gc_paused(),  # a write's ~10 objects per point form no cycles (_allocation.py)
        ):
            progress = _Progress(bar)  # shown from the start: the first batch may take a while to check and chunk
            return await self._run(batches, progress)

    async def _run(self, batches: Iterator[B], progress: _Progress) -> UpsertResult:
        """The write itself, moving ``progress``."""
        first = next(batches, None)  # a list input is checked whole here, before anything is written
        result = UpsertResult()
        if first is None:
            return result
        await self.ensure()
        ledger = WriteLedger()
        async with Writer() as writer:
            pending: tuple[Any, list[Key]] | None = None
            try:
                for batch in itertools.chain([first], batches):
                    step = await self.plan(batch)
                    result.extend(step.ids)
                    ledger.add(step.ids)
                    tick = progress.within(len(step.ids))
                    vectors = await run_blocking(step.encode, tick) if step.writes else None
                    if pending is not None:
                        await writer.wait(pending[0])
                        _landed(pending[1], result, ledger)
                        pending = None
                    if step.write is not None:
                        pending = (writer.start(step.write, vectors), step.writes)
                    ledger.stored(step.stored)
                    result.skipped += len(step.ids) - len(step.writes)
                    progress.done(len(step.ids))
                if pending is not None:
                    await writer.wait(pending[0])
                    _landed(pending[1], result, ledger)
            except Exception as exc:
                if pending is not None and await writer.settle(pending[0]):
                    ledger.stored(pending[1])  # the write in flight landed
                raise _partial_write_error(self.collection_name, exc, ledger) from exc
        return result


class _Progress:
    """The one bar of a write, in records: a batch's share moves as its texts are encoded, so that the bar moves
    from the first batch on (a batch of documents is thousands of chunks)."""

    def __init__(self, bar: tqdm | LoggedProgress) -> None:
        self.bar, self.base, self.shown = bar, 0, 0

    def _show(self, position: int) -> None:
        if position > self.shown:
            self.bar.update(position - self.shown)
            self.shown = position

    def within(self, records: int) -> Callable[[int, int], None]:
        """The ``progress(done, total)`` of the next batch's encoding, ``records`` records in all."""
        return lambda done, total: self._show(self.base + records * done // max(total, 1))

    def done(self, records: int) -> None:
        self.base += records
        self._show(self.base)


def _landed(keys: list[Key], result: UpsertResult, ledger: WriteLedger) -> None:
    result.written += len(keys)
    ledger.stored(keys)


def _partial_write_error(name: str, exc: Exception, ledger: WriteLedger) -> Exception:
    """The error to raise when a write stops: the cause itself if nothing was stored yet."""
    if not ledger.any_stored:
        return exc
    return ledger.error(
        f"upsert into {name!r} stopped after storing {ledger.stored_count} records ({type(exc).__name__}: "
        f"{exc}). Re-run the same upsert: ids are deterministic, so stored records are overwritten (or skipped with "
        "on_conflict='skip'), never duplicated."
    )
