"""Late interaction: the MultiVectorEncoder reads and writes sentence-transformers 6's multi-vector folder format
(checked against sentence-transformers itself), and a collection stores its token vectors in a multivector slot
and re-scores a search's candidates by MaxSim in the engine (``rescore=``), on every engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from flavours import Engines

from sbert_qdrant import MultiVectorEncoder, testing
from sbert_qdrant.encoder.layers import Dense
from sbert_qdrant.errors import InvalidArgumentError
from sbert_qdrant.training import Example, MaxSimRankingLoss, Trainer, TrainingConfig, make_batch

TEXTS = ["How do I learn Python?", "Why is the sky blue?", "Best pizza in Naples", "Learning to code in Python"]


def _tiny(pool_factor: int = 1) -> MultiVectorEncoder:
    """A tiny random multi-vector model: the tiny BERT, a 16-dim token projection, unit tokens, punctuation skipped."""
    transformer = testing.tiny_transformer()
    projection = Dense(transformer.dimension, 16, bias=False)
    skip = frozenset(transformer.tokenizer.convert_tokens_to_ids([",", ".", "?"]))
    return MultiVectorEncoder(transformer, projection, True, skip, "tiny-colbert", pool_factor, "cpu")


def _sentence_transformers_model(folder: Path) -> object:
    st = pytest.importorskip("sentence_transformers")
    return st.MultiVectorEncoder(str(folder), device="cpu")


def test_the_folder_format_is_sentence_transformers_6s_both_ways(tmp_path: Path) -> None:
    ours = _tiny()
    ours.save(tmp_path / "colbert")
    theirs = _sentence_transformers_model(tmp_path / "colbert")
    ours_docs, theirs_docs = ours.encode_document(TEXTS), theirs.encode_document(TEXTS, convert_to_numpy=True)  # type: ignore[attr-defined]
    for mine, other in zip(ours_docs, theirs_docs, strict=True):
        assert mine.shape == np.asarray(other).shape  # the same tokens kept (the skiplist left out)
        assert np.allclose(mine, np.asarray(other), atol=1e-4)
    theirs.save(str(tmp_path / "resaved"))  # type: ignore[attr-defined]
    again = MultiVectorEncoder.load(tmp_path / "resaved", device="cpu")
    assert (again.dimension, again.normalizes, again.skiplist_ids) == (16, True, ours.skiplist_ids)
    query = again.encode_query(["pizza?"])[0]
    assert np.allclose(query, ours.encode_query(["pizza?"])[0], atol=1e-5)
    assert len(query) == len(ours.transformer.tokenize(["pizza?"])[0][0])  # a query keeps every token
    assert again.identity == ours.identity or again.identity.split("@")[1] == ours.identity.split("@")[1]


def test_token_pooling_keeps_fewer_vectors_close_to_the_tokens() -> None:
    full, pooled = _tiny().encode_document(TEXTS), _tiny(pool_factor=2).encode_document(TEXTS)
    for whole, fewer in zip(full, pooled, strict=True):
        assert len(fewer) == max(2, -(-len(whole) // 2))
        assert np.allclose(np.linalg.norm(fewer, axis=1), 1.0, atol=1e-5)
        assert (whole @ fewer.T).max(axis=1).min() > 0.5  # every token has a pooled vector near it
    with pytest.raises(InvalidArgumentError, match="pool_factor=0"):
        _tiny(pool_factor=0)


def test_a_collection_rescored_by_maxsim_in_the_engine(make: Engines) -> None:
    dense, tokens = testing.tiny_encoder(), _tiny()
    coll = make.open(dense, named_vectors={"tokens": tokens})
    coll.upsert_texts(TEXTS, ids=["a", "b", "c", "d"])
    slot = coll.layout.slot("tokens")
    assert (slot.kind, slot.size, slot.index, slot.filled_by) == ("multivector", 16, False, tokens.identity)
    query = "learning Python"
    for mode in ("dense", "hybrid"):
        hits = coll.search_text(query, limit=4, mode=mode, rescore="tokens", candidates=4)
        q = tokens.encode_query([query])[0]
        docs = tokens.encode_document(TEXTS)
        maxsim = {key: tokens.similarity(q, doc) for key, doc in zip("abcd", docs, strict=True)}
        assert [h.id for h in hits] == sorted(maxsim, key=lambda k: -maxsim[k])
        assert [h.score for h in hits] == pytest.approx(sorted(maxsim.values(), reverse=True), rel=1e-3)
    with pytest.raises(InvalidArgumentError, match="names no multivector slot"):
        coll.search_text(query, rescore="text")
    with pytest.raises(InvalidArgumentError, match="cannot be combined with diversity="):
        coll.search_text(query, rescore="tokens", diversity=0.5)
    with pytest.raises(InvalidArgumentError, match="fills a multivector slot"):
        make.open(dense, name="other", layout=coll.layout, named_vectors={"tokens": testing.tiny_encoder(seed=3)})


def test_reembed_fills_a_token_slot_in_the_same_pass(make: Engines) -> None:
    dense, tokens = testing.tiny_encoder(), _tiny()
    coll = make.open(dense)
    coll.upsert_texts(TEXTS, ids=["a", "b", "c", "d"])
    coll.reembed(make.prefix + "with-tokens", dense, named_vectors={"tokens": tokens})
    moved = make.open(dense, name="with-tokens", named_vectors={"tokens": tokens})
    assert moved.layout.slot("tokens").kind == "multivector"
    q = tokens.encode_query(["learning Python"])[0]
    maxsim = {key: tokens.similarity(q, doc) for key, doc in zip("abcd", tokens.encode_document(TEXTS), strict=True)}
    hits = moved.search_text("learning Python", limit=4, mode="hybrid", rescore="tokens", candidates=4)
    assert [h.id for h in hits] == sorted(maxsim, key=lambda k: -maxsim[k])


def test_the_training_free_variant_reads_the_encoders_own_token_vectors() -> None:
    encoder = testing.tiny_encoder()
    raw = MultiVectorEncoder.from_encoder(encoder)
    (tokens,) = raw.encode_document(["Why is the sky blue?"])
    assert tokens.shape == (len(encoder.transformer.tokenize(["Why is the sky blue?"])[0][0]), encoder.dimension)
    assert np.allclose(np.linalg.norm(tokens, axis=1), 1.0, atol=1e-5)


TRIPLETS = [
    ("learn python", "Learning to code in Python", "Best pizza in Naples"),
    ("sky colour", "Why is the sky blue?", "How do I learn Python?"),
    ("pizza place", "Best pizza in Naples", "Why is the sky blue?"),
    ("coding lessons", "How do I learn Python?", "Best pizza in Naples"),
]


def test_maxsim_training_lowers_the_loss_and_saves_a_folder_that_reloads_equal(tmp_path: Path) -> None:
    dense = testing.tiny_encoder()
    tokens = MultiVectorEncoder.from_encoder(dense, dimension=16)
    loss = MaxSimRankingLoss(tokens, scale=4.0)
    examples = [Example(t) for t in TRIPLETS]
    batch = make_batch(loss, examples)
    with torch.no_grad():
        scores = loss.maxsim(batch)
    q = tokens.encode_query([TRIPLETS[0][0]])[0]
    negative = tokens.encode_document([TRIPLETS[2][1]])[0]  # the third positive, a candidate of the first query
    assert scores.shape == (4, 8)
    assert float(scores[0, 2]) == pytest.approx(tokens.similarity(q, negative), rel=1e-4)
    with torch.no_grad():
        before = float(loss(batch))
    frozen = [p.detach().clone() for p in tokens.transformer.parameters()]
    config = TrainingConfig(epochs=20, batch_size=4, learning_rate=1e-2, warmup_ratio=0.0, show_progress_bar=False)
    Trainer(tokens, [(loss, examples)], config, output_dir=tmp_path / "model").fit()
    with torch.no_grad():
        assert float(loss(batch)) < before
    assert all(torch.equal(a, b) for a, b in zip(frozen, tokens.transformer.parameters(), strict=True))
    again = MultiVectorEncoder.load(tmp_path / "model", device="cpu")
    for mine, saved in zip(tokens.encode_document(TEXTS), again.encode_document(TEXTS), strict=True):
        assert np.allclose(mine, saved, atol=1e-5)
    assert again.dimension == 16
    with pytest.raises(InvalidArgumentError, match="leaves nothing to train"):
        MaxSimRankingLoss(MultiVectorEncoder.from_encoder(dense))
    with pytest.raises(InvalidArgumentError, match="dimension=0"):
        MultiVectorEncoder.from_encoder(dense, dimension=0)
