"""What only the async collection has: concurrent awaits on one collection (the rest of its behaviour is the shared
suite in test_collection.py and test_retry.py, run for both flavours)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient, QdrantClient

from sbert_qdrant import AsyncTextCollection, InvalidArgumentError, SentenceEncoder, TextCollection
from sbert_qdrant.store import AsyncClientStore

QUESTIONS = [
    "How do I learn Python quickly?",
    "What is the best way to learn Python fast?",
    "Why is the sky blue?",
    "What is the capital of France?",
]


@pytest.mark.parametrize("engine", ["edge", "memory"])
def test_concurrent_searches_and_writes_on_one_loop(
    engine: str, tmp_path: Path, default_encoder: SentenceEncoder
) -> None:
    async def scenario() -> None:
        where = {"location": tmp_path / "qdrant"} if engine == "edge" else {"client": AsyncQdrantClient(":memory:")}
        async with AsyncTextCollection("faq", default_encoder, **where) as coll:  # type: ignore[arg-type]
            await coll.upsert_texts(QUESTIONS)
            writes = [coll.upsert_texts([f"extra {i}", f"more {i}"]) for i in range(4)]
            searches = [coll.search_text("learning Python", limit=2) for _ in range(8)]
            done = await asyncio.gather(*writes, *searches)
            assert all({h.text for h in hits} == set(QUESTIONS[:2]) for hits in done[4:])
            assert await coll.count() == 12

    asyncio.run(scenario())


def test_each_flavour_refuses_the_other_flavours_client(tiny_encoder: SentenceEncoder) -> None:
    with pytest.raises(InvalidArgumentError, match="use AsyncTextCollection for AsyncQdrantClient"):
        TextCollection("faq", tiny_encoder, client=AsyncQdrantClient(":memory:"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="use TextCollection for QdrantClient"):
        AsyncTextCollection("faq", tiny_encoder, client=QdrantClient(":memory:"))  # type: ignore[arg-type]


def test_a_cancelled_upsert_leaves_no_write_running(tiny_encoder: SentenceEncoder) -> None:
    async def scenario() -> None:
        store = AsyncClientStore(AsyncQdrantClient(":memory:"))
        coll = AsyncTextCollection("faq", tiny_encoder, store=store)
        started, finished = [], []
        real_upsert = store.upsert

        async def slow_upsert(*args: object, **kwargs: object) -> None:
            started.append(1)
            await asyncio.sleep(0.05)
            await real_upsert(*args, **kwargs)  # type: ignore[arg-type]
            finished.append(1)

        store.upsert = slow_upsert  # type: ignore[method-assign]
        task = asyncio.create_task(coll.upsert_texts([f"text number {i}" for i in range(400)], batch_size=10))
        while not started:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(started) == len(finished) >= 1  # the write in flight was waited for, none started after
        stored = await coll.count()
        await asyncio.sleep(0.2)
        assert await coll.count() == stored == 10 * len(finished)

    asyncio.run(scenario())
