"""The names users of sentence-transformers, qdrant-client and langchain-qdrant reach for (issue 45 item 9), each
checked against the peer it copies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from flavours import Engines
from sentence_transformers import util

from sbert_qdrant import (
    InvalidArgumentError,
    SentenceEncoder,
    TextCollection,
    quantize_embeddings,
    similarity,
    similarity_pairwise,
)

TEXTS = ["How do I learn Python?", "Why is the sky blue?", "What is the capital of France?", "Best pizza in town"]


def test_similarity_as_sentence_transformers(tiny_encoder: SentenceEncoder) -> None:
    a, b = tiny_encoder.encode(TEXTS[:3], normalize=False), tiny_encoder.encode(TEXTS, normalize=False)
    theirs = {
        "cosine": (util.cos_sim, util.pairwise_cos_sim),
        "dot": (util.dot_score, util.pairwise_dot_score),
        "euclidean": (util.euclidean_sim, util.pairwise_euclidean_sim),
        "manhattan": (util.manhattan_sim, util.pairwise_manhattan_sim),
    }
    for function, (every, pairwise) in theirs.items():
        np.testing.assert_allclose(similarity(a, b, function), every(a, b).numpy(), atol=1e-5)
        np.testing.assert_allclose(similarity_pairwise(a, b[:3], function), pairwise(a, b[:3]).numpy(), atol=1e-5)
    np.testing.assert_allclose(tiny_encoder.similarity(a, b), util.cos_sim(a, b).numpy(), atol=1e-5)
    np.testing.assert_allclose(tiny_encoder.similarity_pairwise(a, b[:3]), util.pairwise_cos_sim(a, b[:3]), atol=1e-5)
    with pytest.raises(InvalidArgumentError, match="function='jaccard'"):
        similarity(a, b, "jaccard")  # type: ignore[arg-type]


def test_quantize_embeddings_as_sentence_transformers(tiny_encoder: SentenceEncoder) -> None:
    from sentence_transformers.util import quantize_embeddings as theirs

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(200, 32)).astype(np.float32)
    for to in ("float32", "int8", "uint8", "binary", "ubinary"):
        ours = quantize_embeddings(vectors, to)  # type: ignore[arg-type]
        expected = theirs(vectors, precision=to)
        assert ours.dtype == expected.dtype and ours.shape == expected.shape, to
        np.testing.assert_array_equal(ours, expected)
    calibration = rng.normal(size=(100, 32)).astype(np.float32)
    np.testing.assert_array_equal(
        quantize_embeddings(vectors[:1], "int8", calibration_embeddings=calibration),
        theirs(vectors[:1], precision="int8", calibration_embeddings=calibration),
    )
    with pytest.raises(InvalidArgumentError, match="ranges="):
        quantize_embeddings(vectors[:1], "int8")


def test_encode_takes_sentence_transformers_names(tiny_encoder: SentenceEncoder) -> None:
    raw = tiny_encoder.encode(TEXTS, normalize=False)
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    np.testing.assert_allclose(tiny_encoder.encode(TEXTS, normalize_embeddings=True), unit, atol=1e-5)
    assert isinstance(tiny_encoder.encode(TEXTS, convert_to_tensor=True), torch.Tensor)
    assert isinstance(tiny_encoder.encode_query(TEXTS, convert_to_numpy=True), np.ndarray)
    with pytest.raises(InvalidArgumentError, match=r"quantize_embeddings\(vectors, to='int8'\)"):
        tiny_encoder.encode(TEXTS, precision="int8")
    with pytest.raises(InvalidArgumentError, match="has no argument device='cpu'"):
        tiny_encoder.encode_document(TEXTS, device="cpu")


def test_list_collections(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    """As qdrant-client's get_collections: every collection of the engine, here sorted names."""
    first = make.open(tiny_encoder, "b_faq")
    assert first.list_collections() == []
    first.upsert_texts(TEXTS)
    make.open(tiny_encoder, "a_papers").upsert_documents(TEXTS[:1])
    names = first.list_collections()
    assert [n.removeprefix(make.prefix) for n in names if n.startswith(make.prefix)] == ["a_papers", "b_faq"]


QUESTIONS = ["How do I learn Python?", "Best way to learn Python?", "Why is the sky blue?", "Capital of France?"]


def test_search_offset_and_with_vectors_as_qdrant_client(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    """offset skips the best hits (query_points' offset); with_vectors brings each hit's stored vector."""
    coll = make.open(tiny_encoder)
    coll.upsert_texts(QUESTIONS, ids=["a", "b", "c", "d"])
    every = [h.id for h in coll.search_text("learn Python", limit=4)]
    assert [h.id for h in coll.search_text("learn Python", limit=2, offset=1)] == every[1:3]
    assert [h.id for h in coll.search_text("learn Python", limit=2, offset=3)] == every[3:]
    hits = coll.search_text("learn Python", limit=2, with_vectors=True)
    stored = {t.id: t.vector for t in coll.get(every, with_vectors=True)}
    for hit in hits:
        np.testing.assert_allclose(hit.vector, stored[hit.id], atol=1e-6)
    assert coll.search_text("learn Python", limit=1)[0].vector is None
    with pytest.raises(InvalidArgumentError, match="offset=-1"):
        coll.search_text("x", offset=-1)


def test_search_by_vector_and_by_stored_id(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    """By a vector: the same hits as by its text; by a stored id ("more like this"): its neighbours, itself left out
    (qdrant-client's query_points(query=point_id) leaves the point out too)."""
    coll = make.open(tiny_encoder)
    coll.upsert_texts(QUESTIONS, ids=["a", "b", "c", "d"])
    by_text = coll.search_text("learn Python", limit=3)
    by_vector = coll.search_by_vector(tiny_encoder.encode_query("learn Python"), limit=3)
    assert [h.id for h in by_vector] == [h.id for h in by_text]
    assert all(abs(x.score - y.score) < 1e-4 for x, y in zip(by_vector, by_text, strict=True))
    like_a = coll.search_similar("a", limit=3)
    assert "a" not in [h.id for h in like_a] and len(like_a) == 3
    vector_a = coll.get(["a"], with_vectors=True)[0].vector
    assert [h.id for h in like_a] == [h.id for h in coll.search_by_vector(vector_a, limit=4)][1:]
    with pytest.raises(InvalidArgumentError, match="not a stored text"):
        coll.search_similar("zzz")
    with pytest.raises(InvalidArgumentError, match="pass 32 finite numbers"):
        coll.search_by_vector([0.0] * 3)


def test_scroll_pages_as_qdrant_client(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    """scroll(scroll_filter, limit, offset) -> (page, next offset), every text once, documents' chunks never."""
    from qdrant_client import models

    coll = make.open(tiny_encoder)
    coll.upsert_texts(QUESTIONS, ids=["a", "b", "c", "d"], payloads=[{"n": i} for i in range(4)])
    coll.upsert_documents(["A long page about Python. " * 10], ids=["doc"], chunk_tokens=12)
    seen, offset, pages = [], None, 0
    while True:
        page, offset = coll.scroll(limit=3, offset=offset)
        seen += [t.id for t in page]
        pages += 1
        if offset is None:
            break
    assert sorted(seen) == ["a", "b", "c", "d"] and pages == 2
    some = models.Filter(must=[models.FieldCondition(key="n", range=models.Range(gte=2))])
    page, offset = coll.scroll(some, limit=10, with_vectors=True)
    assert sorted(t.id for t in page) == ["c", "d"] and offset is None and page[0].vector is not None


def test_location_memory_is_qdrant_clients_in_memory_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_encoder: SentenceEncoder
) -> None:
    """location=":memory:" means what qdrant-client means by it, never a folder named ":memory:"."""
    monkeypatch.chdir(tmp_path)
    with TextCollection("faq", tiny_encoder, location=":memory:") as coll:
        coll.upsert_texts(QUESTIONS, ids=["a", "b", "c", "d"])
        assert coll.search_text("sky", limit=1)[0].id == "c" and coll.list_collections() == ["faq"]
    assert not (tmp_path / ":memory:").exists()
    with TextCollection("faq", tiny_encoder, location=":memory:") as fresh:
        assert not fresh.exists()  # each one its own memory, as QdrantClient(":memory:")
