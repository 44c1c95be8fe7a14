"""Hard negatives mined from a collection: for each (query, positive ids), the collection's best hits that are not
positives, under guards against false negatives, as (query, positive, negative_1..k) training examples.

Mining goes through a collection's public search (``search_texts`` / ``search_documents``) and reads (``get`` /
``get_document``) only, so any engine and any encoder the collection was built with works. A document positive
counts all its chunks as positive (documents are searched one hit per document).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tqdm.auto import tqdm

from ..errors import InvalidArgumentError, InvalidInputError
from ..records import Key
from ..types import SEARCH_MODES, SearchMode
from .data import Example

logger = logging.getLogger(__name__)

#: The columns of a mined training file: ``query``, ``positive``, then ``negative_1`` .. ``negative_k``.
QUERY_COLUMN, POSITIVE_COLUMN, NEGATIVE_PREFIX = "query", "positive", "negative_"


class MiningSource(Protocol):
    """What mining needs from a collection (a ``TextCollection``): batched text search, document search, reads."""

    def search_texts(self, queries: Sequence[str], limit: int = 10, *, mode: Any = "dense") -> list[list[Any]]: ...

    def search_documents(self, query: str, limit: int = 10, *, mode: Any = "dense") -> list[Any]: ...

    def get(self, ids: Sequence[Key]) -> list[Any]: ...

    def get_document(self, id: Key) -> Any: ...


@dataclass(frozen=True)
class MiningGuards:
    """Which hits may become negatives (sentence-transformers' ``mine_hard_negatives`` guards).

    Ranks count the collection's hits for the query from 0, positives included: hits ranked ``range_min`` to
    ``range_max - 1`` are candidates. Scores are the search mode's (cosine for dense, BM25 for sparse, the fused
    score for hybrid). A candidate must score at most ``max_score`` and at least ``min_score``; with a margin it
    must score at most ``positive - absolute_margin`` and at most ``positive * (1 - relative_margin)``. A positive
    ranked beyond ``range_max`` has no score, so under a margin its row gets no negatives (and is skipped).
    """

    range_min: int = 0
    range_max: int = 50
    max_score: float | None = None
    min_score: float | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = None

    def __post_init__(self) -> None:
        for name in ("range_min", "range_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{name}={value!r} must be a non-negative integer.")
        if self.range_max <= self.range_min:
            raise InvalidArgumentError(
                f"range_max={self.range_max} must exceed range_min={self.range_min}: hits ranked range_min.."
                "range_max-1 are the candidates."
            )
        for name in ("absolute_margin", "relative_margin"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise InvalidArgumentError(f"{name}={value!r} must be >= 0 (None: no margin).")
        if self.relative_margin is not None and self.relative_margin >= 1:
            raise InvalidArgumentError(f"relative_margin={self.relative_margin!r} must be below 1 (0.05: 5 %).")
        if self.max_score is not None and self.min_score is not None and self.min_score > self.max_score:
            raise InvalidArgumentError(f"min_score={self.min_score} exceeds max_score={self.max_score}.")

    def allows(self, score: float, positive: float | None) -> bool:
        """Whether a candidate scored ``score`` may be a negative of a positive scored ``positive`` (None: unranked)."""
        if self.max_score is not None and score > self.max_score:
            return False
        if self.min_score is not None and score < self.min_score:
            return False
        if self.absolute_margin is None and self.relative_margin is None:
            return True
        if positive is None:
            return False
        if self.absolute_margin is not None and score > positive - self.absolute_margin:
            return False
        return self.relative_margin is None or score <= positive * (1 - self.relative_margin)


@dataclass
class MinedNegatives:
    """The mined examples (query, positive, negative_1..k) and the (query, positive id) rows left without k
    negatives."""

    examples: list[Example]
    skipped: list[tuple[str, Key]] = field(default_factory=list)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the examples as JSONL with columns query, positive, negative_1..k (the trainer's ``mnrl`` input)."""
        target = Path(path)
        with target.open("w", encoding="utf-8") as out:
            for example in self.examples:
                query, positive, *negatives = example.texts
                row = {QUERY_COLUMN: query, POSITIVE_COLUMN: positive}
                row.update({f"{NEGATIVE_PREFIX}{i}": text for i, text in enumerate(negatives, start=1)})
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return target

    def labelled_pairs(self) -> list[Example]:
        """Each (query, positive) labelled 1 and each (query, negative) labelled 0: a cross-encoder's
        ``CrossEncoderBCELoss`` input (a re-ranker trained on the same mined negatives)."""
        return [
            Example((query, text), int(i == 0))
            for query, *texts in (e.texts for e in self.examples)
            for i, text in enumerate(texts)
        ]


def mined_columns(columns: Sequence[str]) -> list[str] | None:
    """The text columns of a mined file (query, positive, negative_1..k, as many as it has), or None if it is not
    one."""
    if QUERY_COLUMN not in columns or POSITIVE_COLUMN not in columns:
        return None
    count = 0
    while f"{NEGATIVE_PREFIX}{count + 1}" in columns:
        count += 1
    return [QUERY_COLUMN, POSITIVE_COLUMN, *(f"{NEGATIVE_PREFIX}{i}" for i in range(1, count + 1))]


@dataclass
class _Ranked:
    """One query's hits: ids best first with their scores and (for texts) their texts."""

    ids: list[Key]
    scores: list[float]
    texts: dict[Key, str]


def mine_hard_negatives(
    collection: MiningSource,
    queries: Sequence[str],
    positives: Sequence[Key | Sequence[Key]],
    *,
    documents: bool = False,
    mode: SearchMode = "hybrid",
    num_negatives: int = 3,
    guards: MiningGuards | None = None,
    batch_size: int = 64,
    show_progress_bar: bool | None = None,
) -> MinedNegatives:
    """Mine hard negatives for (query, positive ids) pairs from the texts (or ``documents``) of ``collection``.

    queries[i] is relevant to positives[i] (an id, or several); a query may repeat, its positives are merged. Each
    (query, positive) gives one example: the query, the positive's stored text, and the query's ``num_negatives``
    best hits in ``mode`` that are none of its positives and pass ``guards``. Rows with fewer candidates are
    skipped and listed in ``skipped`` (and logged), never padded.
    """
    guards = guards or MiningGuards()
    if isinstance(num_negatives, bool) or not isinstance(num_negatives, int) or num_negatives < 1:
        raise InvalidArgumentError(f"num_negatives={num_negatives!r} must be a positive integer.")
    if mode not in SEARCH_MODES:
        raise InvalidArgumentError(f"mode={mode!r} must be one of {SEARCH_MODES}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size={batch_size!r} must be a positive integer.")
    wanted = _grouped(queries, positives)
    texts = _read(collection, list(dict.fromkeys(k for keys in wanted.values() for k in keys)), documents)
    absent = [k for keys in wanted.values() for k in keys if k not in texts]
    if absent:
        what = "documents" if documents else "texts"
        raise InvalidInputError(
            f"positive ids {absent[:5]!r} are not stored {what} of the collection ({len(absent)} in all); "
            f"pass the ids the {what} were written with."
        )
    show = logger.isEnabledFor(logging.INFO) if show_progress_bar is None else show_progress_bar
    asked = list(wanted)
    ranked = (
        _rank_documents(collection, asked, guards.range_max, mode, show)
        if documents
        else _rank_texts(collection, asked, guards.range_max, mode, batch_size, show)
    )
    chosen: list[tuple[str, Key, list[Key]]] = []
    skipped: list[tuple[str, Key]] = []
    for query, hits in zip(asked, ranked, strict=True):
        relevant = set(wanted[query])
        place = {key: i for i, key in enumerate(hits.ids)}
        for positive in wanted[query]:
            score = hits.scores[place[positive]] if positive in place else None
            negatives = [
                key
                for rank, key in enumerate(hits.ids[guards.range_min :], start=guards.range_min)
                if key not in relevant and guards.allows(hits.scores[rank], score)
            ][:num_negatives]
            if len(negatives) < num_negatives:
                skipped.append((query, positive))
            else:
                chosen.append((query, positive, negatives))
    if not documents:
        texts.update({k: t for r in ranked for k, t in r.texts.items() if t and k not in texts})
    unread = list(dict.fromkeys(k for *_, keys in chosen for k in keys if k not in texts))
    texts.update(_read(collection, unread, documents))
    examples = [
        Example((query, texts[positive], *(texts[key] for key in negatives))) for query, positive, negatives in chosen
    ]
    if skipped:
        logger.warning(
            "%d of %d (query, positive) rows had fewer than %d negatives passing the guards and were skipped.",
            len(skipped),
            len(skipped) + len(examples),
            num_negatives,
        )
    return MinedNegatives(examples, skipped)


def _grouped(queries: Sequence[str], positives: Sequence[Key | Sequence[Key]]) -> dict[str, list[Key]]:
    """query -> its positive ids in first-seen order; every input checked before anything is searched."""
    if isinstance(queries, str) or len(queries) != len(positives):
        raise InvalidInputError(
            f"got {len(queries)} queries and {len(positives)} positives; pass one positive id (or a list) per query."
        )
    if not queries:
        raise InvalidInputError("queries is empty; pass (query, positive id) pairs to mine negatives for.")
    wanted: dict[str, list[Key]] = {}
    for i, (query, given) in enumerate(zip(queries, positives, strict=True)):
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError(f"queries[{i}] is {query!r}, not a text.")
        keys = [given] if isinstance(given, str | int) else list(given)
        if not keys or any(isinstance(k, bool) or not isinstance(k, str | int) for k in keys):
            raise InvalidInputError(f"positives[{i}] is {given!r}; pass an id (str or int) or a non-empty list.")
        merged = wanted.setdefault(query, [])
        merged.extend(k for k in keys if k not in merged)
    return wanted


def _rank_texts(
    collection: MiningSource, queries: list[str], depth: int, mode: SearchMode, batch_size: int, show: bool
) -> list[_Ranked]:
    ranked: list[_Ranked] = []
    with tqdm(total=len(queries), desc="Mining", unit="query", disable=not show) as progress:
        for start in range(0, len(queries), batch_size):
            for hits in collection.search_texts(queries[start : start + batch_size], limit=depth, mode=mode):
                ranked.append(_Ranked([h.id for h in hits], [h.score for h in hits], {h.id: h.text for h in hits}))
            progress.update(min(batch_size, len(queries) - start))
    return ranked


def _rank_documents(
    collection: MiningSource, queries: list[str], depth: int, mode: SearchMode, show: bool
) -> list[_Ranked]:
    ranked = []
    for query in tqdm(queries, desc="Mining", unit="query", disable=not show):
        hits = collection.search_documents(query, limit=depth, mode=mode)
        ranked.append(_Ranked([h.id for h in hits], [h.score for h in hits], {}))
    return ranked


def _read(collection: MiningSource, keys: list[Key], documents: bool) -> dict[Key, str]:
    """The stored texts (or documents' texts) of ``keys`` that exist."""
    if not documents:
        return {s.id: s.text for s in collection.get(keys) if s.text} if keys else {}
    found = {}
    for key in keys:
        stored = collection.get_document(key)
        if stored is not None:
            found[key] = stored.text
    return found
