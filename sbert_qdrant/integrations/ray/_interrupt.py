"""A Ray run stopped by a signal where it is, promptly: ``stopping`` turns SIGINT (and, in the CLI, SIGTERM) into
``Interrupted``, and the driver waits for Ray's batches in ``pulled``, in a loop of its own that raises it again.

Why both: Ray's object references run finalizers (weakref callbacks) in whichever thread drops them, and an exception
a signal raises there is printed and dropped ("Exception ignored"); the run then went on to the end. Ray's waits run
in a thread of their own here, so the main thread waits in ``pulled``, which sees a dropped stop within
``_POLL_S``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from queue import Empty, Full, Queue
from types import FrameType
from typing import Any, TypeVar

#: Seconds between two looks at whether a stop was asked, while waiting for Ray.
_POLL_S = 0.2

T = TypeVar("T")


class Interrupted(KeyboardInterrupt):
    """The run was stopped by signal ``signum``; what was written stays (a re-run with ``on_conflict="skip"``
    writes the rest)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class _State:
    received: int | None = None


def _stop(signum: int, frame: FrameType | None) -> None:
    _State.received = signum
    raise Interrupted(signum)


def check() -> None:
    """Raise ``Interrupted`` where a signal asked for a stop (a raise a finalizer dropped is raised again here)."""
    if _State.received is not None:
        raise Interrupted(_State.received)


@contextmanager
def stopping(*signums: int, always: bool = False) -> Iterator[None]:
    """Inside, each of ``signums`` raises ``Interrupted``: those still at Python's default handling, or every one
    with ``always`` (the command line's, over Ray's own SIGTERM handler, which exits where a finalizer may drop it);
    their handlers are restored after. Off the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = {s: signal.getsignal(s) for s in signums}
    taken = {s: h for s, h in taken.items() if always or h in (signal.default_int_handler, signal.SIG_DFL)}
    if taken:
        _State.received = None
    for signum in taken:
        signal.signal(signum, _stop)
    try:
        yield
    finally:
        for signum, handler in taken.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def pulled(items: Iterable[T]) -> Generator[T, None, None]:
    """``items`` read in a thread of their own (Ray's waits, its finalizers), handed over here; a stop asked by a
    signal is raised here within ``_POLL_S``. Closing this generator stops the reading thread at its next item."""
    handed: Queue[tuple[bool, Any]] = Queue(maxsize=1)
    stop = threading.Event()
    end = object()

    def hand(ok: bool, item: Any) -> bool:
        while not stop.is_set():
            try:
                handed.put((ok, item), timeout=_POLL_S)
                return True
            except Full:
                continue
        return False

    def read() -> None:
        iterator = iter(items)
        try:
            for item in iterator:
                if not hand(True, item):
                    return
            hand(False, end)
        except BaseException as exc:  # noqa: BLE001 (handed over, raised where the items are pulled)
            hand(False, exc)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    threading.Thread(target=read, name="sbert-qdrant-ray-read", daemon=True).start()
    try:
        while True:
            check()
            try:
                ok, item = handed.get(timeout=_POLL_S)
            except Empty:
                continue
            if ok:
                yield item
            elif item is end:
                return
            else:
                raise item
    finally:
        stop.set()
