"""Pick the engine: an explicit client, a server URL, an Edge folder, or else the environment's settings."""

from __future__ import annotations

import os
from typing import Any

from qdrant_client import AsyncQdrantClient, QdrantClient

from ..errors import InvalidArgumentError
from ..settings import Settings
from .client import ClientStore
from .edge import EdgeStore
from .retry import RetryPolicy


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


def open_async_client(
    url: str | None, api_key: str | None, client: AsyncQdrantClient | None, settings: Settings
) -> tuple[AsyncQdrantClient, bool]:
    """(client, owned): the caller's AsyncQdrantClient, or one for ``url`` / ``QDRANT_URL``."""
    if client is not None:
        if url is not None:
            raise InvalidArgumentError("pass url= or client=, not both.")
        if not isinstance(client, AsyncQdrantClient):
            raise InvalidArgumentError(f"client must be an AsyncQdrantClient, not {type(client).__name__}.")
        return client, False
    target = url or settings.qdrant_url
    if not target:
        raise InvalidArgumentError(
            "AsyncTextCollection needs url=, client=AsyncQdrantClient(...) or QDRANT_URL; "
            "for embedded Qdrant Edge pass location= (writes then run in a worker thread)."
        )
    return AsyncQdrantClient(**_client_options(target, api_key, settings)), True
