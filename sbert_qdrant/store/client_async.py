"""The store over qdrant-client's AsyncQdrantClient: a Qdrant server, Qdrant Cloud, or the local mode.

Written once, for asyncio; ``tools/unasync.py`` derives ``client_sync.py`` (``ClientStore`` over ``QdrantClient``).
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient, models

from ..errors import StoreError
from . import _requests as rq
from .base import CollectionSpec, ExistingCollection, Payload, ScoredRecord, StoredRecord
from .calls import Grouping, Scan, StoreQuery, StoreWrite
from .grouping import first_fetch, groups_found, wider
from .protocol_async import AsyncVectorStore
from .retry import RetryPolicy


class AsyncClientStore(AsyncVectorStore):
    """Every call goes through one retry policy (transient faults only; local mode never has them).

    close_client: whether ``close()`` closes the client (False for a client the caller owns).
    """

    engine = "qdrant-client"
    upsert_batch = 1024  # ~4 MB of JSON for 384-dim vectors, well under a server's 32 MB request limit

    def __init__(
        self,
        client: AsyncQdrantClient,
        retry: RetryPolicy | None = None,
        close_client: bool = True,
        optimize_timeout: float = 600.0,
    ) -> None:
        self.client = client
        self.retry = retry or RetryPolicy()
        self.close_client = close_client
        self.optimize_timeout = optimize_timeout
        #: qdrant-client's local mode (QdrantLocal behind the client), which lacks some of the engine's queries
        self.local = type(getattr(client, "_client", None)).__name__.endswith("QdrantLocal")

    async def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self.retry.acall(what, getattr(self.client, method), *args, **kwargs)

    async def describe(self, name: str) -> ExistingCollection | None:
        if not await self._call(f"collection_exists({name!r})", "collection_exists", name):
            return None
        return rq.existing(await self._call(f"get_collection({name!r})", "get_collection", name))

    async def names(self) -> list[str]:
        found = await self._call("get_collections()", "get_collections")
        return sorted(c.name for c in found.collections)

    async def create(self, spec: CollectionSpec) -> None:
        if self.local:
            rq.check_local_create(spec)
        try:
            await self._call(f"create_collection({spec.name!r})", "create_collection", **rq.create_kwargs(spec))
        except StoreError:
            # A retried create whose first attempt landed answers "already exists": that is success.
            found = await self.describe(spec.name)
            if found is None or found.vectors != spec.vectors:
                raise

    async def drop(self, name: str) -> None:
        await self._call(f"delete_collection({name!r})", "delete_collection", name)

    async def metadata(self, name: str) -> Payload:
        info = await self._call(f"get_collection({name!r})", "get_collection", name)
        return dict(info.config.metadata or {})

    async def update_metadata(self, name: str, values: Mapping[str, Any]) -> None:
        await self._call(f"update_collection({name!r})", "update_collection", name, metadata=dict(values))

    async def upsert(self, name: str, write: StoreWrite) -> None:
        batch = rq.points_batch(write)
        what = f"upsert of {len(write.ids)} points into {name!r}"
        await self._call(what, "upsert", name, points=batch, wait=write.wait)

    async def existing_ids(self, name: str, ids: Sequence[str]) -> set[str]:
        found = await self._call(f"retrieve from {name!r}", "retrieve", name, list(ids), with_payload=False)
        return {str(r.id) for r in found}

    async def query(self, name: str, query: StoreQuery) -> list[list[ScoredRecord]]:
        if self.local:
            rq.check_local_mode(query)
        requests = rq.query_requests(query)
        timeout = query.request.timeout  # local mode takes it and has no network to wait on
        found = await self._call(f"query of {name!r}", "query_batch_points", name, requests=requests, timeout=timeout)
        return rq.scored(found)

    async def query_groups(self, name: str, query: StoreQuery, grouping: Grouping) -> list[list[ScoredRecord]]:
        if self.local:  # local mode's grouping widens every prefetch to the whole collection: group here instead
            fetch = first_fetch(query, grouping)
            while (groups := groups_found((await self.query(name, fetch))[0], fetch, query, grouping)) is None:
                fetch = wider(fetch)
            return groups
        request = rq.groups_request(query, grouping) | {"timeout": query.request.timeout}
        return rq.grouped(await self._call(f"grouped query of {name!r}", "query_points_groups", name, **request))

    async def retrieve(self, name: str, vector_name: str, ids: Sequence[str], with_vectors: bool) -> list[StoredRecord]:
        vectors = rq.vectors_selector(vector_name, with_vectors)
        found = await self._call(f"retrieve from {name!r}", "retrieve", name, list(ids), with_vectors=vectors)
        return rq.stored(found, vector_name)

    async def scroll(self, name: str, scan: Scan) -> AsyncIterator[list[StoredRecord]]:
        vectors = rq.vectors_selector(scan.vector_name, scan.with_vectors)
        start: Any = scan.offset
        while True:
            records, start = await self._call(
                f"scroll of {name!r}",
                "scroll",
                name,
                scroll_filter=scan.query_filter,
                limit=scan.batch_size,
                offset=start,
                with_vectors=vectors,
            )
            if records:
                yield rq.stored(records, scan.vector_name)
            if start is None:
                return

    async def delete(
        self, name: str, ids: Sequence[str] | None, query_filter: models.Filter | None, wait: bool
    ) -> None:
        selector = rq.points_selector(ids, query_filter)
        await self._call(f"delete from {name!r}", "delete", name, points_selector=selector, wait=wait)

    async def count(self, name: str, query_filter: models.Filter | None) -> int:
        result = await self._call(f"count of {name!r}", "count", name, count_filter=query_filter, exact=True)
        return int(result.count)

    async def create_payload_index(self, name: str, field_name: str, schema: models.PayloadSchemaType) -> None:
        with warnings.catch_warnings():
            # local mode filters without indexes and says so on every call; the index matters on a server only
            warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
            await self._call(
                f"create_payload_index({field_name!r}) on {name!r}",
                "create_payload_index",
                name,
                field_name=field_name,
                field_schema=schema,
                wait=True,
            )

    async def optimize(self, name: str) -> None:
        """Wait until the server reports the collection green (indexed), up to ``optimize_timeout`` seconds."""
        deadline = time.monotonic() + self.optimize_timeout
        while (
            await self._call(f"get_collection({name!r})", "get_collection", name)
        ).status != models.CollectionStatus.GREEN:
            if time.monotonic() > deadline:
                raise StoreError(f"collection {name!r} was not green after {self.optimize_timeout:.0f} s of indexing.")
            await asyncio.sleep(0.5)

    async def indexing_threshold(self, name: str) -> int | None:
        if self.local:
            return None  # local mode searches exactly and builds no index
        info = await self._call(f"get_collection({name!r})", "get_collection", name)
        return info.config.optimizer_config.indexing_threshold

    async def set_indexing_threshold(self, name: str, threshold: int) -> None:
        optimizers = models.OptimizersConfigDiff(indexing_threshold=threshold)
        await self._call(f"update_collection({name!r})", "update_collection", name, optimizers_config=optimizers)

    async def set_alias(self, alias: str, name: str) -> None:
        found = await self._call("get_aliases()", "get_aliases")
        moves: list[Any] = [
            models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias))
            for existing in found.aliases
            if existing.alias_name == alias
        ]
        moves.append(
            models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name=name, alias_name=alias))
        )
        # One request: the server applies the delete and the create together, so readers never miss the alias.
        await self._call(f"alias {alias!r} -> {name!r}", "update_collection_aliases", change_aliases_operations=moves)

    async def close(self) -> None:
        if self.close_client:
            await self.client.close()
