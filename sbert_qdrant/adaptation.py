"""Adapting a retriever to a corpus with no labelled questions: pseudo-queries the corpus holds (titles, headings,
sentences, confirmed by BM25), hard negatives mined from the collection, MultipleNegativesRankingLoss, measured
before and after on a held-out sample of the pseudo-queries, and optionally a re-embedded collection.

The held-out sample is a set of texts: none of their pseudo-queries is trained on. It is measured in a small
collection of its own (in a temporary Qdrant Edge folder): the held-out texts and the source collection's best
``pool_depth`` dense and BM25 hits for each held-out query, encoded once by the model before training and once after,
searched dense and hybrid (nDCG@10, x100). Joins a collection and the training package, so it sits above both.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .collection import TextCollection
from .encoder import SentenceEncoder
from .errors import InvalidArgumentError, InvalidInputError
from .records import Key
from .training import (
    Example,
    MinedNegatives,
    MiningGuards,
    MultipleNegativesRankingLoss,
    RetrievalEvaluator,
    Trainer,
    TrainingConfig,
    mine_hard_negatives,
)
from .training.pseudo_queries import PseudoQueries, PseudoQuery, SentenceChoice, pseudo_queries
from .types import SearchMode, TrainPrecision

logger = logging.getLogger(__name__)

#: The modes measured on the held-out sample.
HELD_OUT_MODES: tuple[SearchMode, ...] = ("dense", "hybrid")
#: Held-out nDCG@10 (x100) at or above which a mode's sample is too easy to judge a change: its pseudo-queries
#: already find their texts (on SciFact, held-out dense 97.3 -> 98.9 went with 66.0 -> 64.5 on the real claims).
EASY_HELD_OUT = 95.0


@dataclass(frozen=True)
class CorpusAdaptation:
    """What ``adapt_to_corpus`` did: the pairs it found, what it trained on, nDCG@10 (x100) by mode on the held-out
    sample before and after, and where the model (and the re-embedded collection) went."""

    found: PseudoQueries
    held_out_texts: int
    held_out_queries: int
    train_pairs: int
    train_examples: int
    before: dict[str, float]
    after: dict[str, float]
    model: Path
    reembedded_into: str | None
    seconds: dict[str, float]

    @property
    def saturated_modes(self) -> list[str]:
        """The modes whose held-out sample scored ``EASY_HELD_OUT`` or more before training: their pseudo-queries
        find their texts already, so their before/after says little about real queries."""
        return [mode for mode in HELD_OUT_MODES if self.before[mode] >= EASY_HELD_OUT]

    def report(self) -> str:
        """A few lines for a person: the pairs, the training, before and after."""
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self.found.counts().items()))
        lines = [
            f"pseudo-queries: {len(self.found.pairs)} confirmed by BM25 ({kinds}) from {self.found.texts} texts; "
            f"{self.found.candidates} candidates, {self.found.repeated} dropped as repeated, "
            f"{self.found.unconfirmed} not confirmed"
            + (f", {self.found.too_easy} ranked above bm25_min_rank" if self.found.too_easy else ""),
            f"held out: {self.held_out_queries} queries of {self.held_out_texts} texts (never trained on); "
            f"trained on {self.train_examples} of {self.train_pairs} pairs (the rest had too few negatives)",
        ]
        for mode in HELD_OUT_MODES:
            change = self.after[mode] - self.before[mode]
            lines.append(f"held-out nDCG@10 {mode}: {self.before[mode]:.2f} -> {self.after[mode]:.2f} ({change:+.2f})")
        if self.saturated_modes:
            lines.append(
                f"caution: held-out {' and '.join(self.saturated_modes)} scored >= {EASY_HELD_OUT:g} before training: "
                "too easy to show what the change does to real queries; measure the model on a few of them before "
                "switching readers to it"
            )
        lines.append(
            "note: held-out figures are on pseudo-queries, not real questions; on SciFact they rose (dense +3 to +10) "
            "while the real claims fell (docs/training.md): measure a few real queries before switching readers"
        )
        lines.append(
            f"model: {self.model}" + (f"; re-embedded into {self.reembedded_into}" if self.reembedded_into else "")
        )
        lines.append("seconds: " + ", ".join(f"{step} {value:.0f}" for step, value in self.seconds.items()))
        return "\n".join(lines)


def adapt_to_corpus(
    collection: TextCollection,
    encoder: SentenceEncoder,
    output: str | os.PathLike[str],
    *,
    held_out: int = 100,
    max_pairs: int = 2000,
    title_field: str | None = "title",
    sentences_per_text: int = 1,
    bm25_top_k: int = 10,
    bm25_min_rank: int = 1,
    sentence_choice: SentenceChoice = "random",
    query_word_dropout: float = 0.0,
    max_query_words: int = 48,
    negatives: int = 1,
    mine_range: tuple[int, int] = (10, 50),
    epochs: int = 1,
    batch_size: int = 16,
    learning_rate: float = 2e-5,
    train_tokens: int | None = 128,
    precision: TrainPrecision = "auto",
    pool_depth: int = 10,
    seed: int = 42,
    reembed_into: str | None = None,
    show_progress_bar: bool | None = None,
) -> CorpusAdaptation:
    """Fine-tune a copy of ``encoder`` (the model the collection was built with, loaded for training: not int8) on
    pseudo-queries of the collection's texts, and save it to ``output``; ``encoder`` itself is left as it is.

    max_pairs: pseudo-queries to find, the held-out ones included; held_out: texts whose pseudo-queries are set
    aside. mine_range: hits ranked range_min..range_max-1 are the hard-negative candidates (from 10: nearer hits of a
    pseudo-query are often as relevant as its own text). train_tokens: at most this many tokens per text while
    training (cost; None: the model's limit). reembed_into: a new collection to re-embed this one into with the
    trained model (``TextCollection.reembed``). The other arguments as in ``pseudo_queries`` and
    ``TrainingConfig``.
    """
    for name, value in {"held_out": held_out, "pool_depth": pool_depth}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name}={value!r} must be a positive integer.")
    if reembed_into == collection.collection_name:
        raise InvalidArgumentError(
            f"reembed_into={reembed_into!r} names the collection being adapted; name a new collection to re-embed into."
        )
    if encoder.precision == "int8":
        raise InvalidArgumentError(
            "an int8 encoder cannot be trained; load the collection's model with precision='fp32' to adapt it."
        )
    config = TrainingConfig(
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        precision=precision,
        seed=seed,
        batch_sampler="no_duplicates",
        show_progress_bar=show_progress_bar,
    )
    guards = MiningGuards(*mine_range)
    folder = Path(output)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    found = pseudo_queries(
        collection,
        title_field=title_field,
        max_pairs=max_pairs,
        sentences_per_text=sentences_per_text,
        bm25_top_k=bm25_top_k,
        bm25_min_rank=bm25_min_rank,
        sentence_choice=sentence_choice,
        query_word_dropout=query_word_dropout,
        max_query_words=max_query_words,
        seed=seed,
        show_progress_bar=show_progress_bar,
    )
    test, train = _held_out(found.pairs, held_out, seed)
    seconds["pseudo-queries"] = time.perf_counter() - start
    start = time.perf_counter()
    mined = mine_against_context(collection, train, negatives, guards, show_progress_bar)
    if not mined.examples:
        raise InvalidInputError(
            f"none of {len(train)} pseudo-queries had {negatives} hard negative(s) ranked {guards.range_min}.."
            f"{guards.range_max - 1}; the collection is too small: lower negatives or mine_range."
        )
    examples = mined.examples
    seconds["mining"] = time.perf_counter() - start
    trained = copy.deepcopy(encoder)
    with tempfile.TemporaryDirectory(prefix="sbert-qdrant-held-out-") as scratch:
        held = _HeldOut(collection, test, pool_depth, Path(scratch), show_progress_bar)
        start = time.perf_counter()
        before = held.scores(trained)
        seconds["held-out before"] = time.perf_counter() - start
        start = time.perf_counter()
        _train(trained, examples, config, train_tokens, folder)
        seconds["training"] = time.perf_counter() - start
        start = time.perf_counter()
        after = held.scores(trained)
        seconds["held-out after"] = time.perf_counter() - start
    if reembed_into is not None:
        start = time.perf_counter()
        collection.reembed(reembed_into, trained, show_progress_bar=show_progress_bar)
        seconds["re-embedding"] = time.perf_counter() - start
    return CorpusAdaptation(
        found,
        len({p.positive for p in test}),
        len(test),
        len(train),
        len(examples),
        before,
        after,
        folder,
        reembed_into,
        seconds,
    )


def mine_against_context(
    collection: TextCollection,
    pairs: Sequence[PseudoQuery],
    negatives: int,
    guards: MiningGuards,
    show_progress_bar: bool | None = None,
) -> MinedNegatives:
    """Hard negatives mined in hybrid mode for each pseudo-query, its example's positive being the pair's context
    (its text without the query: a text that holds the query verbatim teaches only lexical overlap)."""
    context = {p.query: p.context for p in pairs}
    mined = mine_hard_negatives(
        collection,
        [p.query for p in pairs],
        [p.positive for p in pairs],
        mode="hybrid",
        num_negatives=negatives,
        guards=guards,
        show_progress_bar=show_progress_bar,
    )
    examples = [Example((e.texts[0], context[e.texts[0]], *e.texts[2:])) for e in mined.examples]
    return MinedNegatives(examples, mined.skipped)


def _held_out(pairs: list[PseudoQuery], texts: int, seed: int) -> tuple[list[PseudoQuery], list[PseudoQuery]]:
    """(held-out, train): every pair of ``texts`` texts drawn with ``seed``, and the others."""
    positives = list(dict.fromkeys(p.positive for p in pairs))
    if len(positives) <= texts:
        raise InvalidInputError(
            f"pseudo-queries came from {len(positives)} texts, not more than held_out={texts}: nothing would be left "
            "to train on; lower held_out, or add texts."
        )
    chosen = set(random.Random(seed).sample(positives, texts))
    return [p for p in pairs if p.positive in chosen], [p for p in pairs if p.positive not in chosen]


def _train(
    encoder: SentenceEncoder, examples: list[Example], config: TrainingConfig, tokens: int | None, folder: Path
) -> None:
    """MNRL on ``examples`` at ``tokens`` tokens; the model saved to ``folder`` at its own token limit."""
    limit = encoder.max_seq_length
    if tokens is not None and tokens < limit:
        encoder.max_seq_length = tokens
    try:
        Trainer(encoder, [(MultipleNegativesRankingLoss(encoder), examples)], config).fit()
    finally:
        encoder.max_seq_length = limit
    encoder.save(folder)


class _ModeSearch:
    """A collection searched in one mode, as the evaluator's searcher."""

    def __init__(self, collection: TextCollection, mode: SearchMode) -> None:
        self.collection, self.mode = collection, mode

    def search_text(self, query: str, limit: int = 10) -> list[Any]:
        return self.collection.search_text(query, limit=limit, with_payload=False, mode=self.mode)


class _HeldOut:
    """The held-out queries and their pool of texts (theirs and the source's best hits), measured for an encoder."""

    def __init__(
        self, source: TextCollection, pairs: Sequence[PseudoQuery], depth: int, folder: Path, show: bool | None
    ) -> None:
        self.queries = {i: p.query for i, p in enumerate(pairs)}
        self.relevant: dict[int, set[Key]] = {i: {p.positive} for i, p in enumerate(pairs)}
        texts = {
            hit.id: hit.text
            for mode in ("dense", "sparse")
            for hits in source.search_texts(list(self.queries.values()), limit=depth, mode=mode)
            for hit in hits
            if hit.text
        }
        texts.update({s.id: s.text for s in source.get([p.positive for p in pairs]) if s.text})
        self.texts = texts
        self.folder, self.show = folder, show

    def scores(self, encoder: SentenceEncoder) -> dict[str, float]:
        with TextCollection(
            "held-out", encoder, location=self.folder, recreate=True, show_progress_bar=self.show
        ) as pool:
            pool.upsert_texts(list(self.texts.values()), ids=list(self.texts))
            return {
                mode: RetrievalEvaluator(self.queries, {}, self.relevant, searcher=_ModeSearch(pool, mode))(encoder)[
                    "ndcg@10"
                ]
                for mode in HELD_OUT_MODES
            }
