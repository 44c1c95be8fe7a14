"""A collection's write from start to end, and the bulk load's part in it: the engine's background indexing paused
before the first point (the paused threshold recorded in the collection, so that ``optimize`` restores it even after
a crash), then one wait for every write and the index built once.

Written once, for asyncio; ``tools/unasync.py`` derives ``bulk_sync.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TypeVar

from qdrant_client import models

from ..protocols import truncated_tally
from ..records import UpsertResult
from .context_async import AsyncCollectionContext
from .overlapped_async import OverlappedWrite, Step
from .schema import paused_indexing, with_paused_indexing

B = TypeVar("B")
logger = logging.getLogger("sbert_qdrant.collection")

#: Matches no point: the filter of the barrier write that ends a bulk load.
_NOTHING = models.Filter(must=[models.HasIdCondition(has_id=["00000000-0000-0000-0000-000000000000"])])


async def write(
    context: AsyncCollectionContext,
    batches: Iterable[B],
    plan: Callable[[B], Awaitable[Step]],
    *,
    bulk: bool,
    show_progress: bool,
    documents: bool = False,
    unit: str = "text",
    total: int | None = None,
) -> UpsertResult:
    """Write ``batches`` overlapped (``plan`` as in ``OverlappedWrite``; ``total`` records, where known); the
    collection is created (and marked as holding ``documents``) once the first batch has passed its checks."""
    start = partial(_start, context, bulk, documents)
    overlapped = OverlappedWrite(context.name, plan, start, show_progress, unit, total)
    tally = [0]  # texts the encoder cut to its token limit, over every encode call of this write
    token = truncated_tally.set(tally)
    try:
        result = await overlapped.run(batches)
    finally:
        truncated_tally.reset(token)
        _warn_truncated(context, tally[0], unit)
    if bulk:
        # A point operation with wait=True returns once every earlier write of each shard's queue is applied.
        await context.store.delete(context.name, None, _NOTHING, True)
        await resume_and_optimize(context)
    return result


def _warn_truncated(context: AsyncCollectionContext, cut: int, unit: str) -> None:
    """One warning for a whole write, however many encode calls it took."""
    if cut:
        limit = getattr(context.config.encoder, "max_seq_length", None)
        fix = "; store long texts with upsert_documents, which cuts them into chunks" if unit == "text" else ""
        logger.warning(
            "%d %s of this write to collection %r were longer than the encoder's token limit (max_seq_length=%s) "
            "and were truncated%s.",
            cut,
            "chunks" if unit == "document" else "texts",
            context.name,
            limit,
            fix,
        )


async def _start(context: AsyncCollectionContext, bulk: bool, documents: bool) -> None:
    await context.ensure_writable(documents)
    threshold = await context.store.indexing_threshold(context.name) if bulk else None
    if threshold is None:
        return  # not a bulk load, or an engine without background indexing
    current = await context.store.metadata(context.name)
    if paused_indexing(current) is None and threshold != 0:
        await context.store.update_metadata(context.name, with_paused_indexing(current, threshold))
    await context.store.set_indexing_threshold(context.name, 0)


async def resume_and_optimize(context: AsyncCollectionContext) -> None:
    """Restore the background indexing a bulk load paused (also one that crashed), then build the index."""
    await context.ensure(create=False)
    current = await context.store.metadata(context.name)
    paused = paused_indexing(current)
    if paused is not None:
        await context.store.set_indexing_threshold(context.name, paused)
        await context.store.update_metadata(context.name, with_paused_indexing(current, None))
    await context.store.optimize(context.name)
