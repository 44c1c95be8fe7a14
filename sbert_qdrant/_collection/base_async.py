"""What every collection does before and after its texts and documents: it is opened (settings checked, the
engine chosen), describes itself, and is created, indexed, optimized, dropped and closed. ``AsyncTextCollection``
(``facade_async.py``) builds on it.

Written once, for asyncio; ``tools/unasync.py`` derives ``base_sync.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from qdrant_client import AsyncQdrantClient, models

from ..encoder import Bm25
from ..layout import PointLayout
from ..protocols import TextEncoder, TokenEncoder
from ..settings import Settings
from ..store import RetryPolicy
from ..store.factory import open_async_store
from ..store.protocol_async import AsyncVectorStore
from ..types import Distance, Quantization
from .bulk_async import resume_and_optimize
from .context_async import AsyncCollectionContext
from .documents_async import AsyncDocuments
from .schema import CollectionConfig
from .texts_async import AsyncTexts
from .vectors import default_batch_size


class AsyncCollectionBase:
    """A collection opened (see ``AsyncTextCollection`` for every argument): its settings, engine and parts."""

    def __init__(
        self,
        collection_name: str,
        encoder: TextEncoder | None = None,
        *,
        location: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: AsyncQdrantClient | None = None,
        store: AsyncVectorStore | None = None,
        vector_name: str = "text",
        text_field: str = "text",
        named_vectors: Mapping[str, TextEncoder | TokenEncoder] | None = None,
        layout: PointLayout | None = None,
        sparse: Bm25 | Literal["bm25"] | None = "bm25",
        distance: Distance = "cosine",
        on_disk: bool = False,
        hnsw: models.HnswConfigDiff | None = None,
        quantization: Quantization | None = None,
        first_stage_dim: int | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        payload_indexes: Mapping[str, models.PayloadSchemaType] | None = None,
        recreate: bool = False,
        retry: RetryPolicy | None = None,
        encode_batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        settings: Settings | None = None,
    ) -> None:
        settings = settings or Settings()
        if encoder is None:
            from ..encoder import load_encoder  # here: a collection given its encoder imports no torch

            encoder = load_encoder(settings)
        config = CollectionConfig.checked(
            collection_name,
            encoder,
            sparse=sparse,
            layout=layout,
            named_vectors=named_vectors,
            vector_name=vector_name,
            distance=distance,
            on_disk=on_disk,
            hnsw=hnsw,
            quantization=quantization,
            first_stage_dim=first_stage_dim,
            shard_number=shard_number,
            replication_factor=replication_factor,
            payload_indexes=payload_indexes,
            encode_batch_size=default_batch_size(encoder) if encode_batch_size is None else encode_batch_size,
            show_progress_bar=show_progress_bar,
            text_field=text_field,
        )
        opened = open_async_store(location, url, api_key, client, settings, retry, store)
        self._ctx = AsyncCollectionContext(config, opened, recreate)
        self._texts = AsyncTexts(self._ctx)
        self._documents = AsyncDocuments(self._ctx)

    @property
    def collection_name(self) -> str:
        return self._ctx.name

    @property
    def encoder(self) -> TextEncoder:
        return self._ctx.config.encoder

    @property
    def layout(self) -> PointLayout:
        """Where a point keeps what: the vector slots (filled: sizes and encoders) and payload fields; once the
        collection has been read or written, also every slot it records beyond those opened with."""
        return self._ctx.config.layout

    @property
    def distance(self) -> str:
        """The distance of the dense vectors (``"cosine"``, ``"dot"``, ``"euclid"``, ``"manhattan"``)."""
        return self._ctx.config.distance

    def __repr__(self) -> str:
        return self._ctx.config.describe(type(self).__name__, self._ctx.store)

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def exists(self) -> bool:
        """Whether the collection exists in the engine."""
        return await self._ctx.store.describe(self.collection_name) is not None

    async def stored_vectors(self) -> dict[str, int]:
        """The stored collection's dense (and multivector) vectors by name, with their sizes, whatever layout this
        instance was opened with ({} when it does not exist yet): what to open a collection of unknown origin with."""
        existing = await self._ctx.store.describe(self.collection_name)
        return {} if existing is None else {name: spec.size for name, spec in sorted(existing.vectors.items())}

    async def list_collections(self) -> list[str]:
        """The names of every collection in this collection's engine (its folder, server or client), sorted."""
        return await self._ctx.store.names()

    async def create(self) -> None:
        """Create the collection now, as the first write would (the encoder's size, BM25, payload indexes), where
        it does not exist; an existing one is checked and left as it is (``recreate=True``: dropped first). For
        writers that must not race to create it."""
        await self._ctx.ensure(create=True)

    async def create_payload_index(self, field_name: str, schema: models.PayloadSchemaType) -> None:
        """Index a payload field so that filters on it stay fast (creates the collection if needed)."""
        await self._ctx.ensure(create=True)
        await self._ctx.store.create_payload_index(self.collection_name, field_name, schema)

    async def optimize(self) -> None:
        """After a load: Edge builds its HNSW index now; a server gets back the background indexing a bulk load
        paused (also one that crashed) and is waited on until green."""
        await resume_and_optimize(self._ctx)

    async def delete_collection(self) -> None:
        """Drop the collection and everything in it."""
        await self._ctx.store.drop(self.collection_name)
        self._ctx.dropped()

    async def close(self) -> None:
        """Release the engine (an Edge folder's lock, a client this collection opened)."""
        await self._ctx.store.close()
