"""A collection reopened with fewer encoders than it was created with (issue 56): every slot it records is seen
(layout, repr) and readable, searched where this instance can encode it, and never left empty by a write: the
write is refused before anything is stored, on every engine and flavour. Its BM25, whose settings the collection
records, is filled even when opened with ``sparse=None``."""

from __future__ import annotations

import pytest
from flavours import Engines

from sbert_qdrant import SentenceEncoder, testing
from sbert_qdrant.errors import CollectionMismatchError

TEXTS = ["How do I learn Python?", "Why is the sky blue?", "Best pizza in Naples"]


def _two_slots(make: Engines) -> tuple[SentenceEncoder, SentenceEncoder]:
    mean, cls = testing.tiny_encoder(seed=0), testing.tiny_encoder(seed=1)
    make.open(mean, name="two", named_vectors={"cls": cls}).upsert_texts(TEXTS, ids=["a", "b", "c"])
    return mean, cls


def test_a_write_that_would_leave_a_recorded_slot_empty_is_refused_and_writes_nothing(make: Engines) -> None:
    mean, cls = _two_slots(make)
    reopened = make.open(mean, name="two")
    fix = rf"named_vectors=\{{'cls': <encoder {cls.identity}>\}}"
    with pytest.raises(CollectionMismatchError, match=rf"slot\(s\) \['cls'\].*nothing was written.*{fix}"):
        reopened.upsert_texts(["new text here"], ids=["new1"])
    with pytest.raises(CollectionMismatchError, match="'cls'"):
        reopened.upsert_texts(["given"], ids=["new2"], vectors=mean.encode(["given"]), vectors_from=mean.identity)
    with pytest.raises(CollectionMismatchError, match="'cls'"):
        reopened.upsert_documents(["A document. Two sentences."], ids=["d1"])
    assert reopened.count() == 3 and reopened.count(kind="documents") == 0
    assert reopened.get(["new1", "new2"]) == []
    # with every encoder it was created with, the same write goes through and fills both slots
    full = make.open(mean, name="two", named_vectors={"cls": cls})
    full.upsert_texts(["new text here"], ids=["new1"])
    assert full.search_text("new text here", limit=1, using="cls")[0].id == "new1"


def test_every_recorded_slot_is_seen_read_and_searched_where_it_can_be_encoded(make: Engines) -> None:
    mean, cls = _two_slots(make)
    reopened = make.open(mean, name="two")
    assert reopened.count() == 3  # the first read checks the collection and learns its slots
    assert [(s.name, s.kind, s.size, s.filled_by) for s in reopened.layout.slots if s.kind == "dense"] == [
        ("text", "dense", 32, mean.identity),
        ("cls", "dense", 32, cls.identity),
    ]
    assert "cls: dense 32 (no encoder here)" in repr(getattr(reopened, "collection", reopened))
    assert reopened.search_text(TEXTS[1], limit=1)[0].id == "b"
    assert [t.text for t in reopened.get(["a", "c"])] == [TEXTS[0], TEXTS[2]]
    with pytest.raises(CollectionMismatchError, match=r"using='cls' cannot be encoded.*named_vectors="):
        reopened.search_text(TEXTS[1], using="cls")
    # a fresh instance whose first call is the search of the recorded slot says the same
    with pytest.raises(CollectionMismatchError, match="using='cls' cannot be encoded"):
        make.open(mean, name="two").search_text(TEXTS[1], using="cls")


def test_a_collection_opened_without_sparse_still_fills_its_recorded_bm25(make: Engines) -> None:
    enc = testing.tiny_encoder()
    make.open(enc, name="lexical").upsert_texts(TEXTS, ids=["a", "b", "c"])
    dense_only = make.open(enc, name="lexical", sparse=None)
    dense_only.upsert_texts(["zebra crossings in Oslo"], ids=["z"])
    assert dense_only.layout.sparse is not None and dense_only.layout.sparse.filled_by == "bm25"
    assert make.open(enc, name="lexical").search_text("zebra Oslo", limit=1, mode="sparse")[0].id == "z"
