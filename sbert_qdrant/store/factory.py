"""Pick the engine: an explicit client, a server URL, an Edge folder, or else the environment's settings."""

from __future__ import annotations

import os
from typing import Any

from qdrant_client import AsyncQdrantClient, QdrantClient

from ..errors import InvalidArgumentError
from ..settings import Settings
from .async_client import AsyncClientStore
from .client import ClientStore
from .edge import EdgeStore
from .retry import RetryPolicy
from .threaded import ThreadedStore


def _choose(location: Any, url: str | None, client: Any, settings: Settings) -> tuple[str, Any]:
    given = [name for name, value in (("location", location), ("url", url), ("client", client)) if value is not None]
    if len(given) > 1:
        raise InvalidArgumentError(f"pass one of location=, url= or client=, not {' and '.join(given)}.")
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


def open_store(
    location: str | os.PathLike[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    client: QdrantClient | None = None,
    settings: Settings | None = None,
    retry: RetryPolicy | None = None,
) -> EdgeStore | ClientStore:
    """The store for the given engine; with none given, ``QDRANT_URL`` if set, else ``SBERT_QDRANT_LOCATION``."""
    settings = settings or Settings()
    kind, target = _choose(location, url, client, settings)
    if kind == "client":
        if not isinstance(target, QdrantClient):
            raise InvalidArgumentError(
                f"client must be a qdrant_client.QdrantClient, not {type(target).__name__} "
                "(use AsyncTextCollection for AsyncQdrantClient)."
            )
        return ClientStore(target, retry or retry_policy(settings), close_client=False)
    if kind == "url":
        return ClientStore(QdrantClient(**_client_options(target, api_key, settings)), retry or retry_policy(settings))
    return EdgeStore(target)


def open_async_store(
    location: str | os.PathLike[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    client: AsyncQdrantClient | None = None,
    settings: Settings | None = None,
    retry: RetryPolicy | None = None,
) -> AsyncClientStore | ThreadedStore:
    """``open_store`` for asyncio: an AsyncQdrantClient, or Qdrant Edge with its calls in a worker thread."""
    settings = settings or Settings()
    kind, target = _choose(location, url, client, settings)
    if kind == "client":
        if not isinstance(target, AsyncQdrantClient):
            raise InvalidArgumentError(
                f"client must be a qdrant_client.AsyncQdrantClient, not {type(target).__name__} "
                "(use TextCollection for QdrantClient)."
            )
        return AsyncClientStore(target, retry or retry_policy(settings), close_client=False)
    if kind == "url":
        options = _client_options(target, api_key, settings)
        return AsyncClientStore(AsyncQdrantClient(**options), retry or retry_policy(settings))
    return ThreadedStore(EdgeStore(target))
