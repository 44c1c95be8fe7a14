"""Where a point keeps what (``PointLayout``): several dense slots (two models) and BM25 in one collection, written
and searched by name on every engine; another tool's layouts; a multivector slot created, written and searched by
MaxSim in the engine (Qdrant Edge and qdrant-client local mode), and filled by its token encoder in a collection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flavours import Engines
from qdrant_client import QdrantClient, models

from sbert_qdrant import MultiVectorEncoder, PointLayout, SentenceEncoder, TextCollection, VectorSlot, testing
from sbert_qdrant.errors import CollectionMismatchError, InvalidArgumentError, UnsupportedError
from sbert_qdrant.store import ClientStore, EdgeStore
from sbert_qdrant.store.base import CollectionSpec, Nearest, PointVectors, VectorSpec
from sbert_qdrant.store.calls import StoreQuery, StoreWrite

TEXTS = ["How do I learn Python?", "Why is the sky blue?", "Best pizza in Naples", "Learning to code in Python"]


def test_two_models_and_bm25_in_one_collection_each_searched_by_name(make: Engines) -> None:
    first, second = testing.tiny_encoder(seed=0), testing.tiny_encoder(seed=1)
    coll = make.open(first, named_vectors={"other": second})
    coll.upsert_texts(TEXTS, ids=["a", "b", "c", "d"])
    assert [(s.name, s.kind, s.size) for s in coll.layout.slots] == [
        ("text", "dense", 32),
        ("other", "dense", 32),
        ("bm25", "sparse", 0),
    ]
    stored = np.stack([t.vector for t in coll.get(["a", "b", "c", "d"], with_vectors=True)])
    assert np.allclose(stored, first.encode(TEXTS), atol=1e-5)  # get reads the primary slot
    for using, encoder in ((None, first), ("text", first), ("other", second)):
        hits = coll.search_text(TEXTS[1], limit=4, using=using)
        query = encoder.encode_query([TEXTS[1]])[0]
        expected = sorted(zip(encoder.encode(TEXTS) @ query, "abcd", strict=True), reverse=True)
        assert [h.id for h in hits] == [key for _, key in expected]  # each slot holds its own model's vectors
        assert [h.score for h in hits] == pytest.approx([score for score, _ in expected], abs=1e-4)
    assert coll.search_text("pizza", limit=1, mode="hybrid", using="other")[0].id == "c"
    with pytest.raises(InvalidArgumentError, match=r"using='nope' names no dense slot.*'text', 'other'"):
        coll.search_text("pizza", using="nope")
    with pytest.raises(InvalidArgumentError, match="using='bm25' names no dense slot"):
        coll.search_text("pizza", using="bm25")


def test_a_reopened_collection_checks_every_slot_and_its_model(make: Engines) -> None:
    first, second = testing.tiny_encoder(seed=0), testing.tiny_encoder(seed=1)
    make.open(first, named_vectors={"other": second}).upsert_texts(TEXTS)
    assert make.open(first, named_vectors={"other": second}).count() == 4
    with pytest.raises(CollectionMismatchError, match="has no vector named 'third'"):
        make.open(first, named_vectors={"third": second}).count()
    with pytest.raises(CollectionMismatchError, match=r"was written by encoder .* not "):
        make.open(first, named_vectors={"other": testing.tiny_encoder(seed=2)}).count()


def test_bad_slot_arguments_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    enc = testing.tiny_encoder()
    with pytest.raises(InvalidArgumentError, match="'bm25' is the BM25 slot's name"):
        TextCollection("c", enc, location=tmp_path, named_vectors={"bm25": enc})
    with pytest.raises(InvalidArgumentError, match="named_vectors\\['x'\\] must be a SentenceEncoder"):
        TextCollection("c", enc, location=tmp_path, named_vectors={"x": "not an encoder"})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgumentError, match="drop vector_name="):
        TextCollection("c", enc, location=tmp_path, layout=PointLayout.mcp_server_qdrant("m"), vector_name="v")
    with pytest.raises(InvalidArgumentError, match="appear twice"):
        PointLayout((VectorSlot("a"), VectorSlot("a")))
    with pytest.raises(InvalidArgumentError, match="kind='colbert'"):
        VectorSlot("a", kind="colbert")  # type: ignore[arg-type]
    assert not (tmp_path / "c").exists()


def test_mcp_server_qdrants_layout_writes_their_payload_and_reads_it_back(make: Engines) -> None:
    enc = testing.tiny_encoder()
    layout = PointLayout.mcp_server_qdrant("sentence-transformers/all-MiniLM-L6-v2")
    coll = make.open(enc, name="memories", layout=layout, sparse=None)
    coll.upsert_texts(["remember the milk"], ids=["m1"], payloads=[{"text": "nested, so allowed", "n": 1}])
    (hit,) = coll.search_text("milk", limit=1)
    assert (hit.id, hit.text, hit.payload) == ("m1", "remember the milk", {"text": "nested, so allowed", "n": 1})
    assert coll.layout.primary.name == "fast-all-minilm-l6-v2" and coll.layout.writable
    only_n1 = models.Filter(must=[models.FieldCondition(key=layout.field_key("n"), match=models.MatchValue(value=1))])
    assert coll.count(only_n1) == 1
    with pytest.raises(UnsupportedError, match="mcp-server-qdrant's layout, which has no place for a document"):
        coll.upsert_documents(["a long text"])


def test_another_tools_layout_is_read_only(make: Engines) -> None:
    enc = testing.tiny_encoder()
    make.open(enc, name="lc").upsert_texts(["x"])  # a collection whose text sits elsewhere is someone else's
    theirs = make.open(enc, name="lc", text_field="page_content")
    assert theirs.layout.owner == "foreign" and not theirs.layout.writable
    with pytest.raises(UnsupportedError, match="read-only here"):
        theirs.upsert_texts(["y"])


def _stores(tmp_path: Path) -> list[Any]:
    return [EdgeStore(tmp_path / "edge"), ClientStore(QdrantClient(":memory:"))]


@pytest.mark.parametrize("engine", [0, 1], ids=["edge", "memory"])
def test_a_multivector_slot_is_written_and_searched_by_maxsim_in_the_engine(tmp_path: Path, engine: int) -> None:
    store = _stores(tmp_path)[engine]
    rng = np.random.default_rng(0)
    spec = CollectionSpec(
        "late",
        {"dense": VectorSpec(4, "cosine"), "tokens": VectorSpec(4, "dot", "multivector")},
        sparse=frozenset({"bm25"}),
        unindexed=frozenset({"tokens"}),
    )
    store.create(spec)
    assert store.describe("late").vectors == spec.vectors
    tokens = [rng.normal(size=(n, 4)).astype(np.float32) for n in (3, 5, 2)]
    dense = rng.normal(size=(3, 4)).astype(np.float32)
    ids = [f"00000000-0000-0000-0000-00000000000{i}" for i in range(3)]
    vectors = PointVectors(
        {"dense": dense}, {"bm25": [([1], [1.0]), ([2], [1.0]), ([1, 2], [0.5, 0.5])]}, {"tokens": tokens}
    )
    store.upsert("late", StoreWrite(ids, vectors, [{"i": i} for i in range(3)]))
    query = rng.normal(size=(2, 4)).astype(np.float32)
    (rows,) = store.query("late", StoreQuery([Nearest("tokens", query.tolist())], 3))
    maxsim = [float((query @ t.T).max(axis=1).sum()) for t in tokens]
    assert [r.payload["i"] for r in rows] == list(np.argsort(maxsim)[::-1])
    assert [r.score for r in rows] == pytest.approx(sorted(maxsim, reverse=True), rel=1e-4)
    store.close()


def test_a_layouts_multivector_slot_needs_its_token_encoder(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    layout = PointLayout((VectorSlot("text"), VectorSlot("tokens", "multivector", distance="dot", index=False)))
    with pytest.raises(InvalidArgumentError, match=r"slot after the first \(\['tokens'\]\); missing: \['tokens'\]"):
        TextCollection("c", tiny_encoder, location=tmp_path, layout=layout, sparse=None)
    tokens = MultiVectorEncoder.from_encoder(tiny_encoder)
    with TextCollection(
        "c", tiny_encoder, location=tmp_path, layout=layout, sparse=None, named_vectors={"tokens": tokens}
    ) as coll:
        coll.upsert_texts(TEXTS)
        assert coll.search_text("Python", limit=1, rescore="tokens")[0].text in (TEXTS[0], TEXTS[3])
