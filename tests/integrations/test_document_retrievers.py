"""Document retrievers for LangChain and LlamaIndex (issue 45 item 3): one hit per stored document, its chunks
quoted in reading order; LangChain's own retriever suite (``RetrieversIntegrationTests``) runs unmodified."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from qdrant_client import AsyncQdrantClient, QdrantClient

from sbert_qdrant import AsyncTextCollection, TextCollection, UnsupportedError, testing
from sbert_qdrant.integrations.langchain import SbertDocumentRetriever, SbertQdrantVectorStore

PAGES = [
    " ".join(f"Sentence {i} says how zebras cross the plain at dawn." for i in range(12)),
    "Qdrant Edge runs the real engine inside your process. " * 6,
    "Bread rises because yeast makes gas in the dough. " * 6,
    "Sunlight scatters off the air's molecules, so the sky looks blue. " * 6,
]


@functools.cache
def papers() -> TextCollection:
    coll = TextCollection("papers", testing.tiny_encoder(), client=QdrantClient(":memory:"))
    coll.upsert_documents(
        PAGES, ids=["zebra", "edge", "bread", "sky"], payloads=[{"n": i} for i in range(4)], chunk_tokens=16
    )
    return coll


class TestSbertDocumentRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return SbertDocumentRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"collection": papers()}

    @property
    def retriever_query_example(self) -> str:
        return "how do zebras cross the plain"


def test_langchain_documents_one_per_document_with_places() -> None:
    retriever = SbertDocumentRetriever(collection=papers(), k=4, search_kwargs={"chunks": 2})
    found = retriever.invoke("zebras at dawn")
    assert sorted(d.id for d in found) == ["bread", "edge", "sky", "zebra"]  # each document once
    zebra = next(d for d in found if d.id == "zebra")
    text = papers().get_document("zebra").text
    assert [text[c["start"] : c["end"]] in zebra.page_content for c in zebra.metadata["chunks"]] == [True, True]
    assert zebra.metadata["n"] == 0 and isinstance(zebra.metadata["score"], float)
    assert [d.id for d in retriever.invoke("zebras", k=1, filter={"n": 2})] == ["bread"]
    assert [d.id for d in asyncio.run(retriever.ainvoke("zebras", k=1, filter={"n": 2}))] == ["bread"]


def test_the_vectorstore_on_a_documents_collection_points_at_the_retriever() -> None:
    with pytest.raises(UnsupportedError, match="SbertDocumentRetriever"):
        SbertQdrantVectorStore(papers()).similarity_search("zebras")


def test_async_collections_serve_the_async_calls() -> None:
    async def run() -> list[Any]:
        coll = AsyncTextCollection("papers", testing.tiny_encoder(), client=AsyncQdrantClient(location=":memory:"))
        await coll.upsert_documents(PAGES[:2], ids=["zebra", "edge"], chunk_tokens=16)
        return await SbertDocumentRetriever(collection=coll, k=1).ainvoke("zebras crossing the plain")

    assert len(asyncio.run(run())) == 1
    with pytest.raises(UnsupportedError, match="ainvoke"):
        SbertDocumentRetriever(
            collection=AsyncTextCollection("x", testing.tiny_encoder(), client=AsyncQdrantClient(location=":memory:"))
        ).invoke("q")


def test_llama_index_retriever_returns_one_node_per_document() -> None:
    pytest.importorskip("llama_index.core")
    from sbert_qdrant.integrations.llama_index import SbertDocumentRetriever as LlamaRetriever

    retriever = LlamaRetriever(papers(), similarity_top_k=2, search_kwargs={"chunks": 1})
    nodes = retriever.retrieve("zebras at dawn")
    assert len(nodes) == 2 and len({n.node.node_id for n in nodes}) == 2
    expected = [(d.id, d.score) for d in papers().search_documents("zebras at dawn", limit=2, chunks=1)]
    assert [(n.node.node_id, n.score) for n in nodes] == [(str(i), s) for i, s in expected]
    assert [n.node.node_id for n in asyncio.run(retriever.aretrieve("zebras at dawn"))] == [str(i) for i, _ in expected]


def test_from_existing_collection_and_search_by_vector_as_langchain_qdrant(tmp_path: Any) -> None:
    """langchain-qdrant's QdrantVectorStore.from_existing_collection and similarity_search_by_vector, on the same
    texts and fake embeddings: the same documents in the same order."""
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_qdrant import QdrantVectorStore

    from sbert_qdrant import CollectionNotFoundError

    embeddings = DeterministicFakeEmbedding(size=16)
    texts = ["zebras at dawn", "bread and yeast", "the blue sky", "Qdrant Edge in-process"]
    client = QdrantClient(":memory:")
    SbertQdrantVectorStore.from_texts(texts, embeddings, ids=list("abcd"), collection_name="ours", client=client)
    ours = SbertQdrantVectorStore.from_existing_collection("ours", embeddings, client=client)
    folder = str(tmp_path / "theirs")
    QdrantVectorStore.from_texts(texts, embeddings, path=folder, collection_name="theirs").client.close()
    theirs = QdrantVectorStore.from_existing_collection("theirs", embeddings, path=folder)
    vector = embeddings.embed_query("the blue sky")
    mine = [d.page_content for d in ours.similarity_search_by_vector(vector, k=3)]
    assert mine == [d.page_content for d in theirs.similarity_search_by_vector(vector, k=3)]
    assert mine[0] == "the blue sky"
    found = asyncio.run(ours.asimilarity_search_by_vector(vector, k=1))
    assert [d.id for d in found] == ["c"]
    with pytest.raises(CollectionNotFoundError, match="'ours'"):
        SbertQdrantVectorStore.from_existing_collection("missing", embeddings, client=client)
