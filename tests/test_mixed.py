"""Texts and documents in one collection never leak into each other (docs/documents.md, "Texts and documents ..."):
every text call sees texts only, every document call documents only, on every engine and both flavours; and the
collection's public seams: any encoder with the TextEncoder members, any store passed as ``store=``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from flavours import Engines
from qdrant_client import models

from sbert_qdrant import InvalidArgumentError, InvalidInputError, SentenceEncoder, TextCollection, UnsupportedError
from sbert_qdrant.documents import chunk_point_id
from sbert_qdrant.protocols import DocumentEncoder, TextEncoder

TEXTS = ["How do I learn Python?", "Why is the sky blue?"]
LONG = " ".join(
    f"Sentence {i} of a page about why the sky is blue: sunlight scatters off the air's molecules." for i in range(12)
)
EN = {"lang": "en"}
IS_EN = models.Filter(must=[models.FieldCondition(key="lang", match=models.MatchValue(value="en"))])


@pytest.fixture
def mixed(make: Engines, tiny_encoder: SentenceEncoder) -> Any:
    coll = make.open(tiny_encoder)
    coll.upsert_texts(TEXTS, ids=["q1", "q2"], payloads=[EN, EN])
    coll.upsert_documents([LONG], ids=["doc1"], payloads=[EN], chunk_tokens=24)
    return coll


def test_text_reads_see_texts_only(mixed: Any) -> None:
    for mode in ("dense", "sparse", "hybrid"):
        assert {h.id for h in mixed.search_text("why is the sky blue", limit=50, mode=mode)} <= {"q1", "q2"}, mode
    dense = mixed.search_text("why is the sky blue", limit=50)
    assert sorted(h.id for h in dense) == ["q1", "q2"]  # both texts, no chunk, whatever the ranking
    assert [sorted(h.id for h in hits) for hits in mixed.search_texts(TEXTS, limit=50)] == [["q1", "q2"]] * 2
    assert sorted(h.id for h in mixed.search_text("sky", limit=50, diversity=0.5)) == ["q1", "q2"]
    assert sorted(h.id for h in mixed.find_duplicates("Why is the sky blue?", threshold=-1.0, limit=50)) == [
        "q1",
        "q2",
    ]
    pairs = mixed.mine_duplicates(threshold=-1.0, top_k=10)
    assert [{p.id_a, p.id_b} for p in pairs] == [{"q1", "q2"}]  # never two chunks of one document
    assert [t.id for t in mixed.get(["q1", "doc1", chunk_point_id("doc1", 0)])] == ["q1"]
    assert mixed.count() == 2 and mixed.count(IS_EN) == 2


def test_count_says_what_it_counts(mixed: Any) -> None:
    chunks = len(mixed.get_document("doc1").chunks)
    assert chunks > 1
    assert (mixed.count(kind="texts"), mixed.count(kind="documents"), mixed.count(kind="chunks")) == (2, 1, chunks)
    assert mixed.count(IS_EN, kind="documents") == 1
    with pytest.raises(InvalidArgumentError, match="kind='points'"):
        mixed.count(kind="points")


def test_document_reads_see_documents_only(mixed: Any) -> None:
    for mode in ("dense", "sparse", "hybrid"):
        assert [h.id for h in mixed.search_documents("why is the sky blue", limit=10, mode=mode)] == ["doc1"], mode
    assert mixed.get_document("q1") is None


def test_writes_touch_their_own_kind(mixed: Any) -> None:
    chunks = mixed.count(kind="chunks")
    mixed.delete_texts(["doc1"])  # a document's id is not a text's
    mixed.delete_documents(["q1"])  # nor a text's a document's
    assert (mixed.count(), mixed.count(kind="chunks")) == (2, chunks)
    mixed.delete_texts(query_filter=IS_EN)  # every text matches, and every chunk: only texts go
    assert (mixed.count(), mixed.count(kind="chunks")) == (0, chunks)
    assert mixed.get_document("doc1").text == LONG


def test_a_text_and_a_document_may_share_an_id(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    coll.upsert_texts(["a short text"], ids=["same"])
    coll.upsert_documents([LONG], ids=["same"], chunk_tokens=24)
    assert [t.text for t in coll.get(["same"])] == ["a short text"]
    assert coll.get_document("same").text == LONG
    coll.delete_texts(["same"])
    assert coll.get(["same"]) == [] and coll.get_document("same") is not None


def test_the_document_key_is_reserved_for_texts_too(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    with pytest.raises(InvalidInputError, match=r"payloads\[1\] uses the reserved key\(s\) \['document'\]"):
        coll.upsert_texts(["fine", "also fine"], payloads=[None, {"document": {"chunk": 0}}])
    assert not coll.exists()


class _VectorsOnly:
    """An encoder that is not a SentenceEncoder: the TextEncoder members only (no tokenizer)."""

    def __init__(self, inner: SentenceEncoder) -> None:
        self.inner = inner

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def normalizes(self) -> bool:
        return self.inner.normalizes

    def encode_document(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> np.ndarray:
        return np.asarray(self.inner.encode_document(list(texts), batch_size))

    def encode_query(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> np.ndarray:
        return np.asarray(self.inner.encode_query(list(texts), batch_size))


def test_any_text_encoder_works_and_documents_need_a_tokenizer(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    encoder = _VectorsOnly(tiny_encoder)
    assert isinstance(encoder, TextEncoder) and not isinstance(encoder, DocumentEncoder)
    assert isinstance(tiny_encoder, DocumentEncoder)
    coll = make.open(encoder)  # type: ignore[arg-type]
    coll.upsert_texts(TEXTS, ids=["q1", "q2"])
    assert coll.search_text(TEXTS[1], limit=1)[0].id == "q2"
    with pytest.raises(UnsupportedError, match="no tokenizer"):
        coll.upsert_documents([LONG])
    assert coll.count(kind="chunks") == 0
    with pytest.raises(InvalidArgumentError, match="encoder must be a SentenceEncoder or have"):
        make.open(object())  # type: ignore[arg-type]


def test_a_store_is_passed_alone(make: Engines, tiny_encoder: SentenceEncoder, tmp_path: Any) -> None:
    store = make.store()
    coll = make.open(tiny_encoder, store=store)
    coll.upsert_texts(TEXTS)
    assert coll.count() == 2
    with pytest.raises(InvalidArgumentError, match="not location and store"):
        TextCollection("faq", tiny_encoder, location=tmp_path / "x", store=store)


def test_an_instance_opened_later_knows_the_collection_holds_documents(
    make: Engines, tiny_encoder: SentenceEncoder, mixed: Any
) -> None:
    later = make.open(tiny_encoder)  # the same collection, opened after documents were written
    assert sorted(h.id for h in later.search_text("why is the sky blue", limit=50)) == ["q1", "q2"]
    assert later.count() == 2 and [{p.id_a, p.id_b} for p in later.mine_duplicates(threshold=-1.0)] == [{"q1", "q2"}]


def test_another_tools_document_field_is_not_a_chunk(tiny_encoder: SentenceEncoder) -> None:
    """mcp-server-qdrant keeps its text under ``document`` (a str): such points read back as texts."""
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    client.create_collection("memories", vectors_config=models.VectorParams(size=32, distance=models.Distance.COSINE))
    vector = tiny_encoder.encode_document(["a remembered fact"])[0].tolist()
    point = models.PointStruct(
        id="9b2c6d1e-52f7-4bb8-9a3f-0c5e1d7a8b44",
        vector=vector,
        payload={"document": "a remembered fact", "metadata": {"k": 1}},
    )
    client.upsert("memories", [point])
    theirs = TextCollection("memories", tiny_encoder, client=client, vector_name="", text_field="document")
    [stored] = theirs.get([theirs.search_text("fact", limit=1)[0].id])
    assert (stored.text, stored.payload) == ("a remembered fact", {"metadata": {"k": 1}})


def test_a_text_search_of_documents_only_says_why(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    """Issue 45 item 3: a collection of documents answers a text search with the fix, never a silent empty list."""
    coll = make.open(tiny_encoder, "papers")
    coll.upsert_documents([LONG], ids=["doc1"], chunk_tokens=24)
    for call in (lambda: coll.search_text("sky"), lambda: coll.find_duplicates("Why is the sky blue?")):
        with pytest.raises(UnsupportedError, match=r"holds 1 documents and no texts.*search_documents\(query\)"):
            call()
    assert [d.id for d in coll.search_documents("sky")] == ["doc1"]
    coll.upsert_texts(["Why is the sky blue?"], ids=["q1"])
    assert coll.search_text("sky", query_filter=IS_EN) == []  # texts there, none matches: an empty answer is true


def test_documents_diversified(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    """Issue 45 item 4: search_documents(diversity=) picks chunks by MMR: near-repeats give way to other documents."""
    coll = make.open(tiny_encoder, "papers")
    same = "Sunlight scatters off the air's molecules, so the sky looks blue at noon."
    docs = [same, same + " Really.", same + " Truly.", "Bread rises because yeast makes gas in the dough."]
    coll.upsert_documents(docs, ids=["a", "b", "c", "d"])
    plain = [d.id for d in coll.search_documents(same, limit=2)]
    varied = [d.id for d in coll.search_documents(same, limit=2, diversity=1.0)]
    assert plain[0] == "a" and plain[1] in ("b", "c")
    assert varied[0] == "a" and varied[1] == "d"
    with pytest.raises(InvalidArgumentError, match="diversity=2"):
        coll.search_documents(same, diversity=2)
