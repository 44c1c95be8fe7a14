"""A server's models, loaded in the background: ``InBackground`` makes one in a worker thread from the server's start
(or on first need), every tool that needs it awaits what is left of the load, and a failure is logged when it
happens and raised to each of those tools as a ``ModelLoadError`` an agent can read, instead of being lost in the
thread. ``StoredSize`` stands for the model, meanwhile, in a collection opened for what needs no vectors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Generic, NoReturn, TypeVar

from ...errors import ModelLoadError, SbertQdrantError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class InBackground(Generic[T]):
    """A value made once by ``make`` in a worker thread: ``start`` begins it (the server's start), ``get`` awaits it.

    ``what`` names it in errors ("the model SBERT_QDRANT_MODEL names"); ``given``: one made already."""

    def __init__(self, make: Callable[[], T], what: str, given: T | None = None) -> None:
        self._make = make
        self._what = what
        self._value = given
        self._task: asyncio.Future[T] | None = None

    def _loading(self) -> asyncio.Future[T]:
        if self._task is None:
            self._task = asyncio.ensure_future(asyncio.to_thread(self._made))
            self._task.add_done_callback(self._log_failure)
        return self._task

    def _made(self) -> T:
        try:
            return self._make()
        except SbertQdrantError:
            raise
        except Exception as exc:  # torch missing, out of memory, a broken file: said in the agent's words
            raise ModelLoadError(
                f"{self._what} failed to load ({type(exc).__name__}: {exc}); fix it in the server's settings or "
                "environment and restart the server (its log has the details)."
            ) from exc

    def _log_failure(self, task: asyncio.Future[T]) -> None:
        """Log a failed load as it happens (the tools that need the value raise it again, each)."""
        if not task.cancelled() and task.exception() is not None:
            logger.error("%s failed to load: %s", self._what, task.exception(), exc_info=task.exception())

    def start(self) -> None:
        if self._value is None:
            self._loading()

    @property
    def ready(self) -> bool:
        return self._value is not None

    async def get(self) -> T:
        """The value, once made (a failure raised again to every caller)."""
        if self._value is None:
            self._value = await asyncio.shield(self._loading())
        return self._value


class StoredSize:
    """The encoder of a collection opened before the model has loaded, for what reads or deletes by id (count, get,
    delete): its vectors' size is the stored collection's, and it has no identity, so that the check of the stored
    collection against the model waits for the model's own collection. Nothing is encoded through it."""

    normalizes = True

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    def encode_document(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> Any:
        self._refuse()

    def encode_query(self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None) -> Any:
        self._refuse()

    @staticmethod
    def _refuse() -> NoReturn:
        raise ModelLoadError("the model has not loaded yet: a tool that encodes awaits it (Backend.collection).")
