"""Retrieve, then re-rank with a cross-encoder: ``search_text(rerank=...)`` and ``search_documents(rerank=...)`` on
every engine here, checked against the cross-encoder's own scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from flavours import Engines
from test_collection import QUESTIONS

from sbert_qdrant import CrossEncoder, InvalidArgumentError, SentenceEncoder
from sbert_qdrant._collection.search import blended_scores
from sbert_qdrant.cli import main
from sbert_qdrant.testing import tiny_encoder


@pytest.fixture(scope="module")
def cross(tmp_path_factory: pytest.TempPathFactory) -> CrossEncoder:
    """A tiny cross-encoder with a random head: its order is arbitrary, so re-ranking visibly changes results. The
    head is scaled up (as in test_cross_encoder): a random tiny BERT's logits are so alike that a batch row's rounding
    could swap two texts."""
    folder = tmp_path_factory.mktemp("tiny")
    tiny_encoder().save(folder)
    cross = CrossEncoder.from_transformer(folder, seed=3)
    with torch.no_grad():
        cross.transformer.model.classifier.weight.mul_(1000)
    return cross


def assert_clear_order(cross: CrossEncoder, query: str, texts: list[str]) -> None:
    """The cross-encoder's logits for these texts lie 1e-5 apart or more: far beyond a batch row's rounding on any CPU,
    so the order the collection re-ranks into is the order computed here."""
    logits = cross.predict([(query, t) for t in texts], activation="identity")
    assert float(np.diff(np.sort(logits)).min()) > 1e-5, np.sort(logits)


def test_rerank_orders_hits_by_the_cross_encoder(
    make: Engines, tiny_encoder: SentenceEncoder, cross: CrossEncoder
) -> None:
    coll = make.open(tiny_encoder)
    ids = coll.upsert_texts(QUESTIONS)
    query = "learning Python"
    plain = {h.id: h.score for h in coll.search_text(query, limit=6)}
    assert_clear_order(cross, query, QUESTIONS)
    expected = sorted(zip(cross.predict([(query, t) for t in QUESTIONS]).tolist(), ids, strict=True), reverse=True)
    for with_payload in (True, False):
        hits = coll.search_text(query, limit=3, rerank=cross, rerank_candidates=6, with_payload=with_payload)
        assert [h.id for h in hits] == [i for _, i in expected[:3]]
        assert [h.score for h in hits] == pytest.approx([s for s, _ in expected[:3]], abs=1e-5)
        assert all(h.retrieval_score == pytest.approx(plain[h.id], abs=1e-5) and h.text for h in hits)
    shallow = coll.search_text(query, limit=2, rerank=cross, rerank_candidates=2)  # only the 2 nearest re-ranked
    assert {h.id for h in shallow} == set(sorted(plain, key=plain.__getitem__, reverse=True)[:2])
    many = coll.search_texts([query, "sky colour"], limit=2, rerank=cross, mode="hybrid")
    assert [len(hits) for hits in many] == [2, 2] and all(h.retrieval_score is not None for h in many[1])


def test_rerank_documents_by_their_chunks(make: Engines, tiny_encoder: SentenceEncoder, cross: CrossEncoder) -> None:
    coll = make.open(tiny_encoder)
    pages = [" ".join(QUESTIONS[i : i + 3] * 4) for i in range(4)]
    coll.upsert_documents(pages, ids=["a", "b", "c", "d"], chunk_tokens=16)
    hits = coll.search_documents("capital of France", limit=2, chunks=2, rerank=cross, rerank_candidates=4)
    assert len(hits) == 2 and hits[0].score >= hits[1].score
    for hit in hits:
        scores = cross.predict([("capital of France", c.text) for c in hit.chunks]).tolist()
        assert [c.score for c in hit.chunks] == pytest.approx(sorted(scores, reverse=True), abs=1e-5)
        assert hit.score == pytest.approx(hit.chunks[0].score) and all(
            c.retrieval_score is not None for c in hit.chunks
        )


def test_bad_rerank_arguments_are_refused(make: Engines, tiny_encoder: SentenceEncoder, cross: CrossEncoder) -> None:
    coll = make.open(tiny_encoder)
    coll.upsert_texts(QUESTIONS)
    with pytest.raises(InvalidArgumentError, match="must be a CrossEncoder"):
        coll.search_text("x", rerank=tiny_encoder)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="rerank_candidates=0"):
        coll.search_text("x", rerank=cross, rerank_candidates=0)
    for weight in (0, 1.5, True, "0.5", float("nan")):
        with pytest.raises(InvalidArgumentError, match="rerank_weight="):
            coll.search_text("x", rerank=cross, rerank_weight=weight)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="rerank_weight="):
            coll.search_documents("x", rerank=cross, rerank_weight=weight)  # type: ignore[arg-type]


def test_blended_scores_scale_each_score_over_the_candidates() -> None:
    assert blended_scores([3.0, -1.0], [0.2, 0.9], 1) == [3.0, -1.0]  # the re-ranker alone: its own scores
    assert blended_scores([3.0, 1.0, 2.0], [0.2, 0.6, 1.0], 0.25) == pytest.approx([0.25, 0.375, 0.875])
    assert blended_scores([5.0, 5.0], [0.1, 0.3], 0.5) == pytest.approx([0.0, 0.5])  # a constant score adds nothing
    assert blended_scores([], [], 0.5) == []


class ReversedRetrieval:
    """A re-ranker (the Reranker protocol) that scores a pair by the rank its text has in ``order``, best first: a
    stand-in whose scores this test knows, not a model."""

    num_labels = 1

    def __init__(self, order: list[str]) -> None:
        self.order = order

    def predict(self, pairs: list[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        return np.array([-float(self.order.index(text)) for _, text in pairs])


def test_rerank_weight_blends_the_rerankers_order_with_the_retrievals(
    make: Engines, tiny_encoder: SentenceEncoder
) -> None:
    coll = make.open(tiny_encoder)
    coll.upsert_texts(QUESTIONS)
    query = "learning Python"
    plain = coll.search_text(query, limit=6)
    reverse = ReversedRetrieval([h.text or "" for h in reversed(plain)])  # the retrieval's order, upside down
    alone = coll.search_text(query, limit=6, rerank=reverse, rerank_candidates=6)
    assert [h.id for h in alone] == [h.id for h in reversed(plain)]
    kept = coll.search_text(query, limit=6, rerank=reverse, rerank_candidates=6, rerank_weight=0.01)
    assert kept[0].id == plain[0].id  # a small weight: the retrieval's best stays first
    first = [h.score for h in plain]
    low, high = min(first), max(first)
    for hit in kept:
        rank = [h.id for h in plain].index(hit.id)
        cross = rank / 5  # the stand-in's score of this hit (rank - 5), min-max scaled over the six
        assert hit.score == pytest.approx(0.01 * cross + 0.99 * (hit.retrieval_score - low) / (high - low), abs=1e-5)


def test_cli_search_reranks_with_a_saved_cross_encoder(
    tmp_path: Path, cross: CrossEncoder, capsys: pytest.CaptureFixture[str]
) -> None:
    model, cross_dir = tmp_path / "bi", tmp_path / "cross"
    tiny_encoder().save(model)
    cross.save(cross_dir)
    source = tmp_path / "q.txt"
    source.write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    engine = ["--location", str(tmp_path / "qdrant"), "--model", str(model), "--device", "cpu", "--precision", "fp32"]
    engine.append("--no-progress")
    assert main(["index", str(source), *engine]) == 0
    assert main(["search", "learning Python", "--limit", "2", "--rerank", str(cross_dir), "--json", *engine]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert_clear_order(cross, "learning Python", QUESTIONS)
    expected = sorted(cross.predict([("learning Python", q) for q in QUESTIONS]).tolist(), reverse=True)[:2]
    assert [r["score"] for r in rows] == pytest.approx(expected, abs=1e-5)
    assert all(r["retrieval_score"] is not None for r in rows)
    blend = ["--rerank", str(cross_dir), "--rerank-weight", "0.5", "--json", *engine]
    assert main(["search", "learning Python", "--limit", "6", *blend]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 6 and all(0 <= r["score"] <= 1 for r in rows)  # the blend of two scaled scores
    assert max(r["score"] for r in rows) > 0.5 > min(r["score"] for r in rows)
