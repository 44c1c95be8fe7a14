"""The names users of sentence-transformers, qdrant-client and langchain-qdrant reach for (issue 45 item 9), each
checked against the peer it copies."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flavours import Engines
from sentence_transformers import util

from sbert_qdrant import InvalidArgumentError, SentenceEncoder, quantize_embeddings, similarity, similarity_pairwise

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
