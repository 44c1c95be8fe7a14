"""Re-embedding a collection with another encoder (``reembed``) and moving readers with an alias (``set_alias``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from flavours import Engines

from sbert_qdrant import CollectionMismatchError, InvalidArgumentError, SentenceEncoder, UnsupportedError, testing

TEXTS = ["How do I learn Python?", "Why is the sky blue?", "What is the capital of France?"]
BODY = " ".join(f"Sentence {i} says how the herd moves across the plain at dawn." for i in range(8))


@pytest.fixture
def old(make: Engines, tiny_encoder: SentenceEncoder) -> Any:
    coll = make.open(tiny_encoder, "v1")
    coll.upsert_texts(TEXTS, ids=["a", "b", "c"], payloads=[{"n": i} for i in range(3)])
    coll.upsert_documents([BODY], ids=["page"], payloads=[{"title": "Zebras"}], chunk_tokens=12, context_field="title")
    return coll


def test_reembed_keeps_ids_payloads_and_chunks(make: Engines, old: Any) -> None:
    encoder = testing.tiny_encoder(seed=1)
    result = old.reembed("v2", encoder, batch_size=4)
    chunks = old.count(kind="chunks")
    assert result.written == 3 + chunks and len(result) == 3 + chunks
    new = make.open(encoder, "v2")
    assert (new.count(), new.count(kind="documents"), new.count(kind="chunks")) == (3, 1, chunks)
    before, after = old.get(["a", "b", "c"]), new.get(["a", "b", "c"], with_vectors=True)
    assert [(t.id, t.text, t.payload) for t in before] == [(t.id, t.text, t.payload) for t in after]
    assert np.allclose(np.stack([t.vector for t in after]), encoder.encode_document(TEXTS), atol=1e-5)
    assert new.get_document("page") == old.get_document("page")  # text, payload, chunks and offsets
    hit = new.search_documents("zebras", mode="sparse")  # the context was re-encoded with every chunk
    assert [h.id for h in hit] == ["page"]
    assert old.count() == 3  # the old collection is left as it is
    with pytest.raises(CollectionMismatchError, match="was written by encoder"):
        make.open(old.encoder, "v2").search_text("sky")  # a reader with the old model is refused
    again = old.reembed("v2", encoder, on_conflict="skip")
    assert (again.written, again.skipped) == (0, 3 + chunks)
    with pytest.raises(InvalidArgumentError, match="collection_name='v1' is this collection"):
        old.reembed("v1", encoder)


def test_an_alias_moves_readers_to_the_new_collection(make: Engines, old: Any) -> None:
    if make.engine == "edge":
        with pytest.raises(UnsupportedError, match="Qdrant Edge has no collection aliases"):
            old.set_alias("live")
        return
    encoder = testing.tiny_encoder(seed=1)
    old.set_alias("live")
    assert make.open(old.encoder, "live").count() == 3
    old.reembed("v2", encoder)
    new = make.open(encoder, "v2")
    new.set_alias("live")  # one request: readers of "live" never see it missing
    assert [h.id for h in make.open(encoder, "live").search_text("sky", limit=3)]
    with pytest.raises(CollectionMismatchError):
        make.open(old.encoder, "live").count()
    with pytest.raises(InvalidArgumentError, match="alias='v2'"):
        new.set_alias("v2")
