"""The asyncio collection: ``AsyncTextCollection`` (its source is ``_collection/facade_async.py``)."""

from __future__ import annotations

from ._collection.duplicates import DuplicatePair
from ._collection.facade_async import AsyncTextCollection

__all__ = ["AsyncTextCollection", "DuplicatePair"]
