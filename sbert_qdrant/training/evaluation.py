"""Evaluators: STS (Spearman/Pearson), pair classification (accuracy, F1, AP) and retrieval (MRR, nDCG, recall).

An evaluator is called with an encoder and returns ``{metric: value}``; ``primary_metric`` names the one the
trainer keeps the best checkpoint by. The pair evaluators also take a :class:`CrossEncoder`, whose ``predict`` score
replaces the cosine. Correlations, accuracy, F1, AP, MRR, nDCG and recall are percentages (x100); thresholds are
cosine values (a cross-encoder's scores).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from scipy.stats import pearsonr, spearmanr

from ..dedup import average_precision, best_accuracy_threshold, best_f1_threshold
from ..encoder import CrossEncoder, SentenceEncoder
from ..errors import InvalidArgumentError, InvalidInputError


class Evaluator(Protocol):
    """Anything the trainer can evaluate with: callable on an encoder (or cross-encoder), naming its primary metric."""

    primary_metric: str

    def __call__(self, encoder: SentenceEncoder | CrossEncoder) -> dict[str, float]: ...


class _PairEvaluator:
    """Shared by the pair evaluators: the pairs, their gold values and the score of each pair."""

    def __init__(
        self, sentences1: Sequence[str], sentences2: Sequence[str], gold: Sequence[float], batch_size: int = 64
    ) -> None:
        if not len(sentences1) == len(sentences2) == len(gold) or not sentences1:
            raise InvalidInputError(
                f"got {len(sentences1)} first texts, {len(sentences2)} second texts and {len(gold)} labels; "
                "pass one label per pair and at least one pair."
            )
        self.sentences1, self.sentences2 = list(sentences1), list(sentences2)
        self.gold = np.asarray(gold, dtype=np.float64)
        self.batch_size = batch_size

    def scores(self, encoder: SentenceEncoder | CrossEncoder) -> np.ndarray:
        """cos(u, v) of every pair, each distinct text encoded once; or a cross-encoder's score of every pair."""
        if isinstance(encoder, CrossEncoder):
            if encoder.num_labels != 1:
                raise InvalidArgumentError(
                    f"{type(self).__name__} needs one score per pair; this cross-encoder has "
                    f"num_labels={encoder.num_labels}."
                )
            pairs = list(zip(self.sentences1, self.sentences2, strict=True))
            return np.asarray(encoder.predict(pairs, batch_size=self.batch_size, show_progress_bar=False), np.float64)
        texts = list(dict.fromkeys([*self.sentences1, *self.sentences2]))
        vectors = np.asarray(encoder.encode(texts, batch_size=self.batch_size, normalize=True))
        index = {text: i for i, text in enumerate(texts)}
        a = vectors[[index[t] for t in self.sentences1]]
        b = vectors[[index[t] for t in self.sentences2]]
        return (a * b).sum(axis=1)


class STSEvaluator(_PairEvaluator):
    """Spearman and Pearson correlation (x100) of cos(u, v), or the cross-encoder's score, with gold scores."""

    primary_metric = "spearman"

    def __call__(self, encoder: SentenceEncoder | CrossEncoder) -> dict[str, float]:
        scores = self.scores(encoder)
        return {
            "spearman": 100 * float(spearmanr(scores, self.gold).statistic),
            "pearson": 100 * float(pearsonr(scores, self.gold).statistic),
        }


def best_thresholds(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Best accuracy and best F1 over all score thresholds (a pair is positive when its score >= threshold)."""
    accuracy_threshold, accuracy = best_accuracy_threshold(scores, labels)
    f1 = best_f1_threshold(scores, labels)
    return {
        "accuracy": 100 * accuracy,
        "accuracy_threshold": accuracy_threshold,
        "f1": 100 * f1.f1,
        "f1_threshold": f1.threshold,
        "precision": 100 * f1.precision,
        "recall": 100 * f1.recall,
    }


class PairClassificationEvaluator(_PairEvaluator):
    """Duplicate detection from cosine (or a cross-encoder's score): best-threshold accuracy and F1 (with precision,
    recall) and AP (primary)."""

    primary_metric = "ap"

    def __init__(
        self, sentences1: Sequence[str], sentences2: Sequence[str], labels: Sequence[int], batch_size: int = 64
    ) -> None:
        super().__init__(sentences1, sentences2, labels, batch_size)
        if not np.isin(self.gold, (0, 1)).all():
            bad = sorted(set(self.gold.tolist()) - {0, 1})[:5]
            raise InvalidInputError(f"labels must be 0 or 1; found {bad}.")
        self.labels = self.gold.astype(np.int64)
        positives = int(self.labels.sum())
        if positives in (0, self.labels.size):
            raise InvalidInputError(
                f"pair classification needs both duplicate (1) and non-duplicate (0) pairs; these {self.labels.size} "
                f"pairs have {positives} duplicates. Check the label column of the evaluation file."
            )

    def __call__(self, encoder: SentenceEncoder | CrossEncoder) -> dict[str, float]:
        scores = self.scores(encoder)
        return {**best_thresholds(scores, self.labels), "ap": 100 * average_precision(scores, self.labels)}


class TextSearcher(Protocol):
    """What retrieval evaluation needs from a collection: ``search_text`` returning hits with an ``id``."""

    def search_text(self, query: str, limit: int = 10) -> Sequence[Any]: ...


def ranking_metrics(ranked: Sequence[Hashable], relevant: set[Hashable], k_values: Iterable[int]) -> dict[str, float]:
    """MRR@10, nDCG@10 and recall@k (fractions) of one ranked list of ids against its relevant ids."""
    hits = [doc in relevant for doc in ranked]
    first = next((rank for rank, hit in enumerate(hits[:10], start=1) if hit), None)
    dcg = sum(1 / math.log2(rank + 1) for rank, hit in enumerate(hits[:10], start=1) if hit)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(len(relevant), 10) + 1))
    metrics = {"mrr@10": 1 / first if first else 0.0, "ndcg@10": dcg / ideal}
    for k in k_values:
        metrics[f"recall@{k}"] = sum(hits[:k]) / len(relevant)
    return metrics


class RetrievalEvaluator:
    """MRR@10, nDCG@10 (primary) and recall@k of queries against a corpus, averaged over queries.

    relevant: query id -> ids of its relevant corpus documents. Without ``searcher`` the corpus is encoded
    and searched by exact cosine in memory; with one (e.g. a TextCollection already holding the corpus under
    the same ids) its ``search_text`` answers the queries and the encoder argument is not used. ``searcher`` may
    also be a function of the encoder under evaluation returning one (e.g. a fresh collection it has just indexed
    the corpus into): called at every evaluation, so a model being trained is measured through a real collection
    (closed afterwards when it has ``close()``).
    """

    primary_metric = "ndcg@10"

    def __init__(
        self,
        queries: Mapping[Any, str],
        corpus: Mapping[Any, str],
        relevant: Mapping[Any, Iterable[Any]],
        k_values: Sequence[int] = (1, 5, 10),
        searcher: TextSearcher | Callable[[SentenceEncoder], TextSearcher] | None = None,
        batch_size: int = 64,
    ) -> None:
        if not k_values or any(k < 1 for k in k_values):
            raise InvalidArgumentError(f"k_values={list(k_values)!r} must be positive integers.")
        self.relevant = {q: set(docs) for q, docs in relevant.items() if q in queries and set(docs)}
        if not self.relevant:
            raise InvalidInputError("no query has a relevant document; relevant maps query ids to corpus ids.")
        unknown = [d for docs in self.relevant.values() for d in docs if d not in corpus]
        if unknown and searcher is None:
            raise InvalidInputError(f"relevant names ids not in the corpus, e.g. {unknown[0]!r}; add them to corpus.")
        self.queries = {q: queries[q] for q in self.relevant}
        self.corpus_ids = list(corpus)
        self.corpus_texts = [corpus[d] for d in self.corpus_ids]
        self.k_values = tuple(k_values)
        self.searcher = searcher
        self.batch_size = batch_size

    @property
    def depth(self) -> int:
        return max(10, *self.k_values)

    def _rank_in_memory(self, encoder: SentenceEncoder) -> list[list[Hashable]]:
        docs = np.asarray(encoder.encode(self.corpus_texts, batch_size=self.batch_size, normalize=True))
        queries = np.asarray(encoder.encode(list(self.queries.values()), batch_size=self.batch_size, normalize=True))
        depth = min(self.depth, len(docs))
        ranked = []
        for start in range(0, len(queries), 1024):  # bounded memory for the score block
            scores = queries[start : start + 1024] @ docs.T
            top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
            for row, candidates in zip(scores, top, strict=True):
                best = candidates[np.argsort(-row[candidates], kind="stable")]
                ranked.append([self.corpus_ids[i] for i in best])
        return ranked

    def _rank(self, searcher: TextSearcher) -> list[list[Hashable]]:
        return [[hit.id for hit in searcher.search_text(q, limit=self.depth)] for q in self.queries.values()]

    def __call__(self, encoder: SentenceEncoder | CrossEncoder) -> dict[str, float]:
        if self.searcher is None:
            if isinstance(encoder, CrossEncoder):
                raise InvalidArgumentError(
                    "a cross-encoder cannot search a corpus on its own; pass a searcher (a collection that "
                    "retrieves, and may re-rank with it) or evaluate a SentenceEncoder."
                )
            ranked = self._rank_in_memory(encoder)
        elif hasattr(self.searcher, "search_text"):
            ranked = self._rank(self.searcher)
        else:
            if isinstance(encoder, CrossEncoder):
                raise InvalidArgumentError("a searcher built from the encoder needs a SentenceEncoder.")
            searcher = self.searcher(encoder)
            try:
                ranked = self._rank(searcher)
            finally:
                close = getattr(searcher, "close", None)
                if close is not None:
                    close()
        totals: dict[str, float] = {}
        for docs, query_id in zip(ranked, self.queries, strict=True):
            for name, value in ranking_metrics(docs, self.relevant[query_id], self.k_values).items():
                totals[name] = totals.get(name, 0.0) + value
        return {name: 100 * value / len(self.queries) for name, value in totals.items()}
