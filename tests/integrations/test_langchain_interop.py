"""A collection written by langchain-qdrant's own QdrantVectorStore, read and searched by TextCollection as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("langchain_qdrant")

from langchain_qdrant import QdrantVectorStore
from qdrant_client import models

from sbert_qdrant import (
    CollectionMismatchError,
    InvalidArgumentError,
    SentenceEncoder,
    TextCollection,
    UnsupportedError,
    testing,
)
from sbert_qdrant.integrations.langchain import SbertEmbeddings

DATA = Path(__file__).parents[1] / "data" / "scifact_sample.jsonl"


@pytest.fixture(scope="module")
def scifact() -> tuple[list[dict[str, str]], list[str]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["kind"] == "doc"], [r["text"] for r in rows if r["kind"] == "query"]


@pytest.fixture
def written(
    scifact: tuple[list[dict[str, str]], list[str]], tiny_encoder: SentenceEncoder
) -> tuple[QdrantVectorStore, TextCollection]:
    docs, _ = scifact
    lc = QdrantVectorStore.from_texts(
        [d["title"] + "\n" + d["text"] for d in docs],
        SbertEmbeddings(encoder=tiny_encoder),
        metadatas=[{"doc_id": d["_id"], "short": len(d["text"]) < 1000} for d in docs],
        location=":memory:",
        collection_name="scifact",
    )
    ours = TextCollection("scifact", tiny_encoder, client=lc.client, vector_name="", text_field="page_content")
    return lc, ours


def test_same_top_hits_as_langchain(
    written: tuple[QdrantVectorStore, TextCollection], scifact: tuple[list[dict[str, str]], list[str]]
) -> None:
    lc, ours = written
    _, queries = scifact
    assert ours.count() == len(scifact[0])
    for query in queries:
        theirs = lc.similarity_search_with_score(query, k=5)
        hits = ours.search_text(query, limit=5)
        assert [h.id for h in hits] == [doc.metadata["_id"] for doc, _ in theirs]
        assert [h.score for h in hits] == pytest.approx([score for _, score in theirs], abs=1e-5)
        assert [h.text for h in hits] == [doc.page_content for doc, _ in theirs]
        assert hits[0].payload["metadata"]["doc_id"] == theirs[0][0].metadata["doc_id"]


def test_filters_on_langchain_metadata(
    written: tuple[QdrantVectorStore, TextCollection], scifact: tuple[list[dict[str, str]], list[str]]
) -> None:
    lc, ours = written
    short = models.Filter(must=[models.FieldCondition(key="metadata.short", match=models.MatchValue(value=True))])
    query = scifact[1][0]
    theirs = lc.similarity_search(query, k=3, filter=short)
    hits = ours.search_text(query, limit=3, query_filter=short)
    assert [h.id for h in hits] == [doc.metadata["_id"] for doc in theirs]
    assert all(h.payload["metadata"]["short"] for h in hits)
    got = ours.get([hits[0].id])
    assert got[0].text == theirs[0].page_content


def test_collections_of_others_are_read_only_and_checked(
    written: tuple[QdrantVectorStore, TextCollection], tiny_encoder: SentenceEncoder
) -> None:
    lc, ours = written
    with pytest.raises(UnsupportedError, match="text_field='page_content'"):
        ours.upsert_texts(["a new text"])
    with pytest.raises(UnsupportedError, match="text_field='page_content'"):
        ours.upsert_documents(["a new document"])
    count = ours.count()
    for delete in (lambda: ours.delete_texts(["x"]), lambda: ours.delete_documents(["x"])):
        with pytest.raises(UnsupportedError, match="text_field='page_content'"):
            delete()
    assert ours.count() == count
    bigger = TextCollection("scifact", _wider_encoder(), client=lc.client, vector_name="", text_field="page_content")
    with pytest.raises(CollectionMismatchError, match="32-dim"):
        bigger.search_text("anything")
    named = TextCollection("scifact", tiny_encoder, client=lc.client, text_field="page_content")
    with pytest.raises(CollectionMismatchError, match="no vector named 'text'"):
        named.search_text("anything")
    with pytest.raises(InvalidArgumentError, match="text_field"):
        TextCollection("scifact", tiny_encoder, client=lc.client, text_field="key")


def _wider_encoder() -> SentenceEncoder:
    from sbert_qdrant import Dense, Pooling

    transformer = testing.tiny_transformer()
    return SentenceEncoder([transformer, Pooling(transformer.dimension, "mean"), Dense(transformer.dimension, 16)])
