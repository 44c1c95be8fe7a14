"""Adapting a retriever to a corpus with no labelled questions: pseudo-queries the corpus holds (titles, headings,
sentences, confirmed by BM25), hard negatives mined from the collection, MultipleNegativesRankingLoss, measured
before and after on a held-out sample of the pseudo-queries, and optionally a re-embedded collection.

The held-out sample is a set of texts: none of their pseudo-queries is trained on. It is measured in a small
collection of its own (in a temporary Qdrant Edge folder): the held-out texts and the source collection's best
``pool_depth`` dense and BM25 hits for each held-out query, encoded once by the model before training and once after,
searched dense and hybrid (nDCG@10, x100). The held-out queries are made harder than the trained ones (words dropped,
and only those whose text BM25 ranks second or lower, or misses): on SciFact the confirmed pseudo-queries scored 97
before training, too easy to judge by. Where training gains less than ``min_gain`` on every mode, the base model is
kept (saved to ``output`` unchanged) and the report says why. A collection holding documents is read as documents:
their texts rebuilt from the chunks, searched one hit per document, the held-out pool written as documents.
Joins a collection and the training package, so it sits above both.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..collection import TextCollection
from ..encoder import SentenceEncoder
from ..errors import InvalidArgumentError, InvalidInputError
from ..training import (
    CoSENTLoss,
    Example,
    MinedNegatives,
    MiningGuards,
    MultipleNegativesRankingLoss,
    Trainer,
    TrainingConfig,
    mine_hard_negatives,
)
from ..training.pseudo_queries import (
    HardQueries,
    PseudoQueries,
    PseudoQuery,
    SentenceChoice,
    harder_queries,
    pseudo_queries,
)
from ..types import TrainPrecision
from .held_out import HELD_OUT_MODES, DocumentsSource, HeldOutPool, held_out_split

logger = logging.getLogger(__name__)

#: Held-out nDCG@10 (x100) at or above which a mode's sample is too easy to judge a change: its pseudo-queries
#: already find their texts (on SciFact, held-out dense 97.3 -> 98.9 went with 66.0 -> 64.5 on the real claims).
EASY_HELD_OUT = 95.0
#: Held-out nDCG@10 (x100) every mode must gain for the adapted model to be kept.
MIN_GAIN = 0.5


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
    hard: HardQueries = dataclasses.field(default_factory=lambda: HardQueries([], 0, 0))
    min_gain: float = MIN_GAIN
    documents: bool = False
    distilled: int = 0

    @property
    def kept(self) -> bool:
        """Whether the adapted model was kept: every mode gained ``min_gain`` on a sample hard enough to judge by (a
        ``min_gain`` of 0 or less asks for no gain, so any sample will do)."""
        return (self.min_gain <= 0 or not self.saturated_modes) and all(
            self.after[mode] - self.before[mode] >= self.min_gain for mode in HELD_OUT_MODES
        )

    @property
    def reason(self) -> str:
        """Why the adapted model was kept or the base model kept instead."""
        if self.saturated_modes and self.min_gain > 0:
            return (
                f"the held-out check is too easy to judge by ({' and '.join(self.saturated_modes)} scored >= "
                f"{EASY_HELD_OUT:g} before training)"
            )
        short = [m for m in HELD_OUT_MODES if self.after[m] - self.before[m] < self.min_gain]
        if short:
            return f"held-out {' and '.join(short)} gained less than {self.min_gain:+.2f} nDCG@10"
        return f"every held-out mode gained {self.min_gain:+.2f} nDCG@10 or more"

    @property
    def saturated_modes(self) -> list[str]:
        """The modes whose held-out sample scored ``EASY_HELD_OUT`` or more before training: their pseudo-queries
        find their texts already, so their before/after says little about real queries."""
        return [mode for mode in HELD_OUT_MODES if self.before[mode] >= EASY_HELD_OUT]

    def report(self) -> str:
        """A few lines for a person: the pairs, the training, before and after."""
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self.found.counts().items()))
        unit = "documents" if self.documents else "texts"
        lines = [
            f"pseudo-queries: {len(self.found.pairs)} confirmed by BM25 ({kinds}) from {self.found.texts} {unit}; "
            f"{self.found.candidates} candidates, {self.found.repeated} dropped as repeated, "
            f"{self.found.unconfirmed} not confirmed"
            + (f", {self.found.too_easy} ranked above bm25_min_rank" if self.found.too_easy else ""),
            f"held out: {self.held_out_queries} queries of {self.held_out_texts} {unit} (never trained on; "
            f"{self.hard.too_easy} more dropped as BM25 ranked their text first, {self.hard.too_short} too short "
            f"after word dropout); trained on {self.train_examples} of {self.train_pairs} pairs (the rest had too "
            "few negatives)"
            + (
                f"; and {self.distilled} (query, hit) pairs of the hybrid ranking distilled (CoSENT)"
                if self.distilled
                else ""
            ),
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
        if self.kept:
            lines.append(f"kept the adapted model: {self.reason}")
        else:
            lines.append(f"kept the base model (saved unchanged, nothing re-embedded): {self.reason}")
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
    held_out_dropout: float = 0.5,
    held_out_min_rank: int = 2,
    min_gain: float = MIN_GAIN,
    documents: bool | None = None,
    distill_top_k: int = 0,
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
    trained model (``TextCollection.reembed``), only when the adapted model is kept. held_out_dropout,
    held_out_min_rank: the held-out queries' word dropout and the BM25 rank from which their text counts as hard
    (``harder_queries``; 0 and 1: the trained pairs' own). min_gain: the held-out nDCG@10 every mode must gain, else
    the base model is saved to ``output`` instead. documents: adapt to the collection's documents (None: when it
    holds documents and no texts). distill_top_k: also distil the hybrid (dense + BM25) ranking into the dense model:
    each training pseudo-query's ``distill_top_k`` best hybrid hits, their fused scores scaled to 0..1 per query, as
    CoSENT targets beside MNRL (0: off). The other arguments as in ``pseudo_queries`` and ``TrainingConfig``.
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
    if documents is None:
        documents = collection.count(kind="texts") == 0 and collection.count(kind="documents") > 0
    source: Any = DocumentsSource(collection) if documents else collection
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    found = pseudo_queries(
        source,
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
    test, train = held_out_split(found.pairs, held_out, seed)
    hard = harder_queries(
        source, test, word_dropout=held_out_dropout, min_rank=held_out_min_rank, depth=bm25_top_k, seed=seed
    )
    if not hard.pairs:
        raise InvalidInputError(
            f"none of {len(test)} held-out pseudo-queries is hard enough to judge by ({hard.too_easy} ranked first by "
            f"BM25, {hard.too_short} too short after word dropout): lower held_out_min_rank={held_out_min_rank} "
            f"or held_out_dropout={held_out_dropout}, or raise held_out."
        )
    seconds["pseudo-queries"] = time.perf_counter() - start
    start = time.perf_counter()
    mined = mine_against_context(collection, train, negatives, guards, show_progress_bar, documents)
    if not mined.examples:
        raise InvalidInputError(
            f"none of {len(train)} pseudo-queries had {negatives} hard negative(s) ranked {guards.range_min}.."
            f"{guards.range_max - 1}; the collection is too small: lower negatives or mine_range."
        )
    examples = mined.examples
    soft = _hybrid_targets(source, train, distill_top_k) if distill_top_k else []
    seconds["mining"] = time.perf_counter() - start
    trained = copy.deepcopy(encoder)
    with tempfile.TemporaryDirectory(prefix="sbert-qdrant-held-out-") as scratch:
        held = HeldOutPool(source, hard.pairs, pool_depth, Path(scratch), show_progress_bar, documents)
        start = time.perf_counter()
        before = held.scores(trained)
        seconds["held-out before"] = time.perf_counter() - start
        start = time.perf_counter()
        _train(trained, examples, soft, config, train_tokens, folder)
        seconds["training"] = time.perf_counter() - start
        start = time.perf_counter()
        after = held.scores(trained)
        seconds["held-out after"] = time.perf_counter() - start
    result = CorpusAdaptation(
        found,
        len({p.positive for p in hard.pairs}),
        len(hard.pairs),
        len(train),
        len(examples),
        before,
        after,
        folder,
        None,
        seconds,
        hard,
        min_gain,
        documents,
        len(soft),
    )
    if not result.kept:
        logger.warning("adapt_to_corpus kept the base model: %s", result.reason)
        encoder.save(folder)
        return result
    if reembed_into is not None:
        start = time.perf_counter()
        collection.reembed(reembed_into, trained, show_progress_bar=show_progress_bar)
        seconds["re-embedding"] = time.perf_counter() - start
    return dataclasses.replace(result, reembedded_into=reembed_into)


def mine_against_context(
    collection: TextCollection,
    pairs: Sequence[PseudoQuery],
    negatives: int,
    guards: MiningGuards,
    show_progress_bar: bool | None = None,
    documents: bool = False,
) -> MinedNegatives:
    """Hard negatives mined in hybrid mode for each pseudo-query (of the ``documents``, one hit per document), its
    example's positive being the pair's context (its text without the query: a text that holds the query verbatim
    teaches only lexical overlap)."""
    context = {p.query: p.context for p in pairs}
    mined = mine_hard_negatives(
        collection,
        [p.query for p in pairs],
        [p.positive for p in pairs],
        documents=documents,
        mode="hybrid",
        num_negatives=negatives,
        guards=guards,
        show_progress_bar=show_progress_bar,
    )
    examples = [Example((e.texts[0], context[e.texts[0]], *e.texts[2:])) for e in mined.examples]
    return MinedNegatives(examples, mined.skipped)


def _hybrid_targets(source: Any, pairs: Sequence[PseudoQuery], top_k: int) -> list[Example]:
    """(query, hit text) pairs of each pseudo-query's ``top_k`` best hybrid hits, labelled by their fused score
    scaled to 0..1 over the query's hits (the best 1): the ranking the dense model is taught to reproduce."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 2:
        raise InvalidArgumentError(f"distill_top_k={top_k!r} must be 0 (off) or an integer of 2 or more.")
    queries = list(dict.fromkeys(p.query for p in pairs))
    found = source.search_texts(queries, limit=top_k, mode="hybrid")
    texts = {s.id: s.text for s in source.get(list(dict.fromkeys(h.id for hits in found for h in hits))) if s.text}
    examples: list[Example] = []
    for query, hits in zip(queries, found, strict=True):
        scored = [(texts[h.id], h.score) for h in hits if h.id in texts]
        low, high = min((s for _, s in scored), default=0.0), max((s for _, s in scored), default=0.0)
        if len(scored) >= 2 and high > low:
            examples.extend(Example((query, text), (score - low) / (high - low)) for text, score in scored)
    return examples


def _train(
    encoder: SentenceEncoder,
    examples: list[Example],
    soft: list[Example],
    config: TrainingConfig,
    tokens: int | None,
    folder: Path,
) -> None:
    """MNRL on ``examples`` (and CoSENT on ``soft`` targets) at ``tokens`` tokens; the model saved to ``folder`` at
    its own token limit."""
    limit = encoder.max_seq_length
    if tokens is not None and tokens < limit:
        encoder.max_seq_length = tokens
    objectives: list[tuple[Any, list[Example]]] = [(MultipleNegativesRankingLoss(encoder), examples)]
    if soft:
        objectives.append((CoSENTLoss(encoder), soft))
    try:
        Trainer(encoder, objectives, config).fit()
    finally:
        encoder.max_seq_length = limit
    encoder.save(folder)
