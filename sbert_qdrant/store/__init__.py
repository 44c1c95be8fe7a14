"""Qdrant engines behind one small protocol: Qdrant Edge (embedded) and qdrant-client (server, cloud, local)."""

from __future__ import annotations

from .base import CollectionSpec, Distance, Quantization, ScoredRecord, StoredRecord, VectorSpec, VectorStore
from .client import ClientStore
from .edge import EdgeStore
from .retry import RetryPolicy

__all__ = [
    "ClientStore",
    "CollectionSpec",
    "Distance",
    "EdgeStore",
    "Quantization",
    "RetryPolicy",
    "ScoredRecord",
    "StoredRecord",
    "VectorSpec",
    "VectorStore",
]
