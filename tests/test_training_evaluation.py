"""Evaluators: STS correlations, pair-classification thresholds and AP, retrieval metrics (in memory and duck-typed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from sbert_qdrant import InvalidInputError, SentenceEncoder, TextCollection
from sbert_qdrant.dedup import average_precision
from sbert_qdrant.training import PairClassificationEvaluator, RetrievalEvaluator, STSEvaluator
from sbert_qdrant.training.evaluation import best_thresholds


def test_sts_evaluator_matches_scipy_on_cosines(
    tiny_encoder: SentenceEncoder, stsb_sample: tuple[list[str], list[str], list[float]]
) -> None:
    left, right, gold = (x[:60] for x in stsb_sample)
    a, b = tiny_encoder.encode(left), tiny_encoder.encode(right)
    expected = 100 * spearmanr((a * b).sum(axis=1), gold).statistic
    metrics = STSEvaluator(left, right, gold)(tiny_encoder)
    assert metrics["spearman"] == pytest.approx(expected, abs=1e-4) and -100 <= metrics["pearson"] <= 100


def test_thresholds_by_hand() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    labels = np.array([1, 1, 0, 1, 0, 0])
    found = best_thresholds(scores, labels)
    # Cut below 0.8: 5/6 right; cut below 0.6: tp 3, fp 1 -> F1 = 6/7, the best. Thresholds sit midway.
    assert found["accuracy"] == pytest.approx(100 * 5 / 6) and found["accuracy_threshold"] == pytest.approx(0.75)
    assert found["f1"] == pytest.approx(100 * 6 / 7) and found["f1_threshold"] == pytest.approx(0.55)
    assert found["precision"] == pytest.approx(75.0) and found["recall"] == pytest.approx(100.0)
    # AP: precision 1, 1, 3/4 at the three positives.
    assert average_precision(scores, labels) == pytest.approx((1 + 1 + 0.75) / 3)


def test_average_precision_matches_scikit_learn_with_ties() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 200) / 4  # many ties
    labels = rng.integers(0, 2, 200)
    assert average_precision(scores, labels) == pytest.approx(metrics.average_precision_score(labels, scores))


def test_pair_classification_on_identical_and_unrelated_pairs(tiny_encoder: SentenceEncoder) -> None:
    left = ["a red car", "the cat sleeps", "how to cook rice", "stock market news"]
    right = ["a red car", "the cat sleeps", "quantum field theory", "my garden in spring"]
    metrics = PairClassificationEvaluator(left, right, [1, 1, 0, 0])(tiny_encoder)
    assert metrics["ap"] == pytest.approx(100.0) and metrics["accuracy"] == pytest.approx(100.0)
    with pytest.raises(InvalidInputError, match=r"labels must be 0 or 1"):
        PairClassificationEvaluator(left, right, [1, 2, 0, 0])
    with pytest.raises(InvalidInputError, match=r"both duplicate \(1\) and non-duplicate \(0\).* 0 duplicates"):
        PairClassificationEvaluator(left, right, [0, 0, 0, 0])


CORPUS = {"d1": "a red car", "d2": "the cat sleeps", "d3": "how to cook rice", "d4": "stock market news"}


def test_retrieval_in_memory_finds_exact_matches(tiny_encoder: SentenceEncoder) -> None:
    queries = {"q1": "a red car", "q2": "the cat sleeps"}
    metrics = RetrievalEvaluator(queries, CORPUS, {"q1": ["d1"], "q2": {"d2"}}, k_values=(1, 3))(tiny_encoder)
    assert metrics == pytest.approx({"mrr@10": 100.0, "ndcg@10": 100.0, "recall@1": 100.0, "recall@3": 100.0})


@dataclass
class Hit:
    id: str
    score: float


class FakeCollection:
    """Any object with ``search_text`` works, e.g. a TextCollection holding the corpus."""

    def search_text(self, query: str, limit: int = 10) -> list[Hit]:
        ranking = {"q1": ["d3", "d1", "d2"], "q2": ["d4", "d3", "d1"]}[query]
        return [Hit(doc, 1.0 - i / 10) for i, doc in enumerate(ranking[:limit])]


def test_retrieval_through_a_searcher_by_hand(tiny_encoder: SentenceEncoder) -> None:
    evaluator = RetrievalEvaluator(
        {"q1": "q1", "q2": "q2"}, CORPUS, {"q1": {"d1", "d2"}, "q2": {"d2"}}, k_values=(1, 2), searcher=FakeCollection()
    )
    metrics = evaluator(tiny_encoder)
    ndcg_q1 = (1 / np.log2(3) + 1 / np.log2(4)) / (1 + 1 / np.log2(3))
    assert metrics["mrr@10"] == pytest.approx(100 * (0.5 + 0) / 2)
    assert metrics["ndcg@10"] == pytest.approx(100 * ndcg_q1 / 2)
    assert metrics["recall@1"] == pytest.approx(0.0) and metrics["recall@2"] == pytest.approx(100 * 0.5 / 2)


def test_retrieval_input_errors() -> None:
    with pytest.raises(InvalidInputError, match=r"ids not in the corpus, e.g. 'd9'"):
        RetrievalEvaluator({"q": "x"}, CORPUS, {"q": ["d9"]})
    with pytest.raises(InvalidInputError, match=r"no query has a relevant document"):
        RetrievalEvaluator({"q": "x"}, CORPUS, {"other": ["d1"]})


def test_retrieval_through_a_real_collection_equals_the_in_memory_figures(
    tmp_path: Path, default_encoder: SentenceEncoder, stsb_sample: tuple[list[str], list[str], list[float]]
) -> None:
    firsts, seconds, scores = stsb_sample
    corpus = {f"doc-{i}": text for i, text in enumerate(dict.fromkeys(seconds))}
    by_text = {text: key for key, text in corpus.items()}
    pairs = [(a, b) for a, b, s in zip(firsts, seconds, scores, strict=True) if s >= 4.0][:40]
    queries = {f"q{i}": a for i, (a, _) in enumerate(pairs)}
    relevant = {f"q{i}": {by_text[b]} for i, (_, b) in enumerate(pairs)}
    in_memory = RetrievalEvaluator(queries, corpus, relevant, k_values=(1, 5))(default_encoder)
    with TextCollection("corpus", default_encoder, location=tmp_path / "qdrant") as coll:
        coll.upsert_texts(list(corpus.values()), ids=list(corpus))
        through = RetrievalEvaluator(queries, corpus, relevant, k_values=(1, 5), searcher=coll)(default_encoder)
    assert 0 < in_memory["ndcg@10"] < 100 and through == pytest.approx(in_memory, abs=1e-6)
