"""Property: any unicode text survives upsert -> get / search byte-identical, and any JSON payload comes back equal,
on both engines (Qdrant Edge's JSON parser may move a float by one unit in the last place: compared to 1e-15)."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qdrant_client import QdrantClient, models

from sbert_qdrant import SentenceEncoder, TextCollection

texts = st.text(min_size=1, max_size=300).filter(lambda t: t.strip() != "")  # NUL, emoji, any script; no surrogates
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
containers = lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)  # noqa: E731
values = st.recursive(scalars, containers, max_leaves=8)
field_names = st.text(min_size=1, max_size=12).filter(lambda k: k not in ("text", "key"))
payloads = st.dictionaries(field_names, values, max_size=4)


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-15, abs_tol=0.0) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_texts_and_payloads_round_trip(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    engines = [
        TextCollection("prop", tiny_encoder, location=tmp_path / "edge"),
        TextCollection("prop", tiny_encoder, client=QdrantClient(":memory:")),
    ]

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.tuples(texts, payloads), min_size=1, max_size=4))
    def round_trip(records: list[tuple[str, dict[str, object]]]) -> None:
        keys = [uuid.uuid4().hex for _ in records]
        for coll in engines:
            ids = coll.upsert_texts([t for t, _ in records], ids=keys, payloads=[p for _, p in records])
            stored = coll.get(keys)
            assert [(s.id, s.text) for s in stored] == [(k, t) for k, (t, _) in zip(keys, records, strict=True)]
            assert all(same(s.payload, p) for s, (_, p) in zip(stored, records, strict=True))
            mine = models.Filter(must=[models.HasIdCondition(has_id=list(ids))])
            hits = coll.search_texts([t for t, _ in records], limit=len(records), query_filter=mine)
            for (text, _), key, found in zip(records, ids, hits, strict=True):
                assert any(h.id == key and h.text == text for h in found)

    try:
        round_trip()
    finally:
        for coll in engines:
            coll.close()
