"""One behaviour suite for TextCollection and AsyncTextCollection, each run on embedded Qdrant Edge and on
qdrant-client's in-memory mode (the async collection is driven through ``flavours.Blocking``)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from child import Child, run_child
from flavours import Engines, concurrently
from qdrant_client import models
from same_hits import assert_ranked_like, assert_same_hits

from sbert_qdrant import (
    CollectionMismatchError,
    CollectionNotFoundError,
    InvalidArgumentError,
    InvalidInputError,
    SentenceEncoder,
    StoreInUseError,
    TextCollection,
    TextRecord,
)
from sbert_qdrant.records import point_id, text_id
from sbert_qdrant.store.calls import StoreWrite

QUESTIONS = [
    "How do I learn Python quickly?",
    "What is the best way to learn Python fast?",
    "Why is the sky blue?",
    "How can I lose weight in a month?",
    "What is the capital of France?",
    "Which city is the capital of France?",
]


def test_upsert_is_idempotent_and_ids_are_deterministic(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    ids = coll.upsert_texts(QUESTIONS, payloads=[{"n": i} for i in range(6)])
    assert ids == [text_id(q) for q in QUESTIONS] and ids.written == 6 and ids.skipped == 0
    again = coll.upsert_texts(QUESTIONS, payloads=[{"n": i} for i in range(6)], batch_size=4)
    assert again == ids and coll.count() == 6


def test_skip_leaves_stored_points_alone_and_encodes_only_new_ones(
    make: Engines, tiny_encoder: SentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    coll = make.open(tiny_encoder)
    coll.upsert_texts(QUESTIONS[:4], payloads=[{"v": 1}] * 4)
    encoded: list[str] = []
    original = tiny_encoder.encode_document
    monkeypatch.setattr(
        tiny_encoder, "encode_document", lambda texts, **kw: (encoded.extend(texts), original(texts, **kw))[1]
    )
    result = coll.upsert_texts(QUESTIONS, payloads=[{"v": 2}] * 6, on_conflict="skip")
    assert (result.written, result.skipped) == (2, 4) and encoded == QUESTIONS[4:]
    assert [t.payload["v"] for t in coll.get(result)] == [1, 1, 1, 1, 2, 2]
    coll.upsert_texts(QUESTIONS, payloads=[{"v": 3}] * 6)  # overwrite replaces
    assert {t.payload["v"] for t in coll.get(result)} == {3} and coll.count() == 6


def test_default_batch_follows_the_engine(
    make: Engines, tiny_encoder: SentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make.store()
    coll = make.open(tiny_encoder, store=store)
    writes: list[int] = []
    original = store.upsert

    def counting(name: str, write: StoreWrite) -> object:
        writes.append(len(write.ids))
        return original(name, write)  # the sync result, or the coroutine to await

    monkeypatch.setattr(store, "upsert", counting)
    coll.upsert_texts([f"question number {i}" for i in range(2500)])
    batch = store.upsert_batch
    assert batch == (4096 if make.engine == "edge" else 1024)
    assert writes == [min(batch, 2500 - start) for start in range(0, 2500, batch)]
    assert coll.count() == 2500


def test_your_ids_are_the_ids_everywhere(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    ids = coll.upsert_texts(QUESTIONS[:3], ids=["doc-1", 2, "2"], payloads=[{"a": 1}, None, {"b": [1, 2]}])
    assert ids == ["doc-1", 2, "2"]
    got = coll.get([2, "doc-1", "missing"])
    assert [(t.id, t.text) for t in got] == [(2, QUESTIONS[1]), ("doc-1", QUESTIONS[0])]
    assert got[1].point_id == point_id("doc-1") != point_id("doc-2") and len({point_id(i) for i in ids}) == 3
    assert coll.get(["2"])[0].payload == {"b": [1, 2]}
    hit = coll.search_text(QUESTIONS[0], limit=1)[0]
    bare = coll.search_text(QUESTIONS[0], limit=1, with_payload=False)[0]
    assert hit.id == bare.id == "doc-1" and hit.payload == {"a": 1} and (bare.text, bare.payload) == (None, {})
    by_id = models.Filter(must=[models.HasIdCondition(has_id=["doc-1", 2])])
    assert sorted(str(h.id) for h in coll.search_text("x", query_filter=by_id)) == ["2", "doc-1"]
    assert coll.count({"must": [{"has_id": ["2"]}]}) == 1  # a filter's dict form works too
    coll.delete_texts(["doc-1", "never stored"])
    coll.delete_texts([2])
    assert [t.id for t in coll.get(ids)] == ["2"] and coll.count() == 1


def test_a_uuid_id_is_its_own_point_id(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    given = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    coll.upsert_texts(QUESTIONS[:2], ids=[given, given.upper()])  # two spellings: two ids, two points
    (stored,) = coll.get([given])
    assert stored.id == stored.point_id == given and coll.count() == 2
    assert coll.get([given.upper()])[0].point_id == point_id(given.upper()) != given


def test_records_stream_from_an_iterable(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    records = (
        TextRecord(q, {"i": i}, f"k{i}") if i % 2 else {"text": q, "payload": {"i": i}} for i, q in enumerate(QUESTIONS)
    )
    ids = coll.upsert_texts(records, batch_size=2)
    assert len(ids) == 6 and coll.count() == 6
    assert ids[1] == "k1" and coll.get(["k1"])[0].payload == {"i": 1}


def test_search_finds_paraphrases_with_typed_hits(make: Engines, default_encoder: SentenceEncoder) -> None:
    coll = make.open(default_encoder)
    coll.upsert_texts(QUESTIONS, payloads=[{"topic": t} for t in ["py", "py", "sky", "health", "geo", "geo"]])
    hits = coll.search_text("learning Python fast", limit=2)
    assert {h.text for h in hits} == set(QUESTIONS[:2]) and hits[0].score >= hits[1].score
    assert hits[0].payload == {"topic": "py"} and hits[0].id == hits[0].point_id == text_id(hits[0].text or "")
    bare = coll.search_text("learning Python fast", limit=1, with_payload=False)[0]
    assert bare.text is None and bare.payload == {}
    assert_ranked_like([bare.id], hits)
    batched = coll.search_texts(["learning Python fast", "France's capital"], limit=2)
    assert_same_hits(hits, batched[0], abs=1e-5)  # the query encoded in another batch: scores move by rounding
    assert {h.text for h in batched[1]} == set(QUESTIONS[4:])
    high = coll.search_text("learning Python fast", limit=6, score_threshold=0.5)
    assert 0 < len(high) < 6 and all(h.score >= 0.5 for h in high)


def test_filters_work_the_same_on_every_engine(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder, payload_indexes={"topic": models.PayloadSchemaType.KEYWORD})
    coll.upsert_texts(QUESTIONS, payloads=[{"topic": t, "n": i} for i, t in enumerate("ppshgg")])
    geo = models.Filter(must=[models.FieldCondition(key="topic", match=models.MatchValue(value="g"))])
    assert {h.text for h in coll.search_text("capital", limit=6, query_filter=geo)} == set(QUESTIONS[4:])
    assert coll.count(geo) == 2
    ranged = models.Filter(
        must=[models.FieldCondition(key="n", range=models.Range(gte=1, lt=4))],
        must_not=[models.FieldCondition(key="topic", match=models.MatchAny(any=["s"]))],
    )
    assert sorted(h.payload["n"] for h in coll.search_text("x", limit=6, query_filter=ranged)) == [1, 3]
    either = models.Filter(should=[models.HasIdCondition(has_id=[text_id(QUESTIONS[0])]), geo])
    assert coll.count(either) == 3
    unknown = models.Filter(must=[models.FieldCondition(key="nope", match=models.MatchValue(value="x"))])
    assert coll.search_text("x", query_filter=unknown) == []  # a filter on an unknown field matches nothing
    coll.delete_texts(query_filter=geo)
    assert coll.count() == 4


def test_duplicates_calibration_and_mining(make: Engines, default_encoder: SentenceEncoder) -> None:
    coll = make.open(default_encoder)
    coll.upsert_texts(QUESTIONS)
    dups = coll.find_duplicates("What's the fastest way to learn Python?", threshold=0.6)
    assert {h.text for h in dups} == set(QUESTIONS[:2])
    assert [h.text for h in coll.find_duplicates(QUESTIONS[4], threshold=0.6)] == [QUESTIONS[5]]  # not itself
    calibration = coll.calibrate_threshold(
        [
            (QUESTIONS[0], QUESTIONS[1], 1),
            (QUESTIONS[4], QUESTIONS[5], True),
            (QUESTIONS[0], QUESTIONS[2], 0),
            (QUESTIONS[3], QUESTIONS[4], False),
        ]
    )
    assert calibration.f1 == 1.0 and 0 < calibration.threshold < 0.55
    pairs = coll.mine_duplicates(threshold=0.7)
    assert {frozenset((p.text_a, p.text_b)) for p in pairs} == {frozenset(QUESTIONS[:2]), frozenset(QUESTIONS[4:])}
    assert pairs[0].score >= pairs[-1].score
    # A reopened collection uses the stored threshold (about 0.49), not the default (0.72): a text about 0.62 from
    # QUESTIONS[0] is found as its duplicate only with the stored one.
    reopened = make.open(default_encoder)
    reopened.upsert_texts(["Best Python books for beginners"])
    assert "Best Python books for beginners" in {h.text for h in reopened.find_duplicates(QUESTIONS[0])}


def test_get_returns_unit_vectors_in_the_asked_order(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    ids = coll.upsert_texts(QUESTIONS[:3])
    got = coll.get([ids[2], ids[0]], with_vectors=True)
    assert [t.text for t in got] == [QUESTIONS[2], QUESTIONS[0]]
    expected = np.asarray(tiny_encoder.encode([QUESTIONS[2], QUESTIONS[0]]))
    np.testing.assert_allclose(np.stack([t.vector for t in got]), expected, atol=1e-5)  # type: ignore[misc]


def test_stored_ids_names_the_stored_texts_or_documents_in_the_asked_order(
    make: Engines, tiny_encoder: SentenceEncoder
) -> None:
    coll = make.open(tiny_encoder)
    coll.upsert_texts(QUESTIONS[:3], ids=["a", 1, "c"])
    coll.upsert_documents([QUESTIONS[3]], ids=["doc"])
    assert coll.stored_ids(["c", "missing", "a", 1, "1", "doc"]) == ["c", "a", 1]
    assert coll.stored_ids(["a", "doc", "other"], kind="documents") == ["doc"]
    with pytest.raises(InvalidArgumentError, match="kind='chunks' must be one of"):
        coll.stored_ids(["a"], kind="chunks")  # type: ignore[arg-type]


def test_existing_collection_is_checked_never_replaced(
    make: Engines, tiny_encoder: SentenceEncoder, default_encoder: SentenceEncoder
) -> None:
    first = make.open(tiny_encoder)
    first.upsert_texts(QUESTIONS[:2])
    others = [
        make.open(default_encoder),
        make.open(tiny_encoder, vector_name="dense"),
        make.open(tiny_encoder, distance="dot"),
    ]
    with pytest.raises(CollectionMismatchError, match=r"32-dim cosine.*384-dim"):
        others[0].upsert_texts(["another"])
    with pytest.raises(CollectionMismatchError, match="no vector named 'dense'"):
        others[1].count()
    with pytest.raises(CollectionMismatchError, match="dot"):
        others[2].search_text("x")
    assert first.count() == 2
    for coll in [first, *others]:
        coll.close()  # an embedded collection can only be replaced once nothing else here has it open
    replaced = make.open(default_encoder, recreate=True)
    replaced.upsert_texts(["fresh start"])
    assert replaced.count() == 1


def test_reads_of_a_missing_collection_fail_clearly(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder, name="missing")
    for read in (lambda: coll.search_text("x"), coll.count, lambda: coll.get([1])):
        with pytest.raises(CollectionNotFoundError, match="'missing' does not exist"):
            read()
    assert not coll.exists()


def test_bad_input_writes_nothing(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    bad_batches: list[tuple[dict[str, object], str]] = [
        ({"texts": [*QUESTIONS, None]}, r"texts\[6\] is NoneType"),
        ({"texts": [*QUESTIONS, "  "]}, r"texts\[6\] is empty"),
        ({"texts": [*QUESTIONS, "bad \ud800"]}, r"texts\[6\] is not valid Unicode"),
        ({"texts": QUESTIONS[:2], "ids": [1]}, "ids has 1 items but texts has 2"),
        ({"texts": QUESTIONS[:2], "ids": ["a", "a"]}, r"ids\[1\] repeats ids\[0\]"),
        ({"texts": QUESTIONS[:1], "ids": [1.5]}, r"ids\[0\]=1.5 is a float; ids must be str or int"),
        ({"texts": QUESTIONS[:1], "payloads": [{"text": "x"}]}, "reserved key"),
        ({"texts": QUESTIONS[:1], "payloads": [{"x": float("nan")}]}, "cannot be stored as JSON"),
        ({"texts": QUESTIONS[:1], "payloads": [{"x": object()}]}, "cannot be stored as JSON"),
        ({"texts": "just one string"}, "wrap a single text in a list"),
        ({"texts": QUESTIONS[:1], "batch_size": 0}, "batch_size=0"),
        ({"texts": QUESTIONS[:1], "on_conflict": "merge"}, "on_conflict='merge'"),
    ]
    for kwargs, message in bad_batches:
        with pytest.raises((InvalidInputError, InvalidArgumentError), match=message):
            coll.upsert_texts(**kwargs)  # type: ignore[arg-type]
    assert not coll.exists()
    coll.upsert_texts(QUESTIONS[:2])
    with pytest.raises(InvalidArgumentError, match="limit=0"):
        coll.search_text("x", limit=0)
    with pytest.raises(InvalidArgumentError, match=r"score_threshold=1\.5"):
        coll.search_text("x", score_threshold=1.5)
    with pytest.raises(InvalidArgumentError, match="collection_name="):
        make.open(tiny_encoder, name="../escape")
    assert coll.upsert_texts([]) == [] and coll.count() == 2


def test_identical_texts_in_one_call_are_stored_once(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    ids = coll.upsert_texts([QUESTIONS[0], QUESTIONS[1], QUESTIONS[0]])
    assert ids[0] == ids[2] and (ids.written, ids.skipped) == (2, 1) and coll.count() == 2
    with pytest.raises(InvalidInputError, match="different payload"):
        coll.upsert_texts([QUESTIONS[0], QUESTIONS[0]], payloads=[{"a": 1}, {"a": 2}])


_CHILD = textwrap.dedent(
    """
    import sys, time
    from sbert_qdrant import SentenceEncoder, TextCollection
    coll = TextCollection("faq", SentenceEncoder.load(device="cpu"), location=sys.argv[1])
    print("loaded", flush=True)
    if sys.argv[2] == "write":
        coll.upsert_texts(["How do I learn Python quickly?", "Why is the sky blue?"])
    else:
        coll.count()
        print("holding", flush=True)
        time.sleep(3600)  # until the test kills it
    """
)


def test_edge_data_persists_across_processes_and_is_locked_while_open(
    tmp_path: Path, default_encoder: SentenceEncoder
) -> None:
    location = str(tmp_path / "qdrant")
    writer = run_child([sys.executable, "-c", _CHILD, location, "write"])
    assert writer.returncode == 0, writer.stderr
    with TextCollection("faq", default_encoder, location=location) as coll:
        assert coll.count() == 2
        assert coll.search_text("sky colour", limit=1)[0].text == "Why is the sky blue?"
    with Child([sys.executable, "-c", _CHILD, location, "hold"]) as holder:
        holder.wait_for("holding")
        with pytest.raises(StoreInUseError, match="open in another process"):
            TextCollection("faq", default_encoder, location=location).count()


def test_concurrent_writers_lose_nothing(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    batches = [[f"writer {w} text {i}" for i in range(80)] for w in range(2)]
    results = concurrently(coll, "upsert_texts", [((texts,), {"batch_size": 16}) for texts in batches])
    assert coll.count() == 160 and sorted(results[0] + results[1]) == sorted(text_id(t) for b in batches for t in b)


def test_a_megabyte_text_is_stored_whole_and_encoded_truncated(
    make: Engines, tiny_encoder: SentenceEncoder, caplog: pytest.LogCaptureFixture
) -> None:
    coll = make.open(tiny_encoder)
    huge = "naïve café 東京 " * 70_000  # about 1 MB of mixed scripts
    before = tiny_encoder.truncated_count
    ids = coll.upsert_texts([huge, "short text\x00with a NUL"])
    assert tiny_encoder.truncated_count == before + 1 and "truncated" in caplog.text
    assert [t.text for t in coll.get(ids)] == [huge, "short text\x00with a NUL"]
