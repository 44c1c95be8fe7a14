"""Pick the engine (an explicit client, a server URL, an Edge folder, or else the environment's settings) and list
its collections."""

from __future__ import annotations

import os
from typing import Any, Literal

from qdrant_client import AsyncQdrantClient, QdrantClient

from ..errors import InvalidArgumentError
from ..settings import Settings
from .client_async import AsyncClientStore
from .client_sync import ClientStore
from .edge import EdgeStore
from .protocol_async import AsyncVectorStore
from .protocol_sync import VectorStore
from .retry import RetryPolicy
from .threaded import ThreadedStore


def _choose(location: Any, url: str | None, client: Any, store: Any, settings: Settings) -> tuple[str, Any]:
    named = (("location", location), ("url", url), ("client", client), ("store", store))
    given = [name for name, value in named if value is not None]
    if len(given) > 1:
        raise InvalidArgumentError(f"pass one of location=, url=, client= or store=, not {' and '.join(given)}.")
    if store is not None:
        return "store", store
    if client is not None:
        return "client", client
    if url is not None:
        return "url", url
    if location is not None:
        return "location", location
    if settings.qdrant_url:
        return "url", settings.qdrant_url
    return "location", settings.location


def _client_options(url: str, api_key: str | None, settings: Settings) -> dict[str, Any]:
    secret = api_key
    if secret is None and settings.qdrant_api_key is not None:
        secret = settings.qdrant_api_key.get_secret_value()
    return {"url": url, "api_key": secret or None, "timeout": int(settings.timeout)}


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(attempts=settings.retry_attempts, max_seconds=settings.retry_max_seconds)


def _open(
    flavour: Literal["sync", "async"],
    location: str | os.PathLike[str] | None,
    url: str | None,
    api_key: str | None,
    client: Any,
    settings: Settings | None,
    retry: RetryPolicy | None,
    store: Any,
) -> Any:
    """The store of one flavour ("sync" or "async") for the given engine."""
    settings = settings or Settings()
    client_type: Any
    store_type: Any
    client_type, store_type, other = (
        (QdrantClient, ClientStore, "AsyncTextCollection for AsyncQdrantClient")
        if flavour == "sync"
        else (AsyncQdrantClient, AsyncClientStore, "TextCollection for QdrantClient")
    )
    kind, target = _choose(location, url, client, store, settings)
    if kind == "store":
        return target
    if kind == "client":
        if not isinstance(target, client_type):
            raise InvalidArgumentError(
                f"client must be a qdrant_client.{client_type.__name__}, not {type(target).__name__} (use {other})."
            )
        return store_type(target, retry or retry_policy(settings), close_client=False)
    if kind == "location" and os.fspath(target) == ":memory:":  # qdrant-client's spelling: its in-memory local mode
        return store_type(client_type(location=":memory:"), retry or retry_policy(settings))
    if kind == "url":
        return store_type(client_type(**_client_options(target, api_key, settings)), retry or retry_policy(settings))
    return EdgeStore(target) if flavour == "sync" else ThreadedStore(EdgeStore(target))


def open_store(
    location: str | os.PathLike[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    client: QdrantClient | None = None,
    settings: Settings | None = None,
    retry: RetryPolicy | None = None,
    store: VectorStore | None = None,
) -> VectorStore:
    """The store for the given engine (``store``: one of your own, as it is); with none given, ``QDRANT_URL`` if
    set, else ``SBERT_QDRANT_LOCATION``."""
    return _open("sync", location, url, api_key, client, settings, retry, store)


def open_async_store(
    location: str | os.PathLike[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    client: AsyncQdrantClient | None = None,
    settings: Settings | None = None,
    retry: RetryPolicy | None = None,
    store: AsyncVectorStore | None = None,
) -> AsyncVectorStore:
    """``open_store`` for asyncio: an AsyncQdrantClient, or Qdrant Edge with its calls in a worker thread."""
    return _open("async", location, url, api_key, client, settings, retry, store)
