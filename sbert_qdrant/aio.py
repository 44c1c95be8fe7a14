"""The asyncio collection: ``AsyncTextCollection`` (its source is ``_collection_async.py``)."""

from __future__ import annotations

from ._collection_async import AsyncTextCollection
from ._duplicates import DuplicatePair

__all__ = ["AsyncTextCollection", "DuplicatePair"]
