"""The LangChain integration beyond the standard suites: ids, filters, MMR, hybrid, relevance, retrievers, errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from qdrant_client import AsyncQdrantClient, QdrantClient, models
from same_hits import assert_ranked_like, assert_same_hits

from sbert_qdrant import (
    AsyncTextCollection,
    Hit,
    InvalidArgumentError,
    InvalidInputError,
    SentenceEncoder,
    TextCollection,
    UnsupportedError,
)
from sbert_qdrant.integrations.langchain import (
    LangChainEncoder,
    SbertEmbeddings,
    SbertQdrantVectorStore,
    as_encoder,
    document_id,
)

DOCS = [
    Document(page_content="The cat sat on the mat.", metadata={"source": "pets", "year": 2020}),
    Document(page_content="Dogs are loyal companions.", metadata={"source": "pets", "year": 2021}),
    Document(page_content="Stock markets fell sharply today.", metadata={"source": "news", "year": 2021}),
    Document(page_content="The central bank raised interest rates.", metadata={"source": "news", "year": 2022}),
]


@pytest.fixture(params=["edge", "memory"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, tiny_encoder: SentenceEncoder
) -> Iterator[SbertQdrantVectorStore]:
    engine = {"location": tmp_path / "qdrant"} if request.param == "edge" else {"client": QdrantClient(":memory:")}
    vs = SbertQdrantVectorStore(TextCollection("lc", tiny_encoder, **engine))
    yield vs
    vs.close()


def hits(scored: list[tuple[Document, float]]) -> list[Hit]:
    """LangChain's (document, score) pairs as hits, to compare two answers with ``same_hits``."""
    return [Hit(d.id, s, d.page_content, d.metadata) for d, s in scored]


def test_embeddings_use_the_encoders_prompts(tiny_encoder: SentenceEncoder) -> None:
    tiny_encoder.prompts = {"query": "query: ", "document": "passage: "}
    embeddings = SbertEmbeddings(encoder=tiny_encoder)
    query = embeddings.embed_query("what is a cat")
    docs = embeddings.embed_documents(["what is a cat"])
    assert np.allclose(query, tiny_encoder.encode("what is a cat", prompt="query: "), atol=1e-6)
    assert np.allclose(docs[0], tiny_encoder.encode("what is a cat", prompt="passage: "), atol=1e-6)
    assert embeddings.embed_documents([]) == []
    assert asyncio.run(embeddings.aembed_query("what is a cat")) == pytest.approx(query, abs=1e-6)  # another thread


def test_embeddings_arguments_are_checked(tiny_encoder: SentenceEncoder) -> None:
    with pytest.raises(InvalidArgumentError, match="not both"):
        SbertEmbeddings("some-model", encoder=tiny_encoder)
    with pytest.raises(InvalidArgumentError, match=r"\(truncate_dim=\), not both"):
        SbertEmbeddings(encoder=tiny_encoder, truncate_dim=8)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        SbertEmbeddings(encoder=tiny_encoder, batch_size=0)
    with pytest.raises(InvalidInputError, match="not str"):
        SbertEmbeddings(encoder=tiny_encoder).embed_query(["a list"])  # type: ignore[arg-type]


def test_ids_are_deterministic_and_readding_overwrites(store: SbertQdrantVectorStore) -> None:
    first = store.add_documents(DOCS)
    again = store.add_documents(DOCS)
    assert first == again == [document_id(d.page_content, d.metadata) for d in DOCS]
    assert store.collection is not None and store.collection.count() == len(DOCS)
    # the same text with other metadata is another document; the same document twice in one call is written once
    more = store.add_texts(["Dogs are loyal companions."] * 2, [{"source": "quotes"}] * 2)
    assert more[0] == more[1] != first[1]
    assert store.collection.count() == len(DOCS) + 1
    # own ids win and are kept as given
    assert store.add_texts(["A brand new text."], ids=["my-id"]) == ["my-id"]
    assert store.get_by_ids(["my-id", "missing"]) == [Document(id="my-id", page_content="A brand new text.")]


def test_filters_qdrant_and_dict(store: SbertQdrantVectorStore) -> None:
    store.add_documents(DOCS)
    news = store.similarity_search("money", k=4, filter={"source": "news"})
    assert {d.metadata["source"] for d in news} == {"news"} and len(news) == 2
    recent = models.Filter(must=[models.FieldCondition(key="year", range=models.Range(gte=2021))])
    assert {d.metadata["year"] for d in store.similarity_search("anything", k=10, filter=recent)} == {2021, 2022}
    as_dict = {"must": [{"key": "year", "range": {"gte": 2021}}]}  # models.Filter's dict form, as TextCollection takes
    assert_same_hits(*(hits(store.similarity_search_with_score("anything", k=10, filter=f)) for f in (recent, as_dict)))
    either = store.similarity_search("anything", k=10, filter={"year": [2020, 2022]})
    assert sorted(d.metadata["year"] for d in either) == [2020, 2022]
    with pytest.raises(InvalidArgumentError, match="dict filter"):
        store.similarity_search("x", filter={"year": 2.5})
    said = r"fliter= is not a search option \(did you mean filter=\?\); use LangChain's k, filter"
    with pytest.raises(InvalidArgumentError, match=said):
        store.similarity_search("x", fliter={"year": 2020})


def test_delete_by_ids_and_filter(store: SbertQdrantVectorStore) -> None:
    ids = store.add_documents(DOCS)
    assert store.delete([ids[0]]) is True
    assert store.delete(filter={"source": "news"}) is True
    assert [d.page_content for d in store.similarity_search("anything", k=10)] == ["Dogs are loyal companions."]
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        store.delete()


def test_mmr_and_relevance_scores_and_retrievers(store: SbertQdrantVectorStore) -> None:
    store.add_documents(DOCS)
    mmr = store.max_marginal_relevance_search("cats and dogs", k=2, fetch_k=4, lambda_mult=0.3)
    assert len(mmr) == 2 and len({d.id for d in mmr}) == 2
    relevance = store.similarity_search_with_relevance_scores("cats", k=4)
    assert all(0.0 <= score <= 1.0 for _, score in relevance)
    scored = store.similarity_search_with_score("cats", k=4)
    assert_ranked_like([d.id for d, _ in relevance], hits(scored))  # another call: near-equal scores may swap
    assert [(s + 1) / 2 for _, s in scored] == pytest.approx([s for _, s in relevance], abs=1e-6)
    cut = (scored[0][1] + scored[1][1]) / 2
    assert [d for d, _ in store.similarity_search_with_score("cats", k=4, score_threshold=cut)] == [scored[0][0]]
    retriever = store.as_retriever(search_kwargs={"k": 2, "filter": {"source": "pets"}})
    assert {d.metadata["source"] for d in retriever.invoke("pets")} == {"pets"}
    assert len(store.as_retriever(search_type="mmr", search_kwargs={"k": 3}).invoke("money")) == 3
    with pytest.raises(InvalidArgumentError, match="lambda_mult"):
        store.max_marginal_relevance_search("cats", lambda_mult=2)


def test_hybrid_mode(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    store = SbertQdrantVectorStore(TextCollection("lc", tiny_encoder, location=tmp_path / "q"), mode="hybrid")
    store.add_documents(DOCS)
    hits = store.similarity_search("interest rates", k=2)
    assert hits[0].page_content == "The central bank raised interest rates."
    assert store.similarity_search("interest rates", k=1, mode="sparse")[0].page_content == hits[0].page_content
    with pytest.raises(NotImplementedError, match="mode='dense'"):
        store.similarity_search_with_relevance_scores("rates")
    store.close()


def test_reserved_metadata_keys_fail_clearly(store: SbertQdrantVectorStore) -> None:
    with pytest.raises(InvalidInputError, match="reserved key"):
        store.add_texts(["hello there"], [{"text": "clash"}])
    with pytest.raises(InvalidArgumentError, match="metadatas has 1 items but texts has 2"):
        store.add_texts(["a", "b"], [{}])


def test_empty_store_reads_as_empty(store: SbertQdrantVectorStore) -> None:
    assert store.similarity_search("x") == []
    assert store.max_marginal_relevance_search("x") == []
    assert store.get_by_ids(["1"]) == []
    assert store.delete(["1"]) is True


def test_any_langchain_embeddings_through_langchain_encoder(tmp_path: Path) -> None:
    fake = DeterministicFakeEmbedding(size=8)
    encoder = as_encoder(fake)
    assert isinstance(encoder, LangChainEncoder) and encoder.dimension == 8
    store = SbertQdrantVectorStore.from_documents(DOCS, fake, location=tmp_path / "q")
    assert store.embeddings is fake
    assert store.similarity_search(DOCS[2].page_content, k=1)[0].page_content == DOCS[2].page_content
    assert store.collection is not None
    with pytest.raises(UnsupportedError, match="no tokenizer"):
        store.collection.upsert_documents(["a long document"])
    store.close()
    wrong = LangChainEncoder(fake, dimension=5)
    with pytest.raises(InvalidInputError, match="expected 5 values"):
        wrong.encode_document(["x"])


def test_embeddings_property_wraps_the_collections_encoder(store: SbertQdrantVectorStore) -> None:
    assert isinstance(store.embeddings, SbertEmbeddings)
    assert store.collection is not None and store.embeddings.encoder is store.collection.encoder
    assert "SbertQdrantVectorStore" in store._get_retriever_tags()


def test_async_store_native_and_sync_refused(tiny_encoder: SentenceEncoder) -> None:
    async def scenario() -> None:
        client = AsyncQdrantClient(location=":memory:")
        store = SbertQdrantVectorStore(AsyncTextCollection("lc", tiny_encoder, client=client))
        ids = await store.aadd_documents(DOCS)
        assert ids == await store.aadd_documents(DOCS)
        news = await store.asimilarity_search("money", k=4, filter={"source": "news"})
        assert {d.metadata["source"] for d in news} == {"news"}
        assert len(await store.amax_marginal_relevance_search("money", k=2)) == 2
        assert len(await store.as_retriever(search_kwargs={"k": 3}).ainvoke("pets")) == 3
        await store.adelete(filter={"source": "news"})
        assert sorted(d.id for d in await store.aget_by_ids(ids)) == sorted(ids[:2])
        with pytest.raises(UnsupportedError, match="asimilarity_search"):
            store.similarity_search("money")
        await store.aclose()
        await client.close()

    asyncio.run(scenario())


def test_sync_collection_serves_async_calls_in_a_thread(store: SbertQdrantVectorStore) -> None:
    async def scenario() -> None:
        ids = await store.aadd_documents(DOCS)
        assert [d.id for d in await store.aget_by_ids(ids)] == ids
        assert len(await store.asimilarity_search("money", k=2)) == 2

    asyncio.run(scenario())


def test_constructor_checks(tiny_encoder: SentenceEncoder) -> None:
    with pytest.raises(InvalidArgumentError, match="TextCollection or an AsyncTextCollection"):
        SbertQdrantVectorStore("faq")  # type: ignore[arg-type]
    coll = AsyncTextCollection("lc", tiny_encoder, client=AsyncQdrantClient(location=":memory:"))
    with pytest.raises(InvalidArgumentError, match="async_collection"):
        SbertQdrantVectorStore(coll, async_collection=coll)


def test_embeddings_take_the_load_options(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    tiny_encoder.save(tmp_path / "tiny")
    embeddings = SbertEmbeddings(tmp_path / "tiny", device="cpu", precision="fp32", truncate_dim=8)
    assert embeddings.encoder.dimension == 8 and len(embeddings.embed_query("a cat")) == 8
    assert embeddings.model_name == str(tmp_path / "tiny")
