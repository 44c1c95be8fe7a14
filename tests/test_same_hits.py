"""The comparison of search answers the suite relies on (tests/same_hits.py): near-ties may swap, nothing else."""

from __future__ import annotations

import re

import pytest
from same_hits import assert_ranked_like, assert_same_hits

from sbert_qdrant import Hit


def hits(*pairs: tuple[object, float], text: str = "t") -> list[Hit]:
    return [Hit(key, score, text) for key, score in pairs]  # type: ignore[arg-type]


def test_equal_answers_and_rounding_noise_pass() -> None:
    a = hits(("a", 0.9), ("b", 0.8), ("c", 0.7))
    assert_same_hits(a, hits(("a", 0.9), ("b", 0.8 + 1e-8), ("c", 0.7)))
    assert_same_hits([a, []], [hits(("a", 0.9), ("b", 0.8), ("c", 0.7 - 1e-8)), []])  # one list per query


def test_near_ties_may_swap_even_where_the_limit_cut_them() -> None:
    a = hits(("a", 0.9), ("b", 0.5), ("c", 0.5 + 1e-8), ("d", 0.1), ("e", 0.1))
    assert_same_hits(a, hits(("a", 0.9), ("c", 0.5), ("b", 0.5), ("d", 0.1), ("e", 0.1 + 1e-9)))
    assert_same_hits(a, hits(("a", 0.9), ("c", 0.5), ("b", 0.5), ("e", 0.1), ("f", 0.1)))  # f tied with e past the cut
    assert_ranked_like(["a", "c"], a)  # the first places of a longer ranking, a tie cut in the middle


@pytest.mark.parametrize(
    ("b", "says"),
    [
        (hits(("b", 0.8), ("a", 0.9), ("c", 0.7)), "places 0..0"),  # a real swap
        (hits(("a", 0.9), ("b", 0.8), ("d", 0.6)), "places 2..2"),  # another hit, not tied with the last
        (hits(("a", 0.9), ("b", 0.8001), ("c", 0.7)), "hit 'b'.score"),  # a score off by more than rounding
        (hits(("a", 0.9), ("b", 0.8), ("c", 0.7), text="other"), "hit 'a'.text"),  # texts are ours: exact
        (hits(("a", 0.9), ("b", 0.8)), "3 hits != 2 hits"),
    ],
)
def test_real_differences_fail(b: list[Hit], says: str) -> None:
    with pytest.raises(AssertionError, match=re.escape(says)):
        assert_same_hits(hits(("a", 0.9), ("b", 0.8), ("c", 0.7)), b)


def test_a_ranking_must_follow_its_reference() -> None:
    reference = hits(("a", 0.9), ("b", 0.8), ("c", 0.8 - 1e-7), ("d", 0.2))
    assert_ranked_like(["a", "c", "b"], reference)
    with pytest.raises(AssertionError, match=r"places 1\.\.2"):
        assert_ranked_like(["a", "d"], reference)
    with pytest.raises(AssertionError, match="more than"):
        assert_ranked_like(["a", "b", "c", "d", "e"], reference)
