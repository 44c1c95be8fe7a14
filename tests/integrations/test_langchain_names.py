"""langchain-qdrant's names accepted where they mean the same (issue 56): ``retrieval_mode``, ``path``,
``content_payload_key``, ``sparse_embedding``; and ``payloads=`` given as one dict refused in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_qdrant")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_qdrant import QdrantVectorStore, RetrievalMode

from sbert_qdrant import InvalidArgumentError, InvalidInputError, SentenceEncoder, TextCollection, UnsupportedError
from sbert_qdrant.integrations.langchain import SbertEmbeddings, SbertQdrantVectorStore

DOCS = [
    Document(page_content="The cat sat on the mat.", metadata={"source": "pets"}),
    Document(page_content="Stock markets fell sharply today.", metadata={"source": "news"}),
    Document(page_content="Zebra crossings in Oslo are painted yearly.", metadata={"source": "city"}),
]


class _Bm25Model:
    model_name = "Qdrant/bm25"


class _FastEmbedSparseLike:
    """What langchain-qdrant's FastEmbedSparse holds (its fastembed model, by name), without fastembed."""

    def __init__(self, model_name: str) -> None:
        self._model = _Bm25Model() if model_name == "Qdrant/bm25" else type("M", (), {"model_name": model_name})()


def test_from_documents_with_retrieval_mode_hybrid_path_and_bm25_end_to_end(
    tmp_path: Path, tiny_encoder: SentenceEncoder
) -> None:
    store = SbertQdrantVectorStore.from_documents(
        DOCS,
        SbertEmbeddings(encoder=tiny_encoder),
        path=str(tmp_path / "local"),
        collection_name="lc",
        retrieval_mode=RetrievalMode.HYBRID,
        sparse_embedding=_FastEmbedSparseLike("Qdrant/bm25"),
        content_payload_key="text",
    )
    try:
        assert store.search_options["mode"] == "hybrid"
        hits = store.similarity_search("zebra Oslo", k=1)
        assert [h.page_content for h in hits] == [DOCS[2].page_content]  # BM25 finds the rare words
        sparse = store.similarity_search("zebra Oslo", k=1, retrieval_mode=RetrievalMode.SPARSE)
        assert sparse[0].metadata == {"source": "city"}
    finally:
        store.close()
    assert (tmp_path / "local" / "collection" / "lc").is_dir()  # qdrant-client's local mode, as langchain-qdrant's


def test_a_langchain_qdrant_folder_is_read_through_its_own_names(tmp_path: Path) -> None:
    embedding = DeterministicFakeEmbedding(size=16)
    theirs = QdrantVectorStore.from_documents(DOCS, embedding, path=str(tmp_path / "lc"), collection_name="notes")
    theirs.client.close()
    ours = SbertQdrantVectorStore.from_existing_collection(
        "notes", embedding, path=str(tmp_path / "lc"), content_payload_key="page_content", vector_name=""
    )
    try:
        (hit,) = ours.similarity_search(DOCS[1].page_content, k=1)
        assert hit.page_content == DOCS[1].page_content
    finally:
        ours.close()


def test_names_that_cannot_mean_the_same_are_refused_in_words(
    tmp_path: Path, tiny_encoder: SentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default location, where a case not refused would write
    embedding = SbertEmbeddings(encoder=tiny_encoder)
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"sparse_embedding": _FastEmbedSparseLike("prithivida/Splade_PP_en_v1")}, UnsupportedError, "Splade"),
        ({"content_payload_key": "page_content"}, UnsupportedError, "drop content_payload_key="),
        ({"path": str(tmp_path / "a"), "location": str(tmp_path / "b")}, InvalidArgumentError, "path= and location="),
        ({"sparse_embedding": _FastEmbedSparseLike("Qdrant/bm25"), "sparse": None}, InvalidArgumentError, "pass one"),
    ]
    for options, error, words in cases:
        with pytest.raises(error, match=words):
            SbertQdrantVectorStore.from_documents(DOCS, embedding, collection_name="x", **options)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_payloads_as_one_dict_is_refused_before_anything_is_written(
    tmp_path: Path, tiny_encoder: SentenceEncoder
) -> None:
    with TextCollection("c", tiny_encoder, location=tmp_path) as coll:
        with pytest.raises(InvalidInputError, match=r"payloads=\{'a': 1\} must be a list with one item per text"):
            coll.upsert_texts(["x"], payloads={"a": 1})  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="ids='a' must be a list"):
            coll.upsert_texts(["x"], ids="a")  # type: ignore[arg-type]
        assert not coll.exists()


def test_an_encoder_passed_first_is_the_encoder(tiny_encoder: SentenceEncoder) -> None:
    """``SbertEmbeddings(encoder)``, as ``HuggingFaceEmbeddings``-style code passes a model object (issue 64)."""
    embeddings = SbertEmbeddings(tiny_encoder)
    assert embeddings.encoder is tiny_encoder and embeddings.model_name is None
    assert embeddings.embed_query("a cat") == SbertEmbeddings(encoder=tiny_encoder).embed_query("a cat")
    with pytest.raises(InvalidArgumentError, match="an encoder is given twice"):
        SbertEmbeddings(tiny_encoder, encoder=tiny_encoder)
    with pytest.raises(InvalidArgumentError, match="not both"):
        SbertEmbeddings(tiny_encoder, device="cpu")
    llama = pytest.importorskip("sbert_qdrant.integrations.llama_index")
    assert llama.SbertEmbedding(tiny_encoder).encoder is tiny_encoder


def test_fetch_k_and_k_in_search_kwargs_beside_langchain_qdrant(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    """langchain-qdrant refuses ``fetch_k`` in a similarity search and LangChain's retriever drops ``k=`` given
    beside ``search_kwargs``; here ``fetch_k`` is refused where it would be ignored (honoured by MMR and hybrid),
    and ``as_retriever(k=2)`` honoured, a second ``k`` refused: nothing is silently dropped or overridden."""
    texts = [f"note {i} about cats and dogs" for i in range(12)]
    theirs = QdrantVectorStore.from_texts(texts, DeterministicFakeEmbedding(size=16), location=":memory:")
    ours = SbertQdrantVectorStore.from_texts(texts, SbertEmbeddings(tiny_encoder), location=str(tmp_path / "q"))
    try:
        similarity = {"k": 2, "fetch_k": 20}
        with pytest.raises(AssertionError, match="fetch_k"):  # qdrant-client's query_points: unknown argument
            theirs.as_retriever(search_kwargs=similarity).invoke("cats")
        with pytest.raises(InvalidArgumentError, match=r"fetch_k=20 does not apply to a similarity search"):
            ours.as_retriever(search_kwargs=similarity).invoke("cats")
        for store in (theirs, ours):  # MMR reads fetch_k in both
            assert len(store.as_retriever(search_type="mmr", search_kwargs=similarity).invoke("cats")) == 2
        assert len(ours.as_retriever(search_kwargs={**similarity, "mode": "hybrid"}).invoke("cats")) == 2
        assert len(theirs.as_retriever(k=2).invoke("cats")) == 4  # LangChain's retriever drops k=2 ...
        assert len(ours.as_retriever(k=2).invoke("cats")) == 2  # ... ours takes it into search_kwargs
        assert len(theirs.as_retriever(k=2, search_kwargs={"k": 5}).invoke("cats")) == 5  # k=2 lost
        with pytest.raises(InvalidArgumentError, match=r"as_retriever\(k=2, search_kwargs=\{'k': 5\}\) sets k twice"):
            ours.as_retriever(k=2, search_kwargs={"k": 5})
        assert len(ours.as_retriever(search_kwargs={"k": 5}).invoke("cats", k=3)) == 3  # per call, as LangChain's
    finally:
        ours.close()
    from sbert_qdrant.integrations.langchain import SbertDocumentRetriever

    with TextCollection("docs", tiny_encoder, location=tmp_path / "d") as coll:
        with pytest.raises(InvalidArgumentError, match=r"k=2 and search_kwargs=\{'k': 5\} both set"):
            SbertDocumentRetriever(collection=coll, k=2, search_kwargs={"k": 5})
        assert SbertDocumentRetriever(collection=coll, search_kwargs={"k": 5})._request({}).limit == 5


MEANT = {"k": "limit", "top_k": "limit", "similarity_top_k": "limit", "filter": "query_filter"}
MEANT |= {"retrieval_mode": "mode", "fetch_k": "candidates", "limt": "limit", "query_filtr": "query_filter"}


@pytest.mark.parametrize(("theirs", "ours"), MEANT.items())
def test_our_api_says_which_option_a_peers_name_means(
    tmp_path: Path, tiny_encoder: SentenceEncoder, theirs: str, ours: str
) -> None:
    said = rf"^{theirs}= is not a search option \(did you mean {ours}="
    with TextCollection("c", tiny_encoder, location=tmp_path) as coll, pytest.raises(InvalidArgumentError, match=said):
        coll.search_text("cats", **{theirs: 2})
