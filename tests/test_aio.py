"""AsyncTextCollection on embedded Qdrant Edge (worker thread) and on AsyncQdrantClient's in-memory mode."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from sbert_qdrant import AsyncTextCollection, CollectionNotFoundError, RetryPolicy, SentenceEncoder, StoreError
from sbert_qdrant.store.async_client import AsyncClientStore

QUESTIONS = [
    "How do I learn Python quickly?",
    "What is the best way to learn Python fast?",
    "Why is the sky blue?",
    "What is the capital of France?",
]


def _collection(engine: str, tmp_path: Path, encoder: SentenceEncoder) -> AsyncTextCollection:
    if engine == "edge":
        return AsyncTextCollection("faq", encoder, location=tmp_path / "qdrant")
    return AsyncTextCollection("faq", encoder, client=AsyncQdrantClient(location=":memory:"))


@pytest.mark.parametrize("engine", ["edge", "memory"])
def test_async_collection_behaves_like_the_sync_one(
    engine: str, tmp_path: Path, default_encoder: SentenceEncoder
) -> None:
    async def scenario() -> None:
        async with _collection(engine, tmp_path, default_encoder) as coll:
            with pytest.raises(CollectionNotFoundError):
                await coll.search_text("x")
            ids = await coll.upsert_texts(QUESTIONS, payloads=[{"n": i} for i in range(4)], batch_size=3)
            again = await coll.upsert_texts(QUESTIONS, on_conflict="skip")
            assert again == ids and (again.written, again.skipped) == (0, 4) and await coll.count() == 4
            many = await asyncio.gather(*(coll.search_text("learning Python", limit=2) for _ in range(8)))
            assert all({h.text for h in hits} == set(QUESTIONS[:2]) for hits in many)
            only = models.Filter(must=[models.FieldCondition(key="n", range=models.Range(gte=2))])
            assert {h.payload["n"] for h in await coll.search_text("x", query_filter=only)} == {2, 3}
            assert [h.text for h in await coll.find_duplicates(QUESTIONS[0], threshold=0.6)] == [QUESTIONS[1]]
            calibration = await coll.calibrate_threshold(
                [(QUESTIONS[0], QUESTIONS[1], 1), (QUESTIONS[2], QUESTIONS[3], 0)]
            )
            assert calibration.f1 == 1.0
            pairs = await coll.mine_duplicates(threshold=0.7)
            assert [{p.text_a, p.text_b} for p in pairs] == [set(QUESTIONS[:2])]
            assert [t.text for t in await coll.get(ids[2:3])] == [QUESTIONS[2]]
            await coll.delete_texts(query_filter=only)
            assert await coll.count() == 2

    asyncio.run(scenario())


class FaultInjectingAsyncClient:
    """A real in-memory AsyncQdrantClient whose named methods first raise scripted faults (a test double)."""

    def __init__(self, faults: dict[str, list[Exception]]) -> None:
        self.inner = AsyncQdrantClient(location=":memory:")
        self.faults = faults
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if self.faults.get(name):
                raise self.faults[name].pop(0)
            return await method(*args, **kwargs)

        return call


def test_async_retries_transient_faults_and_not_permanent_ones(tiny_encoder: SentenceEncoder) -> None:
    busy = UnexpectedResponse(503, "busy", b"", httpx.Headers())
    refused = ResponseHandlingException(httpx.ConnectError("refused"))
    client = FaultInjectingAsyncClient(
        {"upsert": [refused, busy], "count": [UnexpectedResponse(400, "bad", b"", httpx.Headers())]}
    )
    fast = RetryPolicy(attempts=4, max_seconds=5, initial_backoff=0.001, max_backoff=0.01)

    async def scenario() -> None:
        coll = AsyncTextCollection("faq", tiny_encoder, client=client.inner)
        coll.store = AsyncClientStore(client, fast, close_client=False)  # type: ignore[arg-type]
        await coll.upsert_texts(QUESTIONS)
        assert client.calls["upsert"] == 3
        with pytest.raises(StoreError, match="HTTP 400"):
            await coll.count()
        assert client.calls["count"] == 1
        assert (await client.inner.count("faq")).count == 4  # two retried writes stored each point once

    asyncio.run(scenario())
