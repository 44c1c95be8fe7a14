"""Bulk loads (``bulk=True``): the same points as a plain load on every engine; on a server, background indexing
paused during the load and restored after it (also after a crash, by ``optimize``), writes not waited on one by one."""

from __future__ import annotations

import pytest
from flavours import Engines
from qdrant_client import QdrantClient
from same_hits import assert_same_hits

from sbert_qdrant import PartialWriteError, SentenceEncoder, TextCollection
from sbert_qdrant.store import ClientStore
from sbert_qdrant.store.calls import StoreWrite

TEXTS = [f"question {i} about topic {i % 7}" for i in range(50)]
LONG = " ".join(f"Sentence {i} of a long page about topic {i % 3}." for i in range(40))


def test_a_bulk_load_stores_what_a_plain_one_does(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    plain, bulk = make.open(tiny_encoder, "plain"), make.open(tiny_encoder, "bulk")
    for coll, options in ((plain, {}), (bulk, {"bulk": True})):
        coll.upsert_texts(TEXTS, batch_size=16, **options)
        coll.upsert_documents([LONG], ids=["page"], chunk_tokens=16, **options)
    assert (bulk.count(), bulk.count(kind="chunks")) == (plain.count(), plain.count(kind="chunks"))
    assert_same_hits(plain.search_text("topic 3", limit=5), bulk.search_text("topic 3", limit=5), abs=1e-5)
    assert bulk.get_document("page") == plain.get_document("page")


class IndexingServer(ClientStore):
    """qdrant-client local mode with a server's background-indexing threshold emulated (local mode has none, and no
    server runs here; the server suite covers the real one): records each write's wait flag and the threshold then."""

    def __init__(self, fail_at_write: int | None = None) -> None:
        super().__init__(QdrantClient(":memory:"))
        self.threshold = 20000
        self.writes: list[tuple[bool, int]] = []
        self.fail_at_write = fail_at_write

    def indexing_threshold(self, name: str) -> int | None:
        return self.threshold

    def set_indexing_threshold(self, name: str, threshold: int) -> None:
        self.threshold = threshold

    def upsert(self, name: str, write: StoreWrite) -> None:
        if len(self.writes) == self.fail_at_write:
            raise ConnectionError("connection reset (injected)")
        self.writes.append((write.wait, self.threshold))
        super().upsert(name, write)


def test_indexing_is_paused_during_a_bulk_load_and_restored(tiny_encoder: SentenceEncoder) -> None:
    store = IndexingServer()
    with TextCollection("bulk", tiny_encoder, store=store) as coll:
        result = coll.upsert_texts(TEXTS, batch_size=16, bulk=True)
        assert result.written == len(TEXTS) and coll.count() == len(TEXTS)
        assert store.writes == [(False, 0)] * 4  # no wait per write, no indexing while loading
        assert store.threshold == 20000  # restored, and the index built (optimize) at the end
        coll.upsert_texts(["one more"])
        assert store.writes[-1] == (True, 20000)  # a plain write afterwards is as before


def test_a_crashed_bulk_load_leaves_indexing_paused_until_optimize(tiny_encoder: SentenceEncoder) -> None:
    store = IndexingServer(fail_at_write=2)
    with TextCollection("bulk", tiny_encoder, store=store) as coll:
        with pytest.raises(PartialWriteError, match="stopped after storing 32 records"):
            coll.upsert_texts(TEXTS, batch_size=16, bulk=True)
        assert store.threshold == 0
        coll.optimize()  # restores what the crashed load paused
        assert store.threshold == 20000
        store.fail_at_write = len(store.writes) + 1
        with pytest.raises(PartialWriteError):
            coll.upsert_texts([f"new {t}" for t in TEXTS], batch_size=16, bulk=True)
        store.fail_at_write = None
        resumed = coll.upsert_texts([f"new {t}" for t in TEXTS], batch_size=16, bulk=True, on_conflict="skip")
        assert (resumed.written, resumed.skipped, store.threshold) == (34, 16, 20000)  # the value paused first
