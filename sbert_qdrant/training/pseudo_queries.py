"""Pseudo-queries a corpus already holds, for adapting a retriever with no labelled questions: a text's title, its
headings and some of its sentences, each paired with the rest of the text, kept only when BM25 confirms the pair.

A title (a payload field) asks for its text without the title; a Markdown heading asks for its section; a sentence
(drawn at random, or the text's last ones, where abstracts state their findings) asks for its text with the
sentence taken out (the title kept). A candidate is kept when the collection's own BM25 search (``mode="sparse"``)
ranks its text among the ``bm25_top_k`` best hits for it: a sentence so generic that BM25 cannot find where it came
from ("Results were significant.") teaches nothing. ``bm25_min_rank=2`` also drops the candidates whose text BM25
ranks first: the ones its own words already settle, which teach a dense model only what BM25 knows. On real
abstracts nearly every sentence is settled so (99.3 % of 18,805 on 2,000 SciFact abstracts): ``query_word_dropout``
drops each of a query's words with that probability first (the text it asks for is unchanged), so that fewer of
its words point at its text, as with a real question. A query found in more than one text is dropped (it names
none of them). The texts are read through the collection's public ``scroll`` and searched through
``search_texts``, like hard-negative mining; the choice of sentences and the order are seeded.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from tqdm.auto import tqdm

from ..errors import InvalidArgumentError, InvalidInputError
from ..records import Key

logger = logging.getLogger(__name__)

PseudoQueryKind = Literal["title", "heading", "sentence"]
#: Which sentences a text gives: drawn at random, or its last ones.
SentenceChoice = Literal["random", "last"]

_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_SCROLL_PAGE = 256


class PseudoQuerySource(Protocol):
    """What pseudo-queries need from a collection (a ``TextCollection``): its texts (count, scroll), batched search."""

    def count(self) -> int: ...

    def scroll(
        self, scroll_filter: Any = None, limit: int = 10, offset: Key | None = None
    ) -> tuple[list[Any], Any]: ...

    def search_texts(self, queries: Sequence[str], limit: int = 10, *, mode: Any = "dense") -> list[list[Any]]: ...


@dataclass(frozen=True)
class PseudoQuery:
    """A query found in the corpus: ``positive`` is the id of its text, ``context`` what it is trained against (the
    text without the query)."""

    query: str
    positive: Key
    context: str
    kind: PseudoQueryKind


@dataclass
class PseudoQueries:
    """The confirmed pairs and what became of the other candidates."""

    pairs: list[PseudoQuery]
    texts: int
    candidates: int
    repeated: int
    unconfirmed: int
    too_easy: int = 0

    def counts(self) -> dict[str, int]:
        """Pairs per kind (title, heading, sentence)."""
        found: dict[str, int] = {}
        for pair in self.pairs:
            found[pair.kind] = found.get(pair.kind, 0) + 1
        return found


def pseudo_queries(
    collection: PseudoQuerySource,
    *,
    title_field: str | None = "title",
    max_pairs: int = 2000,
    sentences_per_text: int = 1,
    bm25_top_k: int = 10,
    bm25_min_rank: int = 1,
    sentence_choice: SentenceChoice = "random",
    query_word_dropout: float = 0.0,
    min_query_words: int = 3,
    max_query_words: int = 48,
    min_context_words: int = 16,
    seed: int = 42,
    batch_size: int = 64,
    show_progress_bar: bool | None = None,
) -> PseudoQueries:
    """(query, positive id) pairs from the stored texts of ``collection``, confirmed by its BM25 search.

    title_field: the payload field holding a text's title (None: no titles). Up to ``sentences_per_text`` sentences
    of ``min_query_words``..``max_query_words`` words are taken from each text (``sentence_choice``: drawn at random
    or its last ones); a pair needs ``min_context_words`` words left beside its query. ``query_word_dropout``: the
    probability of dropping each word of a query (one left with fewer than ``min_query_words`` is not used). A pair
    is kept when BM25 ranks its text ``bm25_min_rank``..``bm25_top_k`` (1 is first). Candidates are confirmed in a
    seeded order until ``max_pairs`` are kept. Holds every stored text in memory.
    """
    for name, value in {
        "max_pairs": max_pairs,
        "bm25_top_k": bm25_top_k,
        "min_query_words": min_query_words,
        "max_query_words": max_query_words,
        "batch_size": batch_size,
    }.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name}={value!r} must be a positive integer.")
    for name, value in {"sentences_per_text": sentences_per_text, "min_context_words": min_context_words}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(f"{name}={value!r} must be a non-negative integer.")
    if max_query_words < min_query_words:
        raise InvalidArgumentError(f"max_query_words={max_query_words} is below min_query_words={min_query_words}.")
    if isinstance(bm25_min_rank, bool) or not isinstance(bm25_min_rank, int) or not 1 <= bm25_min_rank <= bm25_top_k:
        raise InvalidArgumentError(
            f"bm25_min_rank={bm25_min_rank!r} must be an integer in 1..bm25_top_k ({bm25_top_k}); 1 keeps every "
            "confirmed pair, 2 drops those BM25 ranks first."
        )
    if isinstance(query_word_dropout, bool) or not isinstance(query_word_dropout, int | float):
        raise InvalidArgumentError(f"query_word_dropout={query_word_dropout!r} must be a number in 0..1 (0: none).")
    if not 0 <= query_word_dropout < 1:
        raise InvalidArgumentError(f"query_word_dropout={query_word_dropout!r} must be in 0..1 (0: none).")
    if sentence_choice not in ("random", "last"):
        raise InvalidArgumentError(f"sentence_choice={sentence_choice!r} must be 'random' or 'last'.")
    show = logger.isEnabledFor(logging.INFO) if show_progress_bar is None else show_progress_bar
    stored = _read_texts(collection, title_field, show)
    if not stored:
        raise InvalidInputError(
            "the collection holds no texts; write the corpus with upsert_texts first (documents are not read)."
        )
    rng = random.Random(seed)
    limits = (min_query_words, max_query_words, min_context_words)
    draw = _last if sentence_choice == "last" else rng.sample
    candidates = [
        c for key, text, title in stored for c in _candidates(key, text, title, sentences_per_text, limits, draw)
    ]
    if query_word_dropout:
        shortened = (_dropped(c, query_word_dropout, min_query_words, rng) for c in candidates)
        candidates = [c for c in shortened if c is not None]
    if not candidates:
        raise InvalidInputError(
            f"no pseudo-query in {len(stored)} texts: none has a title (payload field {title_field!r}), a heading or "
            f"a sentence of {min_query_words}..{max_query_words} words with {min_context_words} words beside it; "
            "pass title_field, or lower min_query_words / min_context_words."
        )
    unique, repeated = _unique(candidates)
    rng.shuffle(unique)
    pairs, unconfirmed, too_easy = _confirmed(
        collection, unique, max_pairs, (bm25_min_rank, bm25_top_k), batch_size, show
    )
    if not pairs:
        raise InvalidInputError(
            f"BM25 confirmed none of {len(unique)} pseudo-queries (their text was never ranked {bm25_min_rank}.."
            f"{bm25_top_k}; {too_easy} ranked above {bm25_min_rank}); raise bm25_top_k or lower bm25_min_rank."
        )
    logger.info(
        "%d pseudo-queries from %d texts (%d repeated, %d unconfirmed, %d too easy)",
        len(pairs),
        len(stored),
        repeated,
        unconfirmed,
        too_easy,
    )
    return PseudoQueries(pairs, len(stored), len(candidates), repeated, unconfirmed, too_easy)


def _read_texts(collection: PseudoQuerySource, title_field: str | None, show: bool) -> list[tuple[Key, str, str]]:
    """(id, text, title or "") of every stored text, by id (a fixed order for the seeded draw)."""
    found: list[tuple[Key, str, str]] = []
    offset: Any = None
    with tqdm(total=collection.count(), desc="Reading texts", unit="text", disable=not show) as progress:
        while True:
            page, offset = collection.scroll(limit=_SCROLL_PAGE, offset=offset)
            for stored in page:
                title = (stored.payload or {}).get(title_field) if title_field else None
                if stored.text:
                    found.append((stored.id, stored.text, title.strip() if isinstance(title, str) else ""))
            progress.update(len(page))
            if offset is None:
                break
    return sorted(found, key=lambda row: (str(type(row[0])), str(row[0])))


def _words(text: str) -> int:
    return len(text.split())


def _last(spans: list[str], count: int) -> list[str]:
    """The last ``count`` of ``spans``."""
    return spans[len(spans) - count :]


def _candidates(
    key: Key,
    text: str,
    title: str,
    sentences: int,
    limits: tuple[int, int, int],
    draw: Callable[[list[str], int], list[str]],
) -> list[PseudoQuery]:
    """A text's title, headings and up to ``sentences`` sentences (chosen by ``draw``), each with the text it asks
    for."""
    low, high, context_words = limits
    body = text[len(title) :].lstrip(" \t\n:.-") if title and text.startswith(title) else text
    found: list[PseudoQuery] = []
    if title and low <= _words(title) <= high and _words(body) >= context_words:
        found.append(PseudoQuery(title, key, body, "title"))
    marks = list(_HEADING.finditer(body))
    ends = [m.start() for m in marks[1:]] + [len(body)] if marks else []
    for mark, end in zip(marks, ends, strict=True):
        section = body[mark.end() : end].strip()
        if low <= _words(mark.group(1)) <= high and _words(section) >= context_words:
            found.append(PseudoQuery(mark.group(1).strip(), key, section, "heading"))
    prose = _HEADING.sub(" ", body)
    spans = [s.strip() for s in _SENTENCE_END.split(prose) if low <= _words(s) <= high]
    for sentence in draw(spans, min(sentences, len(spans))):
        rest = " ".join(text.replace(sentence, " ", 1).split())
        if _words(rest) >= context_words:
            found.append(PseudoQuery(sentence, key, rest, "sentence"))
    return found


def _dropped(candidate: PseudoQuery, rate: float, fewest: int, rng: random.Random) -> PseudoQuery | None:
    """``candidate`` with each query word dropped with probability ``rate``; None if fewer than ``fewest`` are left."""
    kept = [word for word in candidate.query.split() if rng.random() >= rate]
    return replace(candidate, query=" ".join(kept)) if len(kept) >= fewest else None


def _unique(candidates: list[PseudoQuery]) -> tuple[list[PseudoQuery], int]:
    """The candidates whose query (case and spacing aside) comes from one text only; and how many were dropped."""
    by_query: dict[str, list[PseudoQuery]] = {}
    for candidate in candidates:
        by_query.setdefault(" ".join(candidate.query.casefold().split()), []).append(candidate)
    unique = [found[0] for found in by_query.values() if len({c.positive for c in found}) == 1]
    return unique, len(candidates) - len(unique)


def _confirmed(
    collection: PseudoQuerySource,
    candidates: list[PseudoQuery],
    wanted: int,
    ranks: tuple[int, int],
    batch_size: int,
    show: bool,
) -> tuple[list[PseudoQuery], int, int]:
    """The candidates, in order, whose text BM25 ranks within ``ranks`` (first, last; 1-based), until ``wanted`` are
    kept; and how many were not found in the top ``last`` and how many were ranked above ``first``."""
    first, last = ranks
    kept: list[PseudoQuery] = []
    asked = unconfirmed = too_easy = 0
    with tqdm(total=wanted, desc="Confirming with BM25", unit="pair", disable=not show) as progress:
        while len(kept) < wanted and asked < len(candidates):
            batch = candidates[asked : asked + batch_size]
            asked += len(batch)
            results = collection.search_texts([c.query for c in batch], limit=last, mode="sparse")
            confirmed = []
            for candidate, hits in zip(batch, results, strict=True):
                rank = next((i for i, hit in enumerate(hits, 1) if hit.id == candidate.positive), None)
                if rank is None:
                    unconfirmed += 1
                elif rank < first:
                    too_easy += 1
                else:
                    confirmed.append(candidate)
            confirmed = confirmed[: wanted - len(kept)]
            kept.extend(confirmed)
            progress.update(len(confirmed))
    return kept, unconfirmed, too_easy


@dataclass(frozen=True)
class HardQueries:
    """Held-out pseudo-queries made harder: ``pairs`` kept (BM25 ranks their text ``min_rank`` or lower, or misses
    it), and how many were dropped as too easy or too short after word dropout."""

    pairs: list[PseudoQuery]
    too_easy: int
    too_short: int


def harder_queries(
    collection: PseudoQuerySource,
    pairs: Sequence[PseudoQuery],
    *,
    word_dropout: float = 0.5,
    min_rank: int = 2,
    depth: int = 10,
    min_query_words: int = 3,
    seed: int = 42,
    batch_size: int = 64,
) -> HardQueries:
    """``pairs`` with each query word dropped with probability ``word_dropout`` (as a real question shares fewer words
    with its answer), kept where BM25 ranks the text ``min_rank`` or lower, or not in its ``depth`` best: a check
    that BM25's own words settle says little about a dense model."""
    if not 0 <= word_dropout < 1:
        raise InvalidArgumentError(f"word_dropout={word_dropout!r} must be in 0..1 (0: none).")
    if isinstance(min_rank, bool) or not isinstance(min_rank, int) or min_rank < 1:
        raise InvalidArgumentError(f"min_rank={min_rank!r} must be a positive integer (1: keep every pair).")
    rng = random.Random(seed)
    shortened = [_dropped(p, word_dropout, min_query_words, rng) if word_dropout else p for p in pairs]
    candidates = [p for p in shortened if p is not None]
    kept: list[PseudoQuery] = []
    for start in range(0, len(candidates), batch_size):
        batch = candidates[start : start + batch_size]
        results = collection.search_texts([p.query for p in batch], limit=depth, mode="sparse")
        for pair, hits in zip(batch, results, strict=True):
            rank = next((i for i, hit in enumerate(hits, 1) if hit.id == pair.positive), None)
            if rank is None or rank >= min_rank:
                kept.append(pair)
    return HardQueries(kept, len(candidates) - len(kept), len(pairs) - len(candidates))
