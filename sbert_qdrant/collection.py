"""The collection: ``TextCollection`` (``_collection/facade_sync.py``, generated from ``facade_async.py``)."""

from __future__ import annotations

from ._collection.duplicates import DuplicatePair
from ._collection.facade_sync import TextCollection

__all__ = ["DuplicatePair", "TextCollection"]
