"""The LlamaIndex recipe: SbertEmbedding with LlamaIndex's own QdrantVectorStore, sync and async, on real documents
(BEIR SciFact abstracts): build a VectorStoreIndex, query with a metadata filter, delete by ref_doc_id, ingest again
without duplicates; and the collection it wrote, read by TextCollection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("llama_index.vector_stores.qdrant")

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from sbert_qdrant import InvalidArgumentError, SentenceEncoder, TextCollection
from sbert_qdrant.integrations.llama_index import SbertEmbedding, node_id

DATA = Path(__file__).parents[1] / "data" / "scifact_sample.jsonl"
SHORT = MetadataFilters(filters=[MetadataFilter(key="length", value="short")])


@pytest.fixture(scope="module")
def scifact() -> tuple[list[Document], list[str]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    docs = [
        Document(
            text=r["text"], id_=f"scifact-{r['_id']}", metadata={"length": "short" if len(r["text"]) < 1200 else "long"}
        )
        for r in rows
        if r["kind"] == "doc"
    ][:16]
    return docs, [r["text"] for r in rows if r["kind"] == "query"]


@pytest.fixture
def embedding(tiny_encoder: SentenceEncoder) -> SbertEmbedding:
    return SbertEmbedding(encoder=tiny_encoder)


def splitter(embedding: SbertEmbedding) -> SentenceSplitter:
    """Chunks the encoder reads whole, cut by its own tokenizer, with ids that are the same on every run."""
    return SentenceSplitter(
        chunk_size=embedding.max_tokens, chunk_overlap=4, tokenizer=embedding.tokenize, id_func=node_id
    )


def points_of(client: QdrantClient, ref_doc_id: str) -> int:
    match = models.FieldCondition(key="doc_id", match=models.MatchValue(value=ref_doc_id))
    return client.count("scifact", count_filter=models.Filter(must=[match]), exact=True).count


def test_embedding_prompts_and_arguments(tiny_encoder: SentenceEncoder) -> None:
    tiny_encoder.prompts = {"query": "query: ", "document": "passage: "}
    embedding = SbertEmbedding(encoder=tiny_encoder, embed_batch_size=4)
    assert embedding.get_query_embedding("a cat") == pytest.approx(
        tiny_encoder.encode("a cat", prompt="query: ").tolist(), abs=1e-6
    )
    assert embedding.get_text_embedding_batch(["a cat", "a dog"])[1] == pytest.approx(
        tiny_encoder.encode("a dog", prompt="passage: ").tolist(), abs=1e-6
    )
    assert embedding.max_tokens == tiny_encoder.max_seq_length - 2 - len(embedding.tokenize("passage: "))
    with pytest.raises(InvalidArgumentError, match="not both"):
        SbertEmbedding("some-model", encoder=tiny_encoder)
    with pytest.raises(InvalidArgumentError, match=r"\(device=\), not both"):
        SbertEmbedding(encoder=tiny_encoder, device="cpu")


def test_embedding_takes_the_load_options(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    tiny_encoder.save(tmp_path / "tiny")
    embedding = SbertEmbedding(str(tmp_path / "tiny"), device="cpu", truncate_dim=8, embed_batch_size=4)
    assert embedding.encoder.dimension == 8 and len(embedding.get_query_embedding("a cat")) == 8
    assert embedding.embed_batch_size == 4  # the other keywords still reach BaseEmbedding


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")
def test_sync_index_filter_delete_reingest(
    scifact: tuple[list[Document], list[str]], embedding: SbertEmbedding, tiny_encoder: SentenceEncoder
) -> None:
    docs, queries = scifact
    client = QdrantClient(":memory:")
    store = QdrantVectorStore("scifact", client=client)
    index = VectorStoreIndex.from_documents(
        docs,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embedding,
        transformations=[splitter(embedding)],
    )
    total = client.count("scifact").count
    assert total > len(docs)  # several chunks per abstract

    found = index.as_retriever(similarity_top_k=5, filters=SHORT).retrieve(queries[0])
    assert len(found) == 5 and all(n.node.metadata["length"] == "short" for n in found)

    # TextCollection searches what LlamaIndex wrote (its unnamed vector; "text-dense" with enable_hybrid=True): the
    # same nodes; LlamaIndex keeps the text inside the node's JSON ("_node_content"), not in a field of its own
    ours = TextCollection("scifact", tiny_encoder, client=client, vector_name="")
    plain = index.as_retriever(similarity_top_k=5).retrieve(queries[1])
    hits = ours.search_text(queries[1], limit=5)
    assert [h.id for h in hits] == [n.node.node_id for n in plain]
    assert [h.score for h in hits] == pytest.approx([n.score for n in plain], abs=1e-5)
    assert [json.loads(h.payload["_node_content"])["text"] for h in hits] == [n.node.get_content() for n in plain]
    assert [h.payload["doc_id"] for h in hits] == [n.node.ref_doc_id for n in plain]

    first = docs[0].id_
    chunks = points_of(client, first)
    index.delete_ref_doc(first)
    assert points_of(client, first) == 0 and client.count("scifact").count == total - chunks

    # a new process (a fresh index over the same collection) ingesting the same documents: no duplicates
    again = VectorStoreIndex.from_documents(
        docs,
        storage_context=StorageContext.from_defaults(vector_store=QdrantVectorStore("scifact", client=client)),
        embed_model=embedding,
        transformations=[splitter(embedding)],
    )
    assert client.count("scifact").count == total
    # an edited document replaces its chunks; unchanged ones are skipped
    edited = Document(text=docs[1].text[:200], id_=docs[1].id_, metadata=docs[1].metadata)
    assert again.refresh_ref_docs([docs[0], edited]) == [False, True]
    assert points_of(client, docs[1].id_) == len(splitter(embedding).get_nodes_from_documents([edited]))


async def test_async_index_filter_delete_reingest(
    scifact: tuple[list[Document], list[str]], embedding: SbertEmbedding
) -> None:
    docs, queries = scifact
    aclient = AsyncQdrantClient(location=":memory:")
    store = QdrantVectorStore("scifact", aclient=aclient)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embedding, transformations=[splitter(embedding)])
    for doc in docs:
        await index.ainsert(doc)
    total = (await aclient.count("scifact")).count
    assert total > len(docs)

    found = await index.as_retriever(similarity_top_k=5, filters=SHORT).aretrieve(queries[0])
    assert len(found) == 5 and all(n.node.metadata["length"] == "short" for n in found)

    await index.adelete_ref_doc(docs[0].id_)
    assert (await aclient.count("scifact")).count < total
    for doc in docs:  # ingest everything again: the deleted one comes back, the others are overwritten in place
        await index.ainsert(doc)
    assert (await aclient.count("scifact")).count == total
    await aclient.close()
