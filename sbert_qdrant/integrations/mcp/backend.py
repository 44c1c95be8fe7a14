"""What the tools share: the engine, the encoder (loaded once, in the background or on first use) and one open
collection per name, each opened in its own layout (ours, or mcp-server-qdrant's, or the one the settings name).
A collection in mcp-server-qdrant's layout is written here the way it writes it (``anchor.py``).

The encoder, the collections and qdrant-client are imported on first use (the model's in its loading thread), so
that the server answers ``initialize`` and ``tools/list`` without waiting for torch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import (
    CollectionMismatchError,
    InvalidArgumentError,
    InvalidInputError,
    StoreInUseError,
)
from ...records import KEY_KEY, TEXT_KEY, Key, check_payload, point_id, text_id
from .anchor import ANCHOR_METADATA_FIELD, ANCHOR_TEXT_FIELD, Layout, anchor_vector_name
from .settings import McpSettings

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient

    from ...aio import AsyncTextCollection
    from ...encoder import CrossEncoder
    from ...protocols import TextEncoder
    from ...store import AsyncVectorStore

#: What an agent is told when another process holds the store.
SHARE = (
    "an embedded store has one user at a time. Stop the other server, or run one shared server for every agent: "
    "`sbert-qdrant mcp --transport streamable-http` (the same environment) and point each agent at "
    "http://127.0.0.1:8000/mcp (docs/mcp.md, 'Several agents, one store')."
)


class _Once:
    """A value made once in a worker thread, on first need (or earlier, by ``start``); a failure is kept and raised
    to every caller, so a missing model is reported by each tool call instead of crashing the server."""

    def __init__(self, make: Callable[[], Any], given: Any = None) -> None:
        self._make = make
        self._value = given
        self._task: asyncio.Future[Any] | None = None

    def _loading(self) -> asyncio.Future[Any]:
        if self._task is None:
            self._task = asyncio.ensure_future(asyncio.to_thread(self._make))
        return self._task

    def start(self) -> None:
        if self._value is None:
            self._loading()

    @property
    def ready(self) -> bool:
        return self._value is not None

    async def get(self) -> Any:
        if self._value is None:
            self._value = await asyncio.shield(self._loading())
        return self._value


def encoding_workers(threads: int | None) -> ThreadPoolExecutor:
    """The worker threads ``asyncio.to_thread`` runs in (the encoder's loading and encoding among them), each with
    ``threads`` torch threads: a query encoded by torch's full team in a worker contends with the threads of
    qdrant-client's local mode, ~20x slower (benchmarks/mcp_startup.py)."""
    return ThreadPoolExecutor(thread_name_prefix="sbert-qdrant-mcp", initializer=_torch_threads, initargs=(threads,))


def _torch_threads(threads: int | None) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


class Backend:
    """The engine named by the settings (``QDRANT_LOCAL_PATH``: qdrant-client local mode on disk; ``QDRANT_URL``: a
    server, or ``:memory:``; else Qdrant Edge under ``SBERT_QDRANT_LOCATION``) and the collections opened on it."""

    def __init__(
        self, settings: McpSettings, encoder: TextEncoder | None = None, cross_encoder: CrossEncoder | None = None
    ) -> None:
        self.settings = settings
        self._encoder = _Once(self._load_encoder, encoder)
        self._cross = _Once(self._load_cross_encoder, cross_encoder)
        self._client: AsyncQdrantClient | None = None
        self._collections: dict[str, AsyncTextCollection] = {}
        #: Each open collection's engine (its own: closing the collection closes it) and layout.
        self._stores: dict[str, AsyncVectorStore] = {}
        self._layouts: dict[str, Layout] = {}
        self._opening = asyncio.Lock()

    @property
    def model_loaded(self) -> bool:
        return self._encoder.ready

    def start_loading(self) -> None:
        """Load the model in the background (the server answers meanwhile)."""
        self._encoder.start()

    def _load_encoder(self) -> TextEncoder:
        from ...encoder import load_encoder

        return load_encoder(self.settings)

    def _load_cross_encoder(self) -> CrossEncoder:
        from ...encoder import CrossEncoder

        name = self.settings.rerank_model
        if name is None:
            raise InvalidArgumentError(
                "rerank=true needs a cross-encoder: set SBERT_QDRANT_RERANK_MODEL to a cross-encoder folder or hub id "
                "in the server's environment, or search without rerank."
            )
        return CrossEncoder.load(name, device=self.settings.device, precision=self.settings.precision)

    async def check_length(self, text: str, what: str, fix: str) -> None:
        """Refuse a text longer than the model reads (it would be cut silently), naming its length and the fix."""
        from ...protocols import DocumentEncoder

        encoder = await self._encoder.get()
        if isinstance(encoder, DocumentEncoder):
            tokens, limit = len(encoder.token_spans(text)), encoder.document_token_limit
            if tokens > limit:
                raise InvalidInputError(f"{what} is {tokens} tokens long and the model reads {limit}; {fix}.")

    async def cross_encoder(self) -> CrossEncoder:
        cross: CrossEncoder = await self._cross.get()
        return cross

    def _qdrant_client(self) -> AsyncQdrantClient | None:
        """The qdrant-client engine, when the settings name one (None: Qdrant Edge)."""
        from qdrant_client import AsyncQdrantClient

        settings = self.settings
        if self._client is None and settings.local_path:
            try:
                self._client = AsyncQdrantClient(path=settings.local_path)
            except RuntimeError as exc:
                if "already accessed" not in str(exc):
                    raise
                raise StoreInUseError(self.held()) from exc
        elif self._client is None and settings.qdrant_url == ":memory:":
            self._client = AsyncQdrantClient(location=":memory:")
        elif self._client is None and settings.qdrant_url:
            key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
            self._client = AsyncQdrantClient(url=settings.qdrant_url, api_key=key, timeout=int(settings.timeout))
        return self._client

    async def collection_names(self) -> list[str]:
        client = self._qdrant_client()
        if client is not None:
            return sorted(c.name for c in (await client.get_collections()).collections)
        from ...store import EdgeStore

        location = Path(self.settings.location).expanduser()
        if not location.is_dir():
            return []
        edge = EdgeStore(location)
        return sorted(p.name for p in location.iterdir() if p.is_dir() and edge.describe(p.name) is not None)

    async def collection(self, name: str, *, write: bool = False) -> tuple[AsyncTextCollection, Layout]:
        """The collection ``name``, opened once, and its layout; ``write``: it must be writable here (ours, or
        mcp-server-qdrant's)."""
        from ...aio import AsyncTextCollection
        from ...store.factory import open_async_store

        async with self._opening:
            opened = self._collections.get(name)
            if opened is None:
                encoder: TextEncoder = await self._encoder.get()
                client = self._qdrant_client()
                store = (
                    open_async_store(client=client, settings=self.settings)
                    if client is not None
                    else open_async_store(location=self.settings.location, settings=self.settings)
                )
                try:
                    layout = await self._layout(name, store)
                except BaseException:
                    await store.close()
                    raise
                indexes = {layout.key(f.name): f.index_schema() for f in self.settings.filterable_fields}
                opened = AsyncTextCollection(
                    name,
                    encoder,
                    store=store,
                    vector_name=layout.vector_name,
                    text_field=layout.text_field,
                    payload_indexes=indexes or None,
                    settings=self.settings,
                )
                if indexes and not self.settings.read_only and await opened.exists():
                    for key, schema in indexes.items():  # as mcp-server-qdrant indexes them (it does so on create)
                        await opened.create_payload_index(key, schema)
                self._collections[name], self._stores[name], self._layouts[name] = opened, store, layout
        layout = self._layouts[name]
        if write and not layout.anchor:
            opened.layout.check_writable(name)
        return opened, layout

    async def _layout(self, name: str, store: AsyncVectorStore) -> Layout:
        """The settings' layout, else mcp-server-qdrant's where it wrote the collection (its ``fast-<model>``
        vector, refused when that is another model's), else ours."""
        from ...encoder import DEFAULT_MODEL

        settings = self.settings
        if settings.vector_name is not None or settings.text_field is not None:
            return Layout(settings.vector_name or "text", settings.text_field or TEXT_KEY)
        existing = await store.describe(name)
        if existing is None or "text" in existing.vectors:
            return Layout("text")
        model = settings.model or DEFAULT_MODEL
        wanted = anchor_vector_name(model)
        if wanted in existing.vectors:
            return Layout(wanted, ANCHOR_TEXT_FIELD, ANCHOR_METADATA_FIELD)
        theirs = sorted(v for v in existing.vectors if v.startswith("fast-"))
        if theirs:
            raise CollectionMismatchError(
                f"collection {name!r} was written by mcp-server-qdrant with the model {theirs[0].removeprefix('fast-')}"
                f" (its vector {theirs[0]!r}), and this server encodes with {model} (vector {wanted!r}): their "
                "vectors are not comparable. Start this server with EMBEDDING_MODEL set to the model that wrote the "
                "collection, or use another collection."
            )
        return Layout("text")

    async def store_anchor(self, name: str, text: str, metadata: dict[str, Any] | None, key: Key | None) -> Key:
        """Store a note in mcp-server-qdrant's layout: the text under ``document``, the metadata under ``metadata``.
        The id is the caller's, else that of a point already holding this very text (its id left alone), else the
        one derived from the text: stored twice, one point."""
        import numpy as np
        from qdrant_client import models

        from ...store.base import PointVectors

        checked = check_payload({ANCHOR_METADATA_FIELD: metadata}, "metadata")
        store, layout = self._stores[name], self._layouts[name]
        payload: dict[str, Any] = {ANCHOR_TEXT_FIELD: text, **checked}
        if key is not None:
            target: Key = key
            payload[KEY_KEY] = key
        else:
            same = models.FieldCondition(key=ANCHOR_TEXT_FIELD, match=models.MatchValue(value=text))
            target = text_id(text)
            async for page in store.scroll(name, layout.vector_name, False, 1, models.Filter(must=[same])):
                target = page[0].id if page else target
                break
        encoder: TextEncoder = await self._encoder.get()
        vectors = await asyncio.to_thread(encoder.encode_document, [text])
        dense = PointVectors({layout.vector_name: np.asarray(vectors, dtype=np.float32)})
        await store.upsert(name, [point_id(target)], dense, [payload], True)
        return target

    async def delete_anchor(self, name: str, keys: list[Key]) -> int:
        """Delete points of a collection in mcp-server-qdrant's layout by id; how many existed."""
        store, layout = self._stores[name], self._layouts[name]
        points = list(dict.fromkeys(point_id(k) for k in keys))
        existed = len(await store.retrieve(name, layout.vector_name, points, False))
        await store.delete(name, points, None, True)
        return existed

    def held(self) -> str:
        """What an agent is told when another process holds the store."""
        where = (
            f"the local store {self.settings.local_path} (QDRANT_LOCAL_PATH)"
            if self.settings.local_path
            else f"the store {Path(self.settings.location).expanduser()}"
        )
        return f"{where} is open in another process; {SHARE}"

    async def close(self) -> None:
        for collection in self._collections.values():
            await collection.close()
        self._collections.clear()
        self._stores.clear()
        self._layouts.clear()
        if self._client is not None:
            await self._client.close()
            self._client = None
