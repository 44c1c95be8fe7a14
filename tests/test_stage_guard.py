"""The stage guard: a stage is measured against the stage below it on held-out labelled queries and kept only with
a gain of at least the margin; a useless stage (a random token projection) is turned off, saying why, and a good
one (a re-ranker that knows the answers) is kept."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from sbert_qdrant import MultiVectorEncoder, TextCollection, testing
from sbert_qdrant.encoder.layers import Dense
from sbert_qdrant.errors import InvalidArgumentError, InvalidInputError
from sbert_qdrant.training import STAGE_MARGIN, check_stage, split_labelled

WORDS = [f"{a}{b}" for a in ("alpha", "beta", "gamma", "delta", "omega") for b in ("red", "sun", "oak", "sea")]


class _Oracle:
    """A re-ranker that knows the answer: a pair scores the number of the query's words in the text."""

    num_labels = 1

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        return np.array([len(set(q.split()) & set(t.split())) for q, t in pairs], dtype=np.float32)


def _corpus() -> tuple[list[str], dict[int, str], dict[int, set[int]]]:
    rng = random.Random(0)
    texts = [" ".join(rng.sample(WORDS, 6)) + f" tag{i}" for i in range(20)]
    queries = {i: f"tag{i} " + " ".join(texts[i].split()[:2]) for i in range(20)}
    return texts, queries, {i: {i} for i in range(20)}


def test_a_useless_stage_is_turned_off_and_a_good_one_kept(tmp_path: Path) -> None:
    texts, queries, relevant = _corpus()
    transformer = testing.tiny_transformer()
    tokens = MultiVectorEncoder(transformer, Dense(transformer.dimension, 8, bias=False), name="random")
    with TextCollection("guard", testing.tiny_encoder(), location=tmp_path, named_vectors={"tokens": tokens}) as coll:
        coll.upsert_texts(texts, ids=list(range(20)))
        _, held = split_labelled(queries, held_out=0.5)
        asked = {q: queries[q] for q in held}
        useless = check_stage(
            coll,
            asked,
            relevant,
            stage={"mode": "sparse", "rescore": "tokens", "candidates": 20},
            below={"mode": "sparse"},
            stage_name="late interaction (random projection)",
            below_name="BM25",
        )
        assert not useless.kept and useless.gain < STAGE_MARGIN and useless.without > 90
        assert useless.search_options == {"mode": "sparse"}
        assert "turned off" in useless.report() and f"{useless.without:.2f}" in useless.report()
        good = check_stage(
            coll,
            asked,
            relevant,
            stage={"mode": "dense", "rerank": _Oracle(), "rerank_candidates": 20},
            below={"mode": "dense"},
            stage_name="re-rank",
            below_name="dense",
        )
        assert good.kept and good.with_stage > 90 and good.search_options["rerank_candidates"] == 20
        assert good.report().startswith("re-rank: kept")


def test_the_held_out_split_is_stable_and_never_empty() -> None:
    train, held = split_labelled(range(100))
    assert set(held) == set(split_labelled(reversed(range(100)))[1]) and 5 <= len(held) <= 40  # order aside
    assert sorted(train + held) == list(range(100)) and not set(train) & set(held)
    assert split_labelled(range(100)) == split_labelled(range(100))
    assert len(split_labelled(["a", "b"], held_out=0.01)[1]) == 1
    with pytest.raises(InvalidInputError, match="two or more"):
        split_labelled(["only"])
    with pytest.raises(InvalidArgumentError, match="held_out=1"):
        split_labelled(range(10), held_out=1)
