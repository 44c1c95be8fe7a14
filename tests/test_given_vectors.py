"""Vectors encoded elsewhere (``upsert_texts(..., vectors_from=)``) are written like the collection's own, checked
first; the encoder's identity is recorded with a collection and another model's vectors or searches are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flavours import Engines

from sbert_qdrant import (
    CollectionMismatchError,
    InvalidArgumentError,
    InvalidInputError,
    SentenceEncoder,
    TextRecord,
    testing,
)
from sbert_qdrant.encoder import Dense, Normalize, Pooling
from sbert_qdrant.protocols import same_encoder

TEXTS = ["How do I learn Python?", "Why is the sky blue?", "What is the capital of France?", "Best pizza in town"]
PAYLOADS = [{"n": i} for i in range(len(TEXTS))]


def stored(coll: Any, ids: list[Any]) -> dict[Any, tuple[str | None, dict[str, Any], np.ndarray]]:
    return {t.id: (t.text, t.payload, t.vector) for t in coll.get(ids, with_vectors=True)}


def test_given_vectors_store_what_the_collection_would(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    own, given = make.open(tiny_encoder, "own"), make.open(tiny_encoder, "given")
    ids = own.upsert_texts(TEXTS, payloads=PAYLOADS, batch_size=3)
    vectors = tiny_encoder.encode_document(TEXTS)
    result = given.upsert_texts(
        TEXTS, payloads=PAYLOADS, batch_size=3, vectors=vectors, vectors_from=tiny_encoder.identity
    )
    assert list(result) == list(ids) and result.written == len(TEXTS)
    mine, theirs = stored(own, ids), stored(given, ids)
    for key in ids:
        assert mine[key][:2] == theirs[key][:2]
        assert np.allclose(mine[key][2], theirs[key][2], atol=1e-5)
    assert given.search_text("sky colour blue", limit=1, mode="sparse")[0].text == "Why is the sky blue?"  # BM25 here
    for mode in ("dense", "hybrid"):
        scores = [{h.id: h.score for h in c.search_text("sky colour blue", limit=4, mode=mode)} for c in (own, given)]
        assert scores[0].keys() == scores[1].keys(), mode
        assert all(abs(scores[0][key] - scores[1][key]) < 1e-3 for key in scores[0]), mode


def test_streamed_records_carry_their_vectors_and_skip_what_is_stored(
    make: Engines, tiny_encoder: SentenceEncoder
) -> None:
    coll = make.open(tiny_encoder)
    vectors = tiny_encoder.encode_document(TEXTS)
    records = [TextRecord(t, {"n": i}, f"id{i}", v) for i, (t, v) in enumerate(zip(TEXTS, vectors, strict=True))]
    first = coll.upsert_texts(iter(records[:2]), vectors_from=tiny_encoder.identity)
    again = coll.upsert_texts(
        iter([{"text": r.text, "id": r.id, "vector": r.vector} for r in records]),
        vectors_from=tiny_encoder.identity,
        on_conflict="skip",
    )
    assert (first.written, again.written, again.skipped) == (2, 2, 2)
    assert coll.count() == len(TEXTS)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (lambda v: v[:, :-1], r"vectors\[0\] has shape"),
        (lambda v: np.where(np.arange(len(v))[:, None] == 2, np.nan, v), r"vectors\[2\] holds NaN"),
        (lambda v: v * 3, r"vectors\[0\] has length 3"),
        (lambda v: v[:-1], "vectors has 3 items but texts has 4"),
    ],
)
def test_bad_vectors_write_nothing(make: Engines, tiny_encoder: SentenceEncoder, bad: Any, match: str) -> None:
    coll = make.open(tiny_encoder)
    vectors = bad(tiny_encoder.encode_document(TEXTS))
    with pytest.raises(InvalidInputError, match=match):
        coll.upsert_texts(TEXTS, vectors=vectors, vectors_from=tiny_encoder.identity)
    assert not coll.exists()


def test_vectors_need_their_encoder_named(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    vectors = tiny_encoder.encode_document(TEXTS)
    with pytest.raises(InvalidArgumentError, match="vectors= needs vectors_from="):
        coll.upsert_texts(TEXTS, vectors=vectors)
    with pytest.raises(InvalidInputError, match=r"texts\[0\] has a vector, but the call has no vectors_from="):
        coll.upsert_texts([{"text": TEXTS[0], "vector": vectors[0]}])
    with pytest.raises(InvalidInputError, match=r"texts\[1\] has no vector"):
        coll.upsert_texts([{"text": TEXTS[0], "vector": vectors[0]}, TEXTS[1]], vectors_from=tiny_encoder.identity)
    other = testing.tiny_encoder(seed=1)
    with pytest.raises(CollectionMismatchError, match=f"the vectors come from encoder {other.identity}"):
        coll.upsert_texts(TEXTS, vectors=other.encode_document(TEXTS), vectors_from=other.identity)
    assert not coll.exists()


def test_a_collection_refuses_another_encoder(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    make.open(tiny_encoder).upsert_texts(TEXTS)
    same_weights = testing.tiny_encoder(seed=0)
    assert make.open(same_weights).search_text("sky", limit=1)  # another instance of the same weights
    other = make.open(testing.tiny_encoder(seed=1))
    with pytest.raises(CollectionMismatchError, match=f"written by encoder {tiny_encoder.identity}"):
        other.search_text("sky")


def test_a_collection_refuses_another_pooling_or_head(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    """Issue 45 item 7: the same weights pooled by CLS (or with another Dense activation) make other vectors."""
    make.open(tiny_encoder).upsert_texts(TEXTS)
    transformer = tiny_encoder.transformer
    cls_pooled = SentenceEncoder([transformer, Pooling(transformer.dimension, "cls"), Normalize()], device="cpu")
    assert cls_pooled.identity.split("-")[0] == tiny_encoder.identity.split("-")[0]  # same weights and prompt
    with pytest.raises(CollectionMismatchError, match=f"written by encoder {tiny_encoder.identity}"):
        make.open(cls_pooled).search_text("sky")
    torch.manual_seed(0)
    tanh, identity = Dense(32, 32, activation="tanh"), Dense(32, 32)
    identity.load_state_dict(tanh.state_dict())
    heads = [SentenceEncoder([transformer, Pooling(32), d, Normalize()], device="cpu") for d in (tanh, identity)]
    assert heads[0].identity != heads[1].identity
    unnormalized = SentenceEncoder([transformer, Pooling(32)], device="cpu")
    assert unnormalized.identity != tiny_encoder.identity
    longer = testing.tiny_encoder()
    longer.max_seq_length = 16  # cuts long texts only: the same model
    assert longer.identity == tiny_encoder.identity


def test_an_identity_recorded_before_the_modules_joined_still_opens(
    make: Engines, tiny_encoder: SentenceEncoder
) -> None:
    legacy = tiny_encoder.identity.rpartition("-")[0]  # what releases before issue 45 recorded
    assert same_encoder(legacy, tiny_encoder.identity) and not same_encoder(legacy + "-000000", tiny_encoder.identity)
    make.open(tiny_encoder).upsert_texts(TEXTS, vectors=tiny_encoder.encode_document(TEXTS), vectors_from=legacy)


def test_identity_follows_the_weights_not_the_precision(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    identity = tiny_encoder.identity
    tiny_encoder.save(tmp_path / "tiny")
    assert SentenceEncoder.load(tmp_path / "tiny", precision="fp32").identity.endswith(identity.split("@")[1])
    assert SentenceEncoder.load(tmp_path / "tiny", precision="bf16").identity.endswith(identity.split("@")[1])
    assert SentenceEncoder.load(tmp_path / "tiny").model_name == "tiny"
    with_prompt = testing.tiny_encoder()
    with_prompt.prompts = {"document": "passage: "}
    assert with_prompt.identity != identity  # the prompt changes every stored vector
    with_prompt.prompts = {}
    with torch.no_grad():
        next(with_prompt.parameters()).add_(1e-3)  # as training would
    assert with_prompt.identity != identity


@pytest.mark.slow
def test_default_model_identity_is_stable(default_encoder: SentenceEncoder) -> None:
    """The identity written into existing users' collections must not drift between releases."""
    assert default_encoder.identity == "all-MiniLM-L6-v2@c530e2d4b490-0cd2d0"


def test_documents_take_chunk_vectors_encoded_elsewhere(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    from sbert_qdrant.documents import Chunking

    body = " ".join(f"Sentence {i} says how the herd moves across the plain at dawn." for i in range(8))
    docs, payloads = [body, "A short one."], [{"title": "Zebras"}, {"title": "Short"}]
    own, given = make.open(tiny_encoder, "own"), make.open(tiny_encoder, "given")
    options: dict[str, Any] = {"chunk_tokens": 12, "context_field": "title"}
    own.upsert_documents(docs, ids=["a", "b"], payloads=payloads, **options)
    chunking = Chunking.of(tiny_encoder, 12, None, "title")
    vectors = [tiny_encoder.encode_document(chunking.inputs(d, p)) for d, p in zip(docs, payloads, strict=True)]
    assert len(vectors[0]) > 2 and len(vectors[1]) == 1
    result = given.upsert_documents(
        docs, ids=["a", "b"], payloads=payloads, vectors=vectors, vectors_from=tiny_encoder.identity, **options
    )
    assert result.written == 2
    assert given.get_document("a") == own.get_document("a")
    mine = {h.id: h.score for h in own.search_documents("herd at dawn", mode="hybrid")}
    theirs = {h.id: h.score for h in given.search_documents("herd at dawn", mode="hybrid")}
    assert mine.keys() == theirs.keys() and all(abs(mine[k] - theirs[k]) < 1e-3 for k in mine)
    with pytest.raises(InvalidInputError, match=r"vectors\[0\] has 2 rows, but document 'a' has \d+ chunks"):
        given.upsert_documents(
            docs,
            ids=["a", "b"],
            payloads=payloads,
            vectors=[vectors[0][:2], vectors[1]],
            vectors_from=tiny_encoder.identity,
            **options,
        )
    with pytest.raises(InvalidInputError, match=r"vectors\[1\] has shape \(384,\), not \(chunks, 32\)"):
        given.upsert_documents(docs, vectors=[vectors[0], np.ones(384)], vectors_from=tiny_encoder.identity)
