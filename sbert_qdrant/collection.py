"""The collection: ``TextCollection`` and ``list_collections`` (``_collection/facade_sync.py``, generated from
``facade_async.py``)."""

from __future__ import annotations

from ._collection.duplicates import DuplicatePair
from ._collection.facade_sync import TextCollection, list_collections

__all__ = ["DuplicatePair", "TextCollection", "list_collections"]
