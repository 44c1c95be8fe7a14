"""Hybrid retrieval on every engine here (sync and async, Qdrant Edge and qdrant-client's local mode): BM25 sparse
vectors stored and searched, engine-side fusion, MMR diversity, BM25 settings kept with the collection, prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA
from flavours import Engines
from qdrant_client import models
from same_hits import assert_ranked_like, assert_same_hits

from sbert_qdrant import Bm25, CollectionMismatchError, SentenceEncoder, UnsupportedError
from sbert_qdrant.testing import tiny_encoder

MODES: list[dict[str, Any]] = [
    {"mode": "dense"},
    {"mode": "sparse"},
    {"mode": "hybrid", "fusion": "rrf"},
    {"mode": "hybrid", "fusion": "dbsf"},
]


@pytest.fixture(scope="module")
def scifact() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """60 real SciFact abstracts and 12 train claims with the abstracts judged relevant (tests/data/README.md)."""
    rows = [json.loads(line) for line in (DATA / "scifact_sample.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["kind"] == "doc"], [r for r in rows if r["kind"] == "query"]


@pytest.fixture(scope="module")
def abstract_vectors(
    default_encoder: SentenceEncoder, scifact: tuple[list[dict[str, Any]], list[dict[str, Any]]]
) -> np.ndarray:
    """The abstracts encoded once for the module's dozen collections (the other tests here encode on the way in)."""
    return default_encoder.encode_document([f"{d['title']} {d['text']}" for d in scifact[0]])


def _indexed(make: Engines, encoder: SentenceEncoder, docs: list[dict[str, Any]], vectors: np.ndarray) -> Any:
    coll = make.open(encoder)
    texts = [f"{d['title']} {d['text']}" for d in docs]
    payloads = [{"half": i % 2} for i in range(len(docs))]
    coll.upsert_texts(
        texts, ids=[d["_id"] for d in docs], payloads=payloads, vectors=vectors, vectors_from=encoder.identity
    )
    return coll


def _mrr(found: list[list[Any]], queries: list[dict[str, Any]]) -> float:
    ranks = [
        next((1 / (i + 1) for i, h in enumerate(hits) if h.id in q["relevant"]), 0.0)
        for hits, q in zip(found, queries, strict=True)
    ]
    return float(np.mean(ranks))


def test_every_mode_finds_the_relevant_abstracts_deterministically(
    make: Engines,
    default_encoder: SentenceEncoder,
    scifact: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    abstract_vectors: np.ndarray,
) -> None:
    docs, queries = scifact
    coll = _indexed(make, default_encoder, docs, abstract_vectors)
    claims = [q["text"] for q in queries]
    mrr = {}
    for options in MODES:
        found = coll.search_texts(claims, limit=10, **options)
        assert_same_hits(found, coll.search_texts(claims, limit=10, **options))  # same call, same answer
        assert all(len(hits) == 10 for hits in found) and all(h.text for hits in found for h in hits)
        mrr[tuple(options.values())] = _mrr(found, queries)
    assert min(mrr.values()) >= 0.6, mrr
    assert mrr["hybrid", "rrf"] >= min(mrr["dense",], mrr["sparse",]), mrr


def test_sparse_scores_follow_the_collection_as_it_grows(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    coll.upsert_texts(["zebra stripes in the savanna", "apple pie recipe", "banana bread recipe"], ids=[1, 2, 3])
    first = coll.search_text("zebra", mode="sparse")
    assert [h.id for h in first] == [1] and first[0].score > 0
    assert coll.search_text("quantum chromodynamics", mode="sparse") == []  # no shared term, no hit
    coll.upsert_texts([f"zebra number {i}" for i in range(4)], ids=[4, 5, 6, 7])
    later = {h.id: h.score for h in coll.search_text("zebra", mode="sparse")}
    assert set(later) == {1, 4, 5, 6, 7} and later[1] < first[0].score  # a commoner term weighs less (IDF)


def test_a_dense_only_collection_keeps_working_and_names_the_fix(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder, sparse=None)
    coll.upsert_texts(["zebra stripes", "apple pie"], ids=[1, 2])
    for mode in ("sparse", "hybrid"):
        with pytest.raises(CollectionMismatchError, match="re-index its texts into a new collection"):
            coll.search_text("zebra", mode=mode)
    reopened = make.open(tiny_encoder)  # the default sparse="bm25" never changes an existing collection
    reopened.upsert_texts(["banana bread"], ids=[3])
    assert [h.id for h in reopened.search_text("zebra stripes", limit=3)] != []
    with pytest.raises(CollectionMismatchError):
        reopened.search_text("zebra", mode="hybrid")


def test_bm25_settings_live_with_the_collection(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder, sparse=Bm25(stemmer=False))
    coll.upsert_texts(["running shoes for trails", "a pair of boots"], ids=[1, 2])
    # Reopened with the default settings, queries are still tokenized as the texts were (unstemmed "running").
    assert [h.id for h in make.open(tiny_encoder).search_text("running", mode="sparse")] == [1]
    with pytest.raises(CollectionMismatchError, match="indexed with Bm25"):
        make.open(tiny_encoder, sparse=Bm25()).search_text("running", mode="sparse")


def test_rrf_weights_pull_the_ranking_towards_one_source(
    make: Engines,
    default_encoder: SentenceEncoder,
    scifact: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    abstract_vectors: np.ndarray,
) -> None:
    docs, queries = scifact
    coll = _indexed(make, default_encoder, docs, abstract_vectors)
    claim = queries[0]["text"]
    dense, sparse = (coll.search_text(claim, limit=5, mode=m) for m in ("dense", "sparse"))
    assert [h.id for h in dense] != [h.id for h in sparse]
    for weights, source in (((1.0, 0.0), dense), ((0.0, 1.0), sparse)):
        fused = coll.search_text(claim, limit=5, mode="hybrid", fusion="rrf", weights=weights)
        assert_ranked_like([h.id for h in fused], source)  # RRF scores ranks: the source's order, up to near-ties


def test_filters_and_thresholds_apply_to_hybrid_results(
    make: Engines,
    default_encoder: SentenceEncoder,
    scifact: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    abstract_vectors: np.ndarray,
) -> None:
    docs, queries = scifact
    coll = _indexed(make, default_encoder, docs, abstract_vectors)
    odd = models.Filter(must=[models.FieldCondition(key="half", match=models.MatchValue(value=1))])
    for fusion in ("rrf", "dbsf"):
        hits = coll.search_text(queries[1]["text"], limit=8, query_filter=odd, mode="hybrid", fusion=fusion)
        assert len(hits) == 8 and {h.payload["half"] for h in hits} == {1}  # the filter holds at every stage
        cut = hits[3].score
        kept = coll.search_text(
            queries[1]["text"], limit=8, query_filter=odd, mode="hybrid", fusion=fusion, score_threshold=cut
        )
        assert kept and all(h.score >= cut for h in kept) and len(kept) < 8


PARAPHRASES = [
    "How do I learn Python quickly?",
    "How can I learn Python fast?",
    "What is the quickest way to learn Python?",
    "What is the fastest way to learn the Python language?",
]
OTHERS = ["Good books for Python beginners", "Is Java harder to learn than Python?", "Why is the sky blue?"]


def test_diversity_trades_relevance_for_variety(make: Engines, default_encoder: SentenceEncoder) -> None:
    coll = make.open(default_encoder)
    coll.upsert_texts(PARAPHRASES + OTHERS)
    plain = coll.search_text("learn Python quickly", limit=4)
    assert {h.text for h in plain} == set(PARAPHRASES)
    relevance_only = coll.search_text("learn Python quickly", limit=4, diversity=0.0)
    assert_same_hits(plain, relevance_only, abs=1e-5)
    varied = coll.search_text("learn Python quickly", limit=4, diversity=0.6)
    assert varied[0].id == plain[0].id and len(varied) == 4
    assert {h.text for h in varied} & set(OTHERS)  # a different angle replaces a paraphrase
    assert_same_hits(varied, coll.search_text("learn Python quickly", limit=4, diversity=0.6))


@pytest.mark.parametrize("mode", ["hybrid", "sparse"])
def test_mmr_after_a_fusion_reorders_its_candidates_by_their_own_relevance(
    make: Engines,
    default_encoder: SentenceEncoder,
    scifact: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    abstract_vectors: np.ndarray,
    mode: str,
) -> None:
    """Issue 64: MMR after hybrid (or BM25) keeps the fusion: diversity 0 is the fused order itself (before, the
    engine re-ordered the fused candidates by dense similarity, and hybrid + MMR scored dense + MMR); every hit
    comes from the fused candidates with its fused score; more diversity brings other texts in."""
    docs, queries = scifact
    coll = _indexed(make, default_encoder, docs, abstract_vectors)
    claims = [q["text"] for q in queries]
    fused = coll.search_texts(claims, 20, mode=mode)  # the candidates MMR picks among for limit 5 (at least 20)
    for diversity in (0.0, 0.2, 0.5):
        found = coll.search_texts(claims, 5, mode=mode, diversity=diversity)
        for hits, candidates in zip(found, fused, strict=True):
            score = {h.id: h.score for h in candidates}
            assert len(hits) == 5 and hits[0].id == candidates[0].id
            assert all(h.id in score and h.score == pytest.approx(score[h.id], abs=1e-6) for h in hits)
            if diversity == 0.0:
                assert_ranked_like([h.id for h in hits], candidates[:5])
    varied = coll.search_texts(claims, 5, mode=mode, diversity=0.9)
    assert any([h.id for h in v] != [h.id for h in c[:5]] for v, c in zip(varied, fused, strict=True))


def test_mmr_after_hybrid_gives_the_same_hits_on_edge_and_local_mode(
    tmp_path: Path,
    default_encoder: SentenceEncoder,
    scifact: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    abstract_vectors: np.ndarray,
) -> None:
    """The re-ordering is the collection's own: both engines answer hybrid + MMR alike (local mode refused it
    before), and a document search, whose chunks the engine would re-order by dense similarity alone, refuses it."""
    docs, queries = scifact
    found = {}
    for engine in ("edge", "memory"):
        engines = Engines("sync", engine, tmp_path / engine)
        coll = _indexed(engines, default_encoder, docs, abstract_vectors)
        found[engine] = [
            coll.search_text(q["text"], limit=5, mode="hybrid", diversity=d) for q in queries for d in (0.2, 0.5)
        ]
        if engine == "edge":
            coll.upsert_documents(["A long text about cells. " * 20], ids=["d1"])
            with pytest.raises(UnsupportedError, match="mode='dense' and diversity="):
                coll.search_documents("cells", mode="hybrid", diversity=0.2)
        engines.close()
    for edge, memory in zip(found["edge"], found["memory"], strict=True):
        assert_same_hits(edge, memory, abs=1e-4)


def test_stored_texts_are_encoded_as_documents_and_queries_as_queries(make: Engines) -> None:
    encoder = tiny_encoder()
    encoder.prompts = {"query": "query: ", "document": "passage: "}
    coll = make.open(encoder)
    coll.upsert_texts(["the cat sat on the mat"], ids=["cat"])
    stored = coll.get(["cat"], with_vectors=True)[0].vector
    np.testing.assert_allclose(stored, encoder.encode("passage: the cat sat on the mat"), atol=1e-5)
    assert not np.allclose(stored, encoder.encode("the cat sat on the mat"), atol=1e-3)
    hit = coll.search_text("a cat", limit=1)[0]
    assert hit.score == pytest.approx(float(encoder.encode("query: a cat") @ stored), abs=1e-4)
    # Duplicates compare like with like: the new text is encoded as a document too.
    same = coll.find_duplicates("the cat sat on the mat", threshold=0.0, limit=1)
    assert same[0].id == "cat" and same[0].score == pytest.approx(1.0, abs=1e-4)
