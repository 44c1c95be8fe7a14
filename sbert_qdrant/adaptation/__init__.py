"""Adapting a retriever to a corpus with no labelled questions (``adapt_to_corpus``): pseudo-queries the corpus
holds, hard negatives mined from the collection, a held-out check that keeps the base model where training shows no
gain. Joins a collection and the training package, so it sits above both."""

from __future__ import annotations

from .corpus import EASY_HELD_OUT, MIN_GAIN, CorpusAdaptation, adapt_to_corpus, mine_against_context
from .held_out import HELD_OUT_MODES

__all__ = [
    "EASY_HELD_OUT",
    "HELD_OUT_MODES",
    "MIN_GAIN",
    "CorpusAdaptation",
    "adapt_to_corpus",
    "mine_against_context",
]
