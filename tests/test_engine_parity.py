"""Every engine answers the same call the same way: each case below runs on the sync and the async collection, on
embedded Qdrant Edge and on qdrant-client's in-memory mode; the four outcomes (result or typed error) must agree, and be
the kind the case expects (a result, or which error class)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from flavours import ENGINES, FLAVOURS, Engines
from qdrant_client import models

from sbert_qdrant import (
    CollectionNotFoundError,
    InvalidArgumentError,
    InvalidInputError,
    SbertQdrantError,
    SentenceEncoder,
)
from sbert_qdrant.records import text_id

TEXTS = [
    "How do I learn Python quickly?",
    "What is the best way to learn Python fast?",
    "Why is the sky blue?",
    "What is the capital of France?",
    "Which city is the capital of France?",
]
DOCUMENTS = [
    "Paris is the capital of France. It lies on the Seine. Many people visit it every year to see its museums.",
    "Python is a programming language. People learn it quickly. It is popular for data science and the web.",
]
IDS: list[Any] = ["doc-1", "doc-2", 3, "6f9619ff-8b86-d011-b42d-00c04fc964ff", text_id(TEXTS[4])]
TOPIC_A = models.Filter(must=[models.FieldCondition(key="topic", match=models.MatchValue(value="a"))])

Case = Callable[[Any], Any]
#: What a case must give: a result, or the exact error class (so that a regression in code every engine shares fails
#: here even when all four outcomes agree).
Expected = Literal["result"] | type[SbertQdrantError]
CASES: dict[str, tuple[Expected, Case]] = {
    "get known, unknown and repeated ids": ("result", lambda c: c.get(["doc-2", "missing", 3, "doc-2"])),
    "get no ids": ("result", lambda c: c.get([])),
    "get a bare str": (InvalidInputError, lambda c: c.get("doc-1")),
    "get a None id": (InvalidInputError, lambda c: c.get([None])),
    "get a float id": (InvalidInputError, lambda c: c.get([1.5])),
    "get with vectors": ("result", lambda c: [t.vector.shape for t in c.get(["doc-1"], with_vectors=True)]),
    "search": ("result", lambda c: c.search_text("learning Python", limit=3)),
    "search without payload": ("result", lambda c: c.search_text("learning Python", limit=2, with_payload=False)),
    "search many": ("result", lambda c: c.search_texts(["sky colour", "France"], limit=2)),
    "search none": ("result", lambda c: c.search_texts([])),
    "search a Filter": ("result", lambda c: c.search_text("x", query_filter=TOPIC_A)),
    "search a dict filter": (
        "result",
        lambda c: c.search_text("x", query_filter={"must": [{"key": "n", "range": {"gte": 2}}]}),
    ),
    "search has_id with your ids": (
        "result",
        lambda c: c.search_text(
            "x", query_filter=models.Filter(must=[models.HasIdCondition(has_id=["doc-1", 3, "unknown"])])
        ),
    ),
    "search a nested has_id": (
        "result",
        lambda c: c.search_text(
            "x", query_filter=models.Filter(should=[models.Filter(must=[models.HasIdCondition(has_id=["doc-2"])])])
        ),
    ),
    "search an unknown field": (
        "result",
        lambda c: c.search_text(
            "x", query_filter=models.Filter(must=[models.FieldCondition(key="nope", match=models.MatchValue(value=1))])
        ),
    ),
    "search a str filter": (InvalidArgumentError, lambda c: c.search_text("x", query_filter="topic = a")),
    "search a broken dict filter": (
        InvalidArgumentError,
        lambda c: c.search_text("x", query_filter={"must": [{"nonsense": 1}]}),
    ),
    "search an empty query": (InvalidInputError, lambda c: c.search_text("   ")),
    "search a None query": (InvalidInputError, lambda c: c.search_text(None)),
    "search a str as queries": (InvalidInputError, lambda c: c.search_texts("one query")),
    "search limit 0": (InvalidArgumentError, lambda c: c.search_text("x", limit=0)),
    "search limit as str": (InvalidArgumentError, lambda c: c.search_text("x", limit="3")),
    "search threshold out of range": (InvalidArgumentError, lambda c: c.search_text("x", score_threshold=2.0)),
    "search threshold": ("result", lambda c: len(c.search_text("learning Python", limit=5, score_threshold=0.99))),
    "search sparse": ("result", lambda c: c.search_text("capital of France", limit=3, mode="sparse")),
    "search hybrid": ("result", lambda c: c.search_text("capital of France", limit=3, mode="hybrid")),
    "search hybrid rrf": ("result", lambda c: c.search_text("learn Python", limit=3, mode="hybrid", fusion="rrf")),
    "search hybrid weighted": (
        "result",
        lambda c: c.search_text("learn Python", limit=4, mode="hybrid", fusion="rrf", weights=(1, 3)),
    ),
    "search hybrid filtered": (
        "result",
        lambda c: c.search_text("capital", mode="hybrid", query_filter=TOPIC_A, candidates=200),
    ),
    "search hybrid threshold": ("result", lambda c: c.search_text("the capital", mode="hybrid", score_threshold=0.4)),
    "search many hybrid": (
        "result",
        lambda c: c.search_texts(["sky", "Python"], limit=2, mode="hybrid", with_payload=False),
    ),
    "search with diversity": ("result", lambda c: c.search_text("learn Python", limit=3, diversity=0.5, candidates=5)),
    "search an unknown mode": (InvalidArgumentError, lambda c: c.search_text("x", mode="keyword")),
    "search an unknown fusion": (InvalidArgumentError, lambda c: c.search_text("x", mode="hybrid", fusion="max")),
    "search weights with dbsf": (
        InvalidArgumentError,
        lambda c: c.search_text("x", mode="hybrid", fusion="dbsf", weights=(1, 1)),
    ),
    "search weights in dense mode": (InvalidArgumentError, lambda c: c.search_text("x", weights=(1, 1))),
    "search three weights": (
        InvalidArgumentError,
        lambda c: c.search_text("x", mode="hybrid", fusion="rrf", weights=(1, 2, 3)),
    ),
    "search negative weights": (
        InvalidArgumentError,
        lambda c: c.search_text("x", mode="hybrid", fusion="rrf", weights=(-1, 2)),
    ),
    "search diversity above 1": (InvalidArgumentError, lambda c: c.search_text("x", diversity=1.5)),
    "search candidates below limit": (InvalidArgumentError, lambda c: c.search_text("x", limit=20, candidates=10)),
    # no stage draws candidates on a plain dense or sparse search, or one by vector: refused, never ignored
    "search dense candidates": (InvalidArgumentError, lambda c: c.search_text("x", limit=2, candidates=20)),
    "search sparse candidates": (InvalidArgumentError, lambda c: c.search_text("x", mode="sparse", candidates=20)),
    "search documents candidates": (InvalidArgumentError, lambda c: c.search_documents("x", candidates=20)),
    "search by vector candidates": (
        InvalidArgumentError,
        lambda c: c.search_by_vector(c.encoder.encode_query(["x"])[0], candidates=20),
    ),
    "search sparse threshold as str": (
        InvalidArgumentError,
        lambda c: c.search_text("x", mode="sparse", score_threshold="1"),
    ),
    "documents: upsert, search, get": (
        "result",
        lambda c: (
            c.upsert_documents(DOCUMENTS, ids=["d1", 2], payloads=[{"topic": "a"}, None], chunk_tokens=12),
            c.search_documents("capital of France", limit=3, chunks=2),
            c.search_documents("Python", mode="hybrid", query_filter=TOPIC_A),
            c.get_document("d1"),
            c.get_document("missing"),
        ),
    ),
    "documents: replace, delete": (
        "result",
        lambda c: (
            c.upsert_documents(DOCUMENTS, ids=["d1", 2], chunk_tokens=12),
            c.upsert_documents(["Shorter now."], ids=["d1"], chunk_tokens=12),
            c.delete_documents([2, "unknown"]),
            c.get_document(2),
            c.get_document("d1"),
        ),
    ),
    "documents: reserved payload key": (
        InvalidInputError,
        lambda c: c.upsert_documents(["x"], payloads=[{"document": 1}]),
    ),
    "documents: chunk tokens too many": (
        InvalidArgumentError,
        lambda c: c.upsert_documents(["x"], chunk_tokens=10_000),
    ),
    "documents: overlap too big": (
        InvalidArgumentError,
        lambda c: c.upsert_documents(["x"], chunk_tokens=16, overlap_tokens=9),
    ),
    "documents: search chunks 0": (InvalidArgumentError, lambda c: c.search_documents("x", chunks=0)),
    "documents: search score median": (InvalidArgumentError, lambda c: c.search_documents("x", score="median")),
    "documents: get a None id": (InvalidInputError, lambda c: c.get_document(None)),
    "count": ("result", lambda c: c.count()),
    "count a Filter": ("result", lambda c: c.count(TOPIC_A)),
    "count a dict filter": ("result", lambda c: c.count({"must_not": [{"key": "topic", "match": {"value": "a"}}]})),
    "find duplicates": ("result", lambda c: c.find_duplicates(TEXTS[4], threshold=-1.0, limit=2)),
    "find duplicates of many": ("result", lambda c: c.find_duplicates([TEXTS[0], TEXTS[2]], threshold=0.5)),
    "mine duplicates": ("result", lambda c: c.mine_duplicates(threshold=-1.0, top_k=1, limit=3)),
    "upsert a bool id": (InvalidInputError, lambda c: c.upsert_texts(["x"], ids=[True])),
    "upsert repeats an id": (InvalidInputError, lambda c: c.upsert_texts(["x", "y"], ids=["doc-9", "doc-9"])),
    "delete nothing chosen": (InvalidArgumentError, lambda c: c.delete_texts()),
    "delete by ids and filter": (InvalidArgumentError, lambda c: c.delete_texts(["doc-1"], query_filter=TOPIC_A)),
    "delete unknown ids, then count": ("result", lambda c: (c.delete_texts(["missing", 99]), c.count())),
    "delete a known id, then read it": ("result", lambda c: (c.delete_texts(["doc-2"]), c.get(["doc-2", "doc-1"]))),
    "delete by filter, then count": (
        "result",
        lambda c: (c.delete_texts(query_filter={"must": [{"has_id": [3]}]}), c.count()),
    ),
}


def _plain(value: Any) -> Any:
    """An engine-neutral form of a result: dataclasses as tuples."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        fields = {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__ if k != "vector"}
        return tuple(sorted(fields.items()))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _outcome(collection: Any, case: Case) -> Any:
    try:
        return ("result", _plain(case(collection)))
    except SbertQdrantError as exc:
        return ("error", type(exc).__name__, str(exc))
    except Exception as exc:  # noqa: BLE001  (anything else is a bug: show it in the comparison)
        return ("untyped error", type(exc).__name__, str(exc))


@pytest.fixture
def everywhere(tmp_path: Path, tiny_encoder: SentenceEncoder) -> Iterator[dict[str, Callable[[], Any]]]:
    """A fresh collection per (flavour, engine), each holding the same records, opened on demand."""
    opened: list[Engines] = []

    def fresh(flavour: str, engine: str) -> Callable[[], Any]:
        def open_one() -> Any:
            engines = Engines(flavour, engine, tmp_path / f"{flavour}-{engine}-{len(opened)}")
            opened.append(engines)
            coll = engines.open(tiny_encoder)
            payloads = [{"topic": "a" if i < 2 else "b", "n": i} for i in range(len(TEXTS))]
            coll.upsert_texts(TEXTS, ids=IDS, payloads=payloads)
            return coll

        return open_one

    yield {f"{f}-{e}": fresh(f, e) for f in FLAVOURS for e in ENGINES}
    for engines in opened:
        engines.close()


def _kind(outcome: Any) -> str:
    """ "result", or the name of the error's class."""
    return "result" if outcome[0] == "result" else str(outcome[1])


def _expected_kind(expected: Expected) -> str:
    return expected if isinstance(expected, str) else expected.__name__


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_engine_answers_alike(case: str, everywhere: dict[str, Callable[[], Any]]) -> None:
    expected, call = CASES[case]
    outcomes = {where: _outcome(open_one(), call) for where, open_one in everywhere.items()}
    reference = outcomes["sync-edge"]
    assert reference[0] != "untyped error", reference
    assert _kind(reference) == _expected_kind(expected), reference
    assert all(_alike(outcome, reference) for outcome in outcomes.values()), outcomes


def _alike(a: Any, b: Any) -> bool:
    """Equal, floats (scores) to within 1e-4: engines sum in different orders."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-4
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_alike(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_alike(a[k], b[k]) for k in a)
    return bool(a == b)


def test_reading_a_missing_collection_fails_alike(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    outcomes = {}
    for flavour in FLAVOURS:
        for engine in ENGINES:
            engines = Engines(flavour, engine, tmp_path / f"{flavour}-{engine}")
            coll = engines.open(tiny_encoder, name="missing")
            reads = (CASES["get no ids"][1], CASES["count"][1])
            outcomes[flavour, engine] = [_outcome(coll, read) for read in reads]
            engines.close()
    assert len({repr(o) for o in outcomes.values()}) == 1
    assert [_kind(o) for o in next(iter(outcomes.values()))] == [CollectionNotFoundError.__name__] * 2
