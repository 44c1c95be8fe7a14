"""Qdrant engines behind one small protocol: Qdrant Edge (embedded) and qdrant-client (server, cloud, local)."""

from __future__ import annotations

from ..types import Distance, Quantization
from .base import CollectionSpec, ScoredRecord, StoredRecord, VectorSpec
from .client_async import AsyncClientStore
from .client_sync import ClientStore
from .edge import EdgeStore
from .protocol_async import AsyncVectorStore
from .protocol_sync import VectorStore
from .retry import RetryPolicy
from .threaded import ThreadedStore

__all__ = [
    "AsyncClientStore",
    "AsyncVectorStore",
    "ClientStore",
    "CollectionSpec",
    "Distance",
    "EdgeStore",
    "Quantization",
    "RetryPolicy",
    "ScoredRecord",
    "StoredRecord",
    "ThreadedStore",
    "VectorSpec",
    "VectorStore",
]
