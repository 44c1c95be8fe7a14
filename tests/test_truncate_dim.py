"""Matryoshka ``truncate_dim``: vectors cut on load or per call, renormalized for a normalizing model, the cut in the
encoder's dimension and identity, so that a collection refuses an encoder cutting to another length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from sbert_qdrant import CollectionMismatchError, InvalidArgumentError, SentenceEncoder, TextCollection, testing
from sbert_qdrant.encoder import Pooling
from sbert_qdrant.protocols import same_encoder

TEXTS = ["How do I learn Python?", "Best way to learn Python?", "Why is the sky blue?", "a"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models") / "tiny-bert"
    testing.tiny_encoder().save(folder)
    return folder


def test_a_cut_encoder_says_its_size_and_keeps_unit_length(tiny_dir: Path) -> None:
    full = SentenceEncoder.load(tiny_dir, device="cpu", precision="fp32")
    cut = SentenceEncoder.load(tiny_dir, device="cpu", precision="fp32", truncate_dim=8)
    assert (full.dimension, cut.dimension, cut.output_dimension, cut.truncate_dim) == (32, 8, 32, 8)
    assert cut.normalizes and "dimension=8 (cut from 32)" in repr(cut)
    vectors = cut.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # sentence-transformers: < 1
    prefix = full.encode(TEXTS, normalize=False)[:, :8]  # the same batches: row by row, the same rows
    np.testing.assert_allclose(vectors, prefix / np.linalg.norm(prefix, axis=1, keepdims=True), atol=1e-5)
    np.testing.assert_allclose(cut.encode(TEXTS, normalize=False), prefix, atol=1e-5)  # no renormalization asked
    assert cut.encode(TEXTS[0]).shape == (8,)
    assert cut.encode_query(TEXTS).shape == cut.encode_document(TEXTS).shape == (len(TEXTS), 8)


def test_a_model_without_normalize_is_cut_only() -> None:
    transformer = testing.tiny_transformer()
    raw = SentenceEncoder([transformer, Pooling(transformer.dimension)], device="cpu", truncate_dim=5)
    full = raw.encode(TEXTS, truncate_dim=32)
    np.testing.assert_allclose(raw.encode(TEXTS), full[:, :5], atol=1e-5)
    assert not raw.normalizes


def test_truncate_dim_per_call_wins_for_that_call_only(tiny_encoder: SentenceEncoder) -> None:
    tiny_encoder.truncate_dim = 16
    assert tiny_encoder.encode(TEXTS, truncate_dim=4).shape == (len(TEXTS), 4)
    assert tiny_encoder.encode(TEXTS, truncate_dim=32).shape == (len(TEXTS), 32)  # past the encoder's own cut
    assert tiny_encoder.encode(TEXTS).shape == (len(TEXTS), 16)
    assert tiny_encoder.encode([], truncate_dim=4).shape == (0, 4)
    tiny_encoder.truncate_dim = None
    assert tiny_encoder.dimension == 32


@pytest.mark.parametrize("bad", [0, -3, 33, True, 2.0, "8"])
def test_bad_truncate_dim_is_refused_naming_it(bad: object, tiny_dir: Path, tiny_encoder: SentenceEncoder) -> None:
    expected = f"truncate_dim={bad!r} must be"
    with pytest.raises(InvalidArgumentError, match=expected) as error:
        tiny_encoder.encode(TEXTS, truncate_dim=bad)  # type: ignore[arg-type]
    assert "from 1 to 32" in str(error.value) and "None" in str(error.value)
    with pytest.raises(InvalidArgumentError, match=expected):
        SentenceEncoder.load(tiny_dir, device="cpu", truncate_dim=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=expected):
        tiny_encoder.truncate_dim = bad  # type: ignore[assignment]
    assert tiny_encoder.truncate_dim is None  # unchanged


def test_the_cut_is_part_of_the_identity(tiny_encoder: SentenceEncoder) -> None:
    full = tiny_encoder.identity
    tiny_encoder.truncate_dim = 32  # the whole vector: the same vectors, the same identity
    assert tiny_encoder.identity == full
    tiny_encoder.truncate_dim = 8
    cut = tiny_encoder.identity
    assert cut.startswith("custom[:8]@") and not same_encoder(cut, full)
    tiny_encoder.truncate_dim = 16
    assert not same_encoder(tiny_encoder.identity, cut)


def test_a_collection_refuses_an_encoder_cutting_to_another_length(tiny_dir: Path) -> None:
    client = QdrantClient(":memory:")
    full = SentenceEncoder.load(tiny_dir, device="cpu", precision="fp32")
    cut = SentenceEncoder.load(tiny_dir, device="cpu", precision="fp32", truncate_dim=8)
    with TextCollection("full", full, client=client) as coll:
        coll.upsert_texts(TEXTS)
    with (
        pytest.raises(CollectionMismatchError, match=r"32-dim .* 8-dim"),
        TextCollection("full", cut, client=client) as coll,
    ):
        coll.count()
    with TextCollection("cut", cut, client=client) as coll:  # written and searched at 8 dims
        coll.upsert_texts(TEXTS)
        assert coll.search_text(TEXTS[0], limit=1)[0].text == TEXTS[0]
        with pytest.raises(CollectionMismatchError, match=r"tiny-bert\[:8\]@"):
            coll.upsert_texts(["x"], vectors=full.encode(["x"]), vectors_from=full.identity)
    again = SentenceEncoder.load(tiny_dir, device="cpu", precision="fp32", truncate_dim=8)
    with TextCollection("cut", again, client=client) as coll:  # the same cut: the same encoder
        assert coll.count() == len(TEXTS)


def test_the_default_model_cut_to_128_keeps_its_ranking(default_model_dir: Path) -> None:
    """The real default model (not trained as Matryoshka): a cut of 128 still puts the paraphrase first."""
    cut = SentenceEncoder.load(default_model_dir, device="cpu", precision="fp32", truncate_dim=128)
    vectors = cut.encode(["How do I learn Python?", "Best way to learn Python?", "Why is the sky blue?"])
    assert vectors.shape == (3, 128)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
