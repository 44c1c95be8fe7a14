"""What the async collection does differently: its lock, blocking work off the event loop, the background write.

The collection's ``*_async.py`` sources are written once against this module; ``tools/unasync.py`` derives their
``*_sync.py`` twins, pointed at ``runtime_sync.py``, which offers the same names for threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

Lock = asyncio.Lock


async def run_blocking(fn: Callable[..., T], /, *args: Any) -> T:
    """Run CPU-bound or blocking work (encoding, mining) in a worker thread, off the event loop."""
    return await asyncio.to_thread(fn, *args)


class Writer:
    """Runs one write beside the caller's work (the next batch's encoding); leaving waits for it, even when the
    caller was cancelled, so that no write outlives the call that started it."""

    async def __aenter__(self) -> Writer:
        self._started: list[asyncio.Future[None]] = []
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*self._started, return_exceptions=True)

    def start(self, fn: Callable[..., Awaitable[None]], /, *args: Any) -> asyncio.Future[None]:
        handle = asyncio.ensure_future(fn(*args))
        self._started.append(handle)
        return handle

    async def wait(self, handle: asyncio.Future[None]) -> None:
        """Wait for the write; its error is raised here."""
        await handle

    async def settle(self, handle: asyncio.Future[None]) -> bool:
        """Wait for a write that may have failed: True when it landed."""
        (outcome,) = await asyncio.gather(handle, return_exceptions=True)
        return not isinstance(outcome, BaseException)
