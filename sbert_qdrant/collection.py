"""The collection: ``TextCollection`` (generated from ``_collection_async.py`` into ``_collection_sync.py``)."""

from __future__ import annotations

from ._collection_sync import TextCollection
from ._duplicates import DuplicatePair

__all__ = ["DuplicatePair", "TextCollection"]
