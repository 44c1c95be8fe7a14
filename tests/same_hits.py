"""Compare search answers as far as the engine can promise them: ids, texts and payloads exactly, scores within a
tolerance, order up to near-ties. Engines (qdrant-client's local mode through numpy's BLAS, Qdrant Edge) may score the
same call a few ulps apart on some CPUs, and two hits whose scores are that close may then swap places."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["assert_ranked_like", "assert_same_hits"]


def assert_same_hits(a: Sequence[Any], b: Sequence[Any], *, rel: float = 1e-6, abs: float = 1e-6) -> None:
    """``a`` and ``b`` answer the same search: hits (anything with ``id`` and ``score``), or lists of hits per query.

    Same length; ids in the same order except among near-equal scores; per id, every float field within the tolerance
    and every other field (text, payload, chunks' offsets) equal. The last places may go to different hits when
    their scores tie with the last of ``a``'s (the limit cut a tie).
    """
    assert len(a) == len(b), f"{len(a)} hits != {len(b)} hits"
    if a and isinstance(a[0], (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            try:
                assert_same_hits(x, y, rel=rel, abs=abs)
            except AssertionError as exc:
                raise AssertionError(f"query {i}: {exc}") from None
        return
    assert_ranked_like([h.id for h in b], a, rel=rel, abs=abs, scores=[h.score for h in b])
    ours = {h.id: h for h in a}
    for hit in b:
        if hit.id in ours:
            _assert_alike(ours[hit.id], hit, rel, abs, f"hit {hit.id!r}")


def assert_ranked_like(
    ids: Sequence[Any],
    reference: Sequence[Any],
    *,
    rel: float = 1e-6,
    abs: float = 1e-6,
    scores: Sequence[float] | None = None,
) -> None:
    """``ids`` are the first ``len(ids)`` of the ``reference`` hits, in order, except that hits whose reference scores
    are within the tolerance (twice it: both sides may move) may come in either order, and the places past the
    reference's last tie may go to any other hit tied with it (when ``scores``, the ids' own, say so)."""
    assert len(ids) <= len(reference), f"{len(ids)} ids, more than the {len(reference)} reference hits"
    assert len(set(map(repr, ids))) == len(ids), f"repeated ids in {list(ids)}"
    ref_ids, ref_scores = [h.id for h in reference], [h.score for h in reference]
    for run in _near_ties(ref_scores, 2 * rel, 2 * abs):
        if run.start >= len(ids):
            break
        got, want = list(ids[run.start : min(run.stop, len(ids))]), ref_ids[run.start : run.stop]
        extra = [key for key in got if key not in want]
        cut = run.stop == len(reference) and scores is not None  # the reference's limit may have cut this tie
        if cut and scores is not None:
            tail = zip(got, scores[run.start : run.start + len(got)], strict=True)
            extra = [k for k, s in tail if k in extra and not _close(s, ref_scores[-1], 2 * rel, 2 * abs)]
        complete = run.stop <= len(ids) and not cut
        missing = Counter(map(repr, want)) - Counter(map(repr, got)) if complete else Counter()
        assert not extra and not missing, (
            f"places {run.start}..{run.stop - 1}: got ids {got}, expected {want} in some order "
            f"(reference scores {ref_scores[run.start : run.stop]})"
        )


def _near_ties(scores: Sequence[float], rel: float, abs: float) -> list[range]:
    """Runs of consecutive places whose scores are each within the tolerance of the next."""
    runs, start = [], 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or not _close(scores[i - 1], scores[i], rel, abs):
            runs.append(range(start, i))
            start = i
    return runs


def _close(x: float, y: float, rel: float, abs: float) -> bool:
    return math.isclose(x, y, rel_tol=rel, abs_tol=abs)


def _assert_alike(x: Any, y: Any, rel: float, abs: float, where: str) -> None:
    """Floats within the tolerance, dataclasses and lists field by field, anything else equal."""
    if isinstance(x, float) or isinstance(y, float):
        ok = isinstance(x, (int, float)) and isinstance(y, (int, float)) and _close(x, y, rel, abs)
        assert ok, f"{where}: {x!r} != {y!r} within rel={rel}, abs={abs}"
    elif dataclasses.is_dataclass(x) and type(x) is type(y):
        for field in dataclasses.fields(x):
            _assert_alike(getattr(x, field.name), getattr(y, field.name), rel, abs, f"{where}.{field.name}")
    elif isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        assert len(x) == len(y), f"{where}: {len(x)} items != {len(y)} items"
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _assert_alike(u, v, rel, abs, f"{where}[{i}]")
    else:
        assert x == y, f"{where}: {x!r} != {y!r}"
