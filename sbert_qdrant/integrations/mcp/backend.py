"""What the tools share: the engine, the encoder (loaded once, in the background: ``model.InBackground``) and one
open ``AsyncTextCollection`` per name, each in its layout (ours, mcp-server-qdrant's, or the one the settings name),
through which every note is written and read.

The model (on NumPy where it runs there: no torch), the collections and qdrant-client are imported in worker threads
from the server's start (or on first use with ``preload=False``), so that the server answers ``initialize`` and
``tools/list`` without waiting for them, and the tools that need no vectors (count, list, delete) without waiting
for the model.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import CollectionMismatchError, InvalidArgumentError, StoreInUseError, UnsupportedError
from ...layout import PointLayout, VectorSlot
from ...records import Key
from ...types import DEFAULT_MODEL
from .model import InBackground, StoredSize
from .settings import McpSettings

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient

    from ...aio import AsyncTextCollection
    from ...encoder import CrossEncoder
    from ...protocols import TextEncoder

logger = logging.getLogger(__name__)

#: What an agent is told when another process holds the store.
SHARE = (
    "an embedded store has one user at a time. Stop the other server, or run one shared server for every agent: "
    "`sbert-qdrant mcp --transport streamable-http` (the same environment) and point each agent at "
    "http://127.0.0.1:8000/mcp (docs/mcp.md, 'Several agents, one store')."
)


def encoding_workers(threads: int | None) -> ThreadPoolExecutor:
    """The worker threads ``asyncio.to_thread`` runs in (the encoder's loading and encoding among them), each with
    ``threads`` torch threads once torch is imported: a query encoded by torch's full team in a worker contends with
    the threads of qdrant-client's local mode, ~20x slower (benchmarks/mcp_startup.py)."""
    return ThreadPoolExecutor(thread_name_prefix="sbert-qdrant-mcp", initializer=_torch_threads, initargs=(threads,))


def _torch_threads(threads: int | None) -> None:
    if threads is not None and "torch" in sys.modules:  # never imported for it: a count needs no torch
        import torch

        torch.set_num_threads(threads)


class Backend:
    """The engine named by the settings (``QDRANT_LOCAL_PATH``: qdrant-client local mode on disk; ``QDRANT_URL``: a
    server, or ``:memory:``; else Qdrant Edge under ``SBERT_QDRANT_LOCATION``) and the collections opened on it."""

    def __init__(
        self, settings: McpSettings, encoder: TextEncoder | None = None, cross_encoder: CrossEncoder | None = None
    ) -> None:
        self.settings = settings
        self._encoder = InBackground(self._load_encoder, "the model (SBERT_QDRANT_MODEL, EMBEDDING_MODEL)", encoder)
        self._cross = InBackground(
            self._load_cross_encoder, "the cross-encoder (SBERT_QDRANT_RERANK_MODEL)", cross_encoder
        )
        self._client: AsyncQdrantClient | None = None
        self._collections: dict[str, AsyncTextCollection] = {}
        #: Collections opened before the model had loaded, for what needs no vectors (``collection(vectors=False)``).
        self._readers: dict[str, AsyncTextCollection] = {}
        self._opening = asyncio.Lock()
        self._threads_set = True
        self._warming: asyncio.Future[object] | None = None

    def start(self) -> None:
        """At the server's start: the worker threads, and (unless ``preload=False``) the model loading in one of
        them and the collections' modules (qdrant-client among them, about a second) imported in another, while
        the server answers: the first find waits only for what is left of both."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(encoding_workers(self.settings.encode_threads))
        self._threads_set = "torch" in sys.modules
        if self.settings.preload:
            self._encoder.start()
            self._warming = loop.run_in_executor(None, _import_collections)
            self._warming.add_done_callback(_ignore_failure)  # raised again where the tools import it

    async def encoder(self) -> TextEncoder:
        """The model, once loaded (a failure to load raised to each caller)."""
        encoder: TextEncoder = await self._encoder.get()
        if not self._threads_set:  # workers started before torch was imported run its default team: fresh ones
            self._threads_set = True
            asyncio.get_running_loop().set_default_executor(encoding_workers(self.settings.encode_threads))
        return encoder

    def _load_encoder(self) -> TextEncoder:
        """The settings' model on NumPy where it runs there (no torch imported: a first find in about a second),
        else on torch; on this server's one text at a time both take the same time (docs/mcp.md, 'Start-up')."""
        from ...encoder import EncoderSpec

        spec = EncoderSpec.of(self.settings)
        try:
            return spec.load_numpy()
        except UnsupportedError as exc:
            logger.info("the model runs on torch: %s", exc)
            return spec.load()

    def _load_cross_encoder(self) -> CrossEncoder:
        from ...encoder import CrossEncoder

        name = self.settings.rerank_model
        if name is None:
            raise InvalidArgumentError(
                "rerank=true needs a cross-encoder: set SBERT_QDRANT_RERANK_MODEL to a cross-encoder folder or hub id "
                "in the server's environment, or search without rerank."
            )
        return CrossEncoder.load(name, device=self.settings.device, precision=self.settings.precision)

    async def truncation(self, text: str, what: str) -> str:
        """What an agent is told of a text longer than the model reads ("" when it is not): its vector is made from
        its first tokens (as FastEmbed, mcp-server-qdrant's embedder, truncates), so the rest is not searched."""
        from ...protocols import DocumentEncoder

        encoder = await self.encoder()
        if not isinstance(encoder, DocumentEncoder):
            return ""
        tokens, limit = len(encoder.token_spans(text)), encoder.document_token_limit
        if tokens <= limit:
            return ""
        return (
            f"The {what} is {tokens} tokens long and the model reads {limit}: its vector was made from its first "
            f"{limit} tokens."
        )

    async def cross_encoder(self) -> CrossEncoder:
        cross: CrossEncoder = await self._cross.get()
        return cross

    def _qdrant_client(self) -> AsyncQdrantClient | None:
        """The one qdrant-client every collection shares, when the settings name one (None: Qdrant Edge)."""
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

    def _engine(self) -> dict[str, Any]:
        """The engine as the collections' public door takes it: the shared client, else the Qdrant Edge folder."""
        client = self._qdrant_client()
        return {"client": client} if client is not None else {"location": self.settings.location}

    async def collection_names(self) -> list[str]:
        from ...aio import list_collections

        return await list_collections(**self._engine(), settings=self.settings)

    async def collection(self, name: str, *, write: bool = False, vectors: bool = True) -> AsyncTextCollection:
        """The collection ``name``, opened once in its layout; ``write``: it must be writable here (ours, or
        mcp-server-qdrant's). ``vectors=False``: for what needs no vectors (count, get, delete by id), which does not
        wait for the model: until it has loaded, the collection opened at its stored size (``StoredSize``)."""
        encoder = await self.encoder() if vectors or self._encoder.ready else None
        async with self._opening:  # not held while the model loads: a count answers meanwhile
            opened = self._collections.get(name) if encoder is not None else self._readers.get(name)
            if opened is None:
                opened = await self._open(name, encoder)
                (self._collections if encoder is not None else self._readers)[name] = opened
        if write and not opened.layout.writable:
            raise UnsupportedError(
                f"collection {name!r} is read in another tool's layout (SBERT_QDRANT_VECTOR_NAME, "
                "SBERT_QDRANT_TEXT_FIELD): it was written by another tool, and is read-only here; write to it with "
                "that tool, or store into another collection."
            )
        return opened

    async def _open(self, name: str, encoder: TextEncoder | None) -> AsyncTextCollection:
        """The collection in its layout, with the model (None: at its stored size, for what needs no vectors)."""
        from ...aio import AsyncTextCollection

        engine = self._engine()
        probe = AsyncTextCollection(name, StoredSize(0), **engine, settings=self.settings)
        try:
            stored = await probe.stored_vectors()
        finally:
            await probe.close()
        layout = self._layout(name, stored)
        indexes = {layout.field_key(f.name): f.index_schema() for f in self.settings.filterable_fields}
        opened = AsyncTextCollection(
            name,
            encoder or StoredSize(stored.get(layout.primary.name, 0)),
            **engine,
            layout=layout,
            payload_indexes=indexes or None,
            settings=self.settings,
        )
        if encoder is not None and indexes and not self.settings.read_only and await opened.exists():
            for key, schema in indexes.items():  # as mcp-server-qdrant indexes them (it does so on create)
                await opened.create_payload_index(key, schema)
        return opened

    def _layout(self, name: str, stored: dict[str, int]) -> PointLayout:
        """The layout the settings name; else the stored collection's: mcp-server-qdrant's where it has the
        ``fast-<model>`` vector (refused when that is another model's), ours where it has ``text``; a collection not
        created yet gets the one ``McpSettings.new_in_their_layout`` says."""
        settings = self.settings
        if settings.vector_name is not None or settings.text_field is not None:
            return PointLayout.foreign(
                "text" if settings.vector_name is None else settings.vector_name, settings.text_field or "text"
            )
        model = settings.model or DEFAULT_MODEL
        theirs, ours = PointLayout.mcp_server_qdrant(model), PointLayout.ours(VectorSlot("text"))
        wanted = theirs.primary.name
        if not stored:
            return theirs if settings.new_in_their_layout else ours
        if wanted in stored:
            return theirs
        if ours.primary.name in stored:
            return ours
        fast = sorted(v for v in stored if v.startswith("fast-"))
        if fast:
            raise CollectionMismatchError(
                f"collection {name!r} was written by mcp-server-qdrant with the model {fast[0].removeprefix('fast-')}"
                f" (its vector {fast[0]!r}), and this server encodes with {model} (vector {wanted!r}): their "
                "vectors are not comparable. Start this server with EMBEDDING_MODEL set to the model that wrote the "
                "collection, or use another collection."
            )
        raise CollectionMismatchError(
            f"collection {name!r} holds the vectors {sorted(stored)}, none of which this server writes ('text', or "
            f"mcp-server-qdrant's {wanted!r}); to read it, set SBERT_QDRANT_VECTOR_NAME to its vector and "
            "SBERT_QDRANT_TEXT_FIELD to the payload field of its text, or use another collection."
        )

    async def remember(
        self, collection: AsyncTextCollection, text: str, metadata: dict[str, Any] | None, key: Key | None
    ) -> Key:
        """Store a note; its id: ``key``, else (in mcp-server-qdrant's layout, whose points have random ids) that of
        a point already holding this very text, else the one derived from the text: stored twice, one point."""
        if key is None and collection.layout.owner == "mcp-server-qdrant":
            key = await _holding(collection, text)
        ids = await collection.upsert_texts(
            [text], ids=None if key is None else [key], payloads=[metadata], show_progress_bar=False
        )
        return ids[0]

    def held(self) -> str:
        """What an agent is told when another process holds the store."""
        where = "QDRANT_LOCAL_PATH" if self.settings.local_path else "SBERT_QDRANT_LOCATION"
        return f"the store the server's {where} names is open in another process; {SHARE}"

    def redact(self, message: str) -> str:
        """A message for an agent, with the server's data folder named by its setting instead of its path."""
        settings = self.settings
        folders = {"QDRANT_LOCAL_PATH": settings.local_path, "SBERT_QDRANT_LOCATION": settings.location}
        for name, folder in folders.items():
            if folder:
                path = Path(folder).expanduser()
                for shown in sorted({str(path.resolve()), str(path.absolute())}, key=len, reverse=True):
                    message = message.replace(shown, f"<{name}>") if len(shown) > 1 else message
        return message

    async def close(self) -> None:
        for collection in [*self._collections.values(), *self._readers.values()]:
            await collection.close()
        self._collections.clear()
        self._readers.clear()
        if self._client is not None:
            await self._client.close()
            self._client = None


def _import_collections() -> None:
    from ... import aio  # noqa: F401  (imported for what it imports: the collections, qdrant-client)


def _ignore_failure(warming: asyncio.Future[object]) -> None:
    """A failed import at start is not logged: the tool that imports the module raises it to the agent."""
    if not warming.cancelled():
        warming.exception()


async def _holding(collection: AsyncTextCollection, text: str) -> Key | None:
    """The id of a stored point holding this very text, if any."""
    from qdrant_client import models

    if not await collection.exists():
        return None
    same = models.Filter(
        must=[models.FieldCondition(key=collection.layout.text_field, match=models.MatchValue(value=text))]
    )
    if not await collection.count(same):
        return None
    found = await collection.search_text(text, 1, query_filter=same)
    return found[0].id if found else None
