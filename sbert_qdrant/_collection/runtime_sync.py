"""What the sync collection does differently: a thread lock, blocking work inline, the write in a worker thread.

The same names as ``runtime_async.py``, for the ``*_sync.py`` twins that ``tools/unasync.py`` generates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

Lock = threading.Lock


def run_blocking(fn: Callable[..., T], /, *args: Any) -> T:
    """Run the work here: the caller's thread is the one to block."""
    return fn(*args)


class Writer:
    """Runs one write in a worker thread beside the caller's work (the next batch's encoding); leaving waits for
    it, so that no write outlives the call that started it."""

    def __enter__(self) -> Writer:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sbert-qdrant-writer")
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)

    def start(self, fn: Callable[..., None], /, *args: Any) -> Future[None]:
        return self._pool.submit(fn, *args)

    def wait(self, handle: Future[None]) -> None:
        """Wait for the write; its error is raised here."""
        handle.result()

    def settle(self, handle: Future[None]) -> bool:
        """Wait for a write that may have failed: True when it landed."""
        return handle.exception() is None
