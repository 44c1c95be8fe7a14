"""The asyncio collection: ``AsyncTextCollection`` and ``list_collections`` (their source is
``_collection/facade_async.py``)."""

from __future__ import annotations

from ._collection.duplicates import DuplicatePair
from ._collection.facade_async import AsyncTextCollection, list_collections

__all__ = ["AsyncTextCollection", "DuplicatePair", "list_collections"]
