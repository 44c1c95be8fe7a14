"""A guard for a search stage trained from a few hundred labelled queries (late interaction, a re-ranker): the stage
is measured against the stage below it on a held-out part of the user's labels, never trained on, and kept only
where it gains at least a margin of nDCG@10; otherwise it stays off and the report says why, with the figures.

A stage that gains on some splits of SciFact's claims and loses on others (late interaction: +2.7 to -2.6 over five
folds, -0.56 on the unseen test split) is not one a user can turn on blindly; the held-out part is the user's own
evidence. The searcher is any object with ``search_text`` (and ``search_documents`` for documents): a collection,
read through its public search only (the training package never imports the store or the collection).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import InvalidArgumentError, InvalidInputError
from .evaluation import ranking_metrics

#: nDCG@10 (x100) a stage must gain over the stage below it on the held-out queries to be kept.
STAGE_MARGIN = 0.5


class StageSearcher(Protocol):
    """What the guard searches: ``search_text`` (texts) and, for documents, ``search_documents``."""

    def search_text(self, query: str, limit: int = 10, **options: Any) -> list[Any]: ...


@dataclass(frozen=True)
class StageCheck:
    """A stage measured against the stage below it on held-out labelled queries (nDCG@10, x100)."""

    stage: str
    below: str
    queries: int
    without: float
    with_stage: float
    margin: float
    options: dict[str, Any] = field(default_factory=dict, compare=False)
    below_options: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def gain(self) -> float:
        return self.with_stage - self.without

    @property
    def kept(self) -> bool:
        """Whether the stage gained at least ``margin`` on the held-out queries."""
        return self.gain >= self.margin

    @property
    def search_options(self) -> dict[str, Any]:
        """The options to search with: the stage's where it is kept, else the stage below it."""
        return dict(self.options if self.kept else self.below_options)

    def report(self) -> str:
        """One line for a person: kept or turned off, and why, with the figures."""
        figures = (
            f"held-out nDCG@10 {self.without:.2f} ({self.below}) -> {self.with_stage:.2f} ({self.stage}), "
            f"{self.gain:+.2f} on {self.queries} labelled queries never trained on"
        )
        if self.kept:
            return f"{self.stage}: kept; {figures} (margin {self.margin:+.2f})"
        return (
            f"{self.stage}: turned off; {figures}, below the margin of {self.margin:+.2f}: searching with "
            f"{self.below} alone, which this stage did not beat on your own queries"
        )


def split_labelled(
    queries: Iterable[Hashable], held_out: float = 0.2, salt: str = "stage-guard"
) -> tuple[list[Hashable], list[Hashable]]:
    """(train, held-out) query ids: each id held out by a hash of it and ``salt`` with probability ``held_out``, so
    that the split is the same on every run and does not depend on the order; at least one id on each side."""
    if isinstance(held_out, bool) or not isinstance(held_out, int | float) or not 0 < held_out < 1:
        raise InvalidArgumentError(f"held_out={held_out!r} must be a fraction in 0..1 (0.2: a fifth held out).")
    ids = list(dict.fromkeys(queries))
    if len(ids) < 2:
        raise InvalidInputError(f"{len(ids)} labelled queries: a held-out split needs two or more.")

    def draw(key: Hashable) -> float:
        digest = hashlib.blake2b(f"{salt}:{type(key).__name__}:{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    ranked = sorted(ids, key=draw)
    cut = min(len(ids) - 1, max(1, sum(draw(key) < held_out for key in ids)))
    held = set(ranked[:cut])
    return [q for q in ids if q not in held], [q for q in ids if q in held]


def check_stage(
    searcher: StageSearcher,
    queries: Mapping[Hashable, str],
    relevant: Mapping[Hashable, Iterable[Hashable]],
    *,
    stage: Mapping[str, Any],
    below: Mapping[str, Any],
    stage_name: str = "stage",
    below_name: str = "the stage below",
    margin: float = STAGE_MARGIN,
    documents: bool = False,
) -> StageCheck:
    """Measure ``searcher`` searched with the ``stage`` options against the ``below`` options (the same search
    without the stage) on held-out ``queries`` (id -> text) and their ``relevant`` ids; keep the stage only with a
    gain of at least ``margin`` nDCG@10 (x100). ``documents``: search with ``search_documents`` (document ids)."""
    if isinstance(margin, bool) or not isinstance(margin, int | float):
        raise InvalidArgumentError(f"margin={margin!r} must be a number of nDCG@10 points (x100), e.g. 0.5.")
    labelled = {q: set(relevant[q]) for q in queries if q in relevant and set(relevant[q])}
    if not labelled:
        raise InvalidInputError("no held-out query has a relevant id; relevant maps query ids to stored ids.")
    search = searcher.search_documents if documents else searcher.search_text  # type: ignore[attr-defined]

    def ndcg(options: Mapping[str, Any]) -> float:
        total = 0.0
        for query, wanted in labelled.items():
            ranked = [hit.id for hit in search(queries[query], limit=10, **options)]
            total += ranking_metrics(ranked, wanted, (10,))["ndcg@10"]
        return 100 * total / len(labelled)

    return StageCheck(
        stage_name, below_name, len(labelled), ndcg(below), ndcg(stage), float(margin), dict(stage), dict(below)
    )
