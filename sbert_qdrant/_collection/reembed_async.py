"""Moving a collection to another model: every point copied into a new collection, re-encoded, and an alias that
moves readers over atomically.

Written once, for asyncio; ``tools/unasync.py`` derives ``reembed_sync.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from ..documents import encoded_text
from ..errors import InvalidArgumentError
from ..protocols import TextEncoder, TokenEncoder
from ..records import PreparedPoint, UpsertResult
from ..store.base import StoredRecord
from ..store.calls import Scan
from ..types import OnConflict
from .bulk_async import write
from .context_async import AsyncCollectionContext
from .names import check_name
from .overlapped_async import Step
from .schema import CollectionConfig
from .texts_async import plan_points
from .vectors import bounded_batch, show_progress


async def reembed_into(
    source: AsyncCollectionContext,
    collection_name: str,
    encoder: TextEncoder,
    batch_size: int | None,
    on_conflict: OnConflict,
    bulk: bool,
    show_progress_bar: bool | None,
    named_vectors: Mapping[str, TextEncoder | TokenEncoder] | None = None,
) -> UpsertResult:
    """Copy every point of ``source`` into ``collection_name`` on the same engine, encoded by ``encoder`` and the
    encoders of ``named_vectors`` (``AsyncTextCollection.reembed``)."""
    config = source.config
    config.require_writable()
    batch = config.check_write(batch_size, on_conflict, source.store.upsert_batch)
    if collection_name == source.name:
        raise InvalidArgumentError(
            f"collection_name={collection_name!r} is this collection; re-embed into a new one, then move readers."
        )
    await source.ensure(create=False)
    target = AsyncCollectionContext(
        CollectionConfig.checked(
            collection_name,
            encoder,
            sparse=source.bm25,  # the BM25 settings the source was indexed with (None: dense only)
            named_vectors=named_vectors,
            vector_name=config.vector_name,
            distance=config.distance,
            on_disk=config.on_disk,
            hnsw=config.hnsw,
            quantization=config.quantization,
            first_stage_dim=config.first_stage_dim,
            shard_number=config.shard_number,
            replication_factor=config.replication_factor,
            payload_indexes=config.payload_indexes,
            encode_batch_size=config.encode_batch_size,
            show_progress_bar=config.show_progress_bar,
        ),
        source.store,
    )
    batch = bounded_batch(target.config, batch)
    records: list[StoredRecord] = []
    async for page in source.store.scroll(source.name, Scan(config.vector_name)):
        records.extend(page)
    return await write(
        target,
        (records[i : i + batch] for i in range(0, len(records), batch)),
        partial(_plan_copies, target, on_conflict=on_conflict, wait=not bulk),
        bulk=bulk,
        show_progress=show_progress(config, show_progress_bar),
        documents=source.documents,
        unit="point",
    )


async def _plan_copies(
    target: AsyncCollectionContext, batch: list[StoredRecord], on_conflict: OnConflict, wait: bool
) -> Step:
    """The write of stored points of another collection, re-encoded."""
    points = [PreparedPoint(r.id, r.id, encoded_text(r.payload or {}), dict(r.payload or {})) for r in batch]
    return await plan_points(target, [r.id for r in batch], points, on_conflict, wait)


async def point_alias(context: AsyncCollectionContext, alias: str) -> None:
    """Make ``alias`` name the collection (``AsyncTextCollection.set_alias``)."""
    check_name(alias, "alias", other_than=context.name)
    await context.ensure(create=False)
    await context.store.set_alias(alias, context.name)
