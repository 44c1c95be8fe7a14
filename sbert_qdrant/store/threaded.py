"""Any sync store (Qdrant Edge) made awaitable: every call runs in a worker thread, off the event loop."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from .base import StoredRecord
from .calls import Scan
from .protocol_sync import VectorStore


class ThreadedStore:
    """An ``AsyncVectorStore`` over a ``VectorStore``."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self.upsert_batch = store.upsert_batch
        self.engine = store.engine

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call

    async def scroll(self, name: str, scan: Scan) -> AsyncIterator[list[StoredRecord]]:
        pages = self.store.scroll(name, scan)
        try:
            while (page := await asyncio.to_thread(next, pages, None)) is not None:
                yield page
        finally:
            close = getattr(pages, "close", None)  # a generator: let it release what it holds
            if close is not None:
                close()
