"""Run one test body against the sync and the async collection: ``Blocking`` drives an AsyncTextCollection from
sync test code, each awaited method run to completion on the view's own event loop."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from qdrant_client import AsyncQdrantClient, QdrantClient

from sbert_qdrant import AsyncTextCollection, SentenceEncoder, TextCollection
from sbert_qdrant.store.factory import open_async_store, open_store

FLAVOURS = ["sync", "async"]
ENGINES = ["edge", "memory"]


class Blocking:
    """An AsyncTextCollection seen through the sync API (a test adapter, not a product)."""

    def __init__(self, collection: AsyncTextCollection, loop: asyncio.AbstractEventLoop) -> None:
        self.collection = collection
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.collection, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(attr(*args, **kwargs))

        return call

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Engines:
    """Opens collections of one flavour on one engine; every collection opened here shares that engine's storage."""

    def __init__(self, flavour: str, engine: str, tmp_path: Path, url: str | None = None) -> None:
        """engine: "edge" (a folder under tmp_path), "memory" (qdrant-client local mode) or "server" (``url``)."""
        self.flavour, self.engine, self.tmp_path, self.url = flavour, engine, tmp_path, url
        self.prefix = f"sbq_test_{uuid.uuid4().hex[:8]}_" if engine == "server" else ""
        self.loop = asyncio.new_event_loop() if flavour == "async" else None
        self.client: Any = None
        if engine == "memory":
            self.client = QdrantClient(":memory:") if flavour == "sync" else AsyncQdrantClient(location=":memory:")
        self.opened: list[Any] = []

    def __repr__(self) -> str:
        return f"Engines({self.flavour!r}, {self.engine!r})"

    def _engine(self) -> dict[str, Any]:
        if self.client is not None:
            return {"client": self.client}
        if self.engine == "server":
            return {"url": self.url}
        return {"location": self.tmp_path / "qdrant"}

    def store(self) -> Any:
        """A store of this flavour on this engine, for a test to wrap and pass as ``store=``."""
        return open_store(**self._engine()) if self.loop is None else open_async_store(**self._engine())

    def open(self, encoder: SentenceEncoder, name: str = "faq", **options: Any) -> Any:
        """A collection on this engine (or on the ``store=`` given)."""
        name = self.prefix + name
        engine = {} if "store" in options else self._engine()
        if self.loop is None:
            collection: Any = TextCollection(name, encoder, **engine, **options)
        else:
            collection = Blocking(AsyncTextCollection(name, encoder, **engine, **options), self.loop)
        self.opened.append(collection)
        return collection

    def close(self) -> None:
        for collection in self.opened:
            if self.engine == "server" and collection.exists():
                collection.delete_collection()  # the server outlives the test
            collection.close()
        if self.loop is not None:
            self.loop.close()


def concurrently(collection: Any, method: str, calls: Sequence[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
    """Run the calls at once: in threads on a sync collection, as gathered tasks on an async one."""
    if isinstance(collection, Blocking):
        bound: Callable[..., Any] = getattr(collection.collection, method)

        async def gather() -> list[Any]:
            return list(await asyncio.gather(*(bound(*a, **k) for a, k in calls)))

        return collection.loop.run_until_complete(gather())
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda call: getattr(collection, method)(*call[0], **call[1]), calls))
