"""What the tools share: the engine, the encoder (loaded once, in the background or on first use) and one open
collection per name, each opened in its own layout (ours, or mcp-server-qdrant's, or the one the settings name).

The encoder, the collections and qdrant-client are imported on first use (the model's in its loading thread), so
that the server answers ``initialize`` and ``tools/list`` without waiting for torch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import CollectionNotFoundError, InvalidArgumentError, InvalidInputError
from ...records import TEXT_KEY, check_writable
from .settings import McpSettings

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient

    from ...aio import AsyncTextCollection
    from ...encoder import CrossEncoder
    from ...protocols import TextEncoder

#: mcp-server-qdrant's payload field of the stored text.
ANCHOR_TEXT_FIELD = "document"


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
        #: The payload field of each open collection's text (another tool's: read-only).
        self._text_fields: dict[str, str] = {}
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
            self._client = AsyncQdrantClient(path=settings.local_path)
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

    async def collection(self, name: str, *, existing: bool = False, write: bool = False) -> AsyncTextCollection:
        """The collection ``name``, opened once; ``existing``: it must exist (reads, deletes); ``write``: it must be
        ours (another tool's collection is read-only, deletes included)."""
        from ...aio import AsyncTextCollection

        async with self._opening:
            opened = self._collections.get(name)
            if opened is None:
                encoder: TextEncoder = await self._encoder.get()
                vector_name, text_field = await self._layout(name)
                client = self._qdrant_client()
                engine: dict[str, Any] = (
                    {"client": client} if client is not None else {"location": self.settings.location}
                )
                opened = AsyncTextCollection(
                    name, encoder, vector_name=vector_name, text_field=text_field, settings=self.settings, **engine
                )
                self._collections[name] = opened
                self._text_fields[name] = text_field
        if write:
            check_writable(name, self._text_fields[name])
        if existing and not await opened.exists():
            listing = "" if self.settings.collection_name else ", qdrant-list-collections lists the existing ones"
            raise CollectionNotFoundError(f"collection {name!r} does not exist; qdrant-store creates it{listing}.")
        return opened

    async def _layout(self, name: str) -> tuple[str, str]:
        """(vector name, text field) of the collection: the settings', else mcp-server-qdrant's where the collection
        was written by it (its ``fast-<model>`` vector, the text under ``document``), else ours."""
        from ...encoder import DEFAULT_MODEL

        settings = self.settings
        vector_name, text_field = settings.vector_name, settings.text_field
        anchor_name = "fast-" + (settings.model or DEFAULT_MODEL).rstrip("/").split("/")[-1].lower()
        client = self._qdrant_client()
        if vector_name is None and client is not None and await client.collection_exists(name):
            vectors = (await client.get_collection(name)).config.params.vectors
            if isinstance(vectors, dict) and "text" not in vectors and anchor_name in vectors:
                vector_name, text_field = anchor_name, text_field or ANCHOR_TEXT_FIELD
        return vector_name or "text", text_field or TEXT_KEY

    async def close(self) -> None:
        for collection in self._collections.values():
            await collection.close()
        self._collections.clear()
        self._text_fields.clear()
        if self._client is not None:
            await self._client.close()
            self._client = None
