"""Python's cycle collector held off around bulk work that makes many short-lived objects and no cycles.

The collector runs after every few hundred new container objects and, every so often, walks every object alive:
with torch and transformers loaded that is about a million, so a write that builds ~10 objects per point paid ~24 us
per point for walks that found nothing (measured by ``benchmarks/host.py``). Inside ``gc_paused()`` no collection
starts; reference counting still frees everything at once. Nested and concurrent users share one pause: the
collector comes back when the last one leaves, and only if it was on when the first one came in.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_users = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (reference counting as usual)."""
    global _users, _was_enabled
    with _lock:
        if _users == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _was_enabled:
                gc.enable()
