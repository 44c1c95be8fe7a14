"""Pseudo-queries from a real Qdrant Edge collection (SciFact sample abstracts, with and without titles, Markdown
headings), and ``sbert-qdrant adapt-corpus`` end to end on the tiny model: held out, trained, re-embedded."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sbert_qdrant import (
    CollectionMismatchError,
    InvalidArgumentError,
    InvalidInputError,
    SentenceEncoder,
    TextCollection,
    testing,
)
from sbert_qdrant.adaptation import CorpusAdaptation, adapt_to_corpus
from sbert_qdrant.cli import main
from sbert_qdrant.training.pseudo_queries import PseudoQueries, harder_queries, pseudo_queries

DATA = Path(__file__).parent / "data"
ROWS = [json.loads(line) for line in (DATA / "scifact_sample.jsonl").read_text(encoding="utf-8").splitlines()]
DOCS = [row for row in ROWS if row["kind"] == "doc"]
TEXTS = {row["_id"]: f"{row['title']} {row['text']}" for row in DOCS}


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return testing.tiny_encoder()


@pytest.fixture(scope="module")
def titled(encoder: SentenceEncoder, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample abstracts as ``title + " " + text``, the title in the payload (BEIR's input for dense models)."""
    coll = TextCollection("titled", encoder, location=tmp_path_factory.mktemp("edge"), show_progress_bar=False)
    coll.upsert_texts(list(TEXTS.values()), ids=list(TEXTS), payloads=[{"title": row["title"]} for row in DOCS])
    yield coll
    coll.close()


def test_titles_and_sentences_confirmed_by_bm25(titled: Any) -> None:
    found = pseudo_queries(titled, max_pairs=60)
    assert len(found.pairs) == 60 and found.texts == len(DOCS)
    assert set(found.counts()) == {"title", "sentence"}
    titles = {row["_id"]: row["title"] for row in DOCS}
    hits = titled.search_texts([p.query for p in found.pairs], limit=10, mode="sparse")
    for pair, ranked in zip(found.pairs, hits, strict=True):
        assert pair.positive in {h.id for h in ranked}  # BM25 ranks its text in the top 10
        assert pair.query not in pair.context  # trained against the rest of its text
        if pair.kind == "title":
            assert pair.query == titles[pair.positive] and TEXTS[pair.positive].endswith(pair.context)
        else:
            assert pair.query in TEXTS[pair.positive] and pair.context.startswith(titles[pair.positive])
    assert len({p.query.casefold() for p in found.pairs}) == len(found.pairs)


def test_seeded_and_capped(titled: Any) -> None:
    first = pseudo_queries(titled, max_pairs=20, seed=7)
    assert first.pairs == pseudo_queries(titled, max_pairs=20, seed=7).pairs
    assert first.pairs != pseudo_queries(titled, max_pairs=20, seed=8).pairs
    assert len(first.pairs) == 20
    strict = pseudo_queries(titled, max_pairs=500, bm25_top_k=1, sentences_per_text=3)
    assert len({p.positive for p in strict.pairs}) <= len(DOCS) and strict.unconfirmed >= 0
    assert all(sum(p.positive == key for p in strict.pairs) <= 4 for key in TEXTS)  # a title + 3 sentences at most


def _bm25_rank(coll: Any, pair: Any) -> int | None:
    hits = coll.search_texts([pair.query], limit=10, mode="sparse")[0]
    return next((i for i, hit in enumerate(hits, 1) if hit.id == pair.positive), None)


def test_harder_pairs_skip_what_bm25_ranks_first(encoder: SentenceEncoder, tmp_path: Path) -> None:
    first = DOCS[0]
    decoy = " ".join(reversed(first["title"].split())) * 3  # outranks its title's own text under BM25
    with TextCollection("decoyed", encoder, location=tmp_path, show_progress_bar=False) as coll:
        coll.upsert_texts(
            [*TEXTS.values(), decoy], ids=[*TEXTS, "decoy"], payloads=[*({"title": r["title"]} for r in DOCS), {}]
        )
        every = pseudo_queries(coll, max_pairs=5000, sentences_per_text=3)
        harder = pseudo_queries(coll, max_pairs=5000, sentences_per_text=3, bm25_min_rank=2)
        assert every.too_easy == 0 and harder.too_easy > 0
        assert any(p.kind == "title" and p.positive == first["_id"] for p in harder.pairs)
        assert all(2 <= (_bm25_rank(coll, p) or 0) <= 10 for p in harder.pairs)
        assert set(harder.pairs) < set(every.pairs)
        assert len(every.pairs) == len(harder.pairs) + harder.too_easy  # the same candidates, split by rank
        assert harder.unconfirmed == every.unconfirmed


def test_query_word_dropout(titled: Any) -> None:
    whole = {
        p.positive: p for p in pseudo_queries(titled, max_pairs=5000, sentence_choice="last", title_field=None).pairs
    }
    dropped = pseudo_queries(
        titled, max_pairs=5000, sentence_choice="last", title_field=None, query_word_dropout=0.5, min_query_words=2
    )
    assert dropped.pairs
    for pair in dropped.pairs:
        source = whole[pair.positive]
        assert pair.context == source.context and len(pair.query.split()) < len(source.query.split())
        words = iter(source.query.split())
        assert all(word in words for word in pair.query.split())  # the source's words, in order, some dropped


def test_last_sentences(titled: Any) -> None:
    found = pseudo_queries(titled, max_pairs=5000, title_field=None, sentence_choice="last")
    assert found.counts() == {"sentence": len(found.pairs)} and len(found.pairs) > len(DOCS) / 2
    again = pseudo_queries(titled, max_pairs=5000, title_field=None, sentence_choice="last", seed=3)
    assert set(found.pairs) == set(again.pairs)  # the same sentences whatever the seed (only their order differs)
    ends = [TEXTS[p.positive].rstrip().endswith(p.query) for p in found.pairs]
    assert sum(ends) >= 0.8 * len(ends)  # the last sentence, unless it is too short or too long to be a query
    two = pseudo_queries(titled, max_pairs=5000, title_field=None, sentence_choice="last", sentences_per_text=2)
    assert {p.query for p in found.pairs} < {p.query for p in two.pairs}


def test_without_titles_and_with_headings(encoder: SentenceEncoder, tmp_path: Path) -> None:
    bodies = {row["_id"]: row["text"] for row in DOCS}
    markdown = "# Methods of extraction\nWe ground cotton leaves in liquid nitrogen and washed the powder twice "
    markdown += "with buffer before the phenol steps began, as in the protocol of the first study.\n"
    with TextCollection("plain", encoder, location=tmp_path, show_progress_bar=False) as coll:
        coll.upsert_texts([*bodies.values(), markdown], ids=[*bodies, "md"], payloads=None)
        found = pseudo_queries(coll, max_pairs=500, title_field="title")
        assert set(found.counts()) == {"sentence", "heading"}
        heading = next(p for p in found.pairs if p.kind == "heading")
        assert (heading.query, heading.positive) == ("Methods of extraction", "md")
        assert heading.context.startswith("We ground cotton") and "#" not in heading.context


def test_clear_errors(encoder: SentenceEncoder, tmp_path: Path, titled: Any) -> None:
    with TextCollection("empty", encoder, location=tmp_path, show_progress_bar=False) as coll:
        coll.upsert_texts(["x"], ids=["gone"])
        coll.delete_texts(["gone"])
        with pytest.raises(InvalidInputError, match="holds no texts"):
            pseudo_queries(coll)
        coll.upsert_texts(["Too short.", "Also far too short to use."], ids=["a", "b"])
        with pytest.raises(InvalidInputError, match="no pseudo-query in 2 texts"):
            pseudo_queries(coll)
    with TextCollection("dense-only", encoder, location=tmp_path, sparse=None, show_progress_bar=False) as coll:
        coll.upsert_texts(
            list(TEXTS.values())[:3], ids=list(TEXTS)[:3], payloads=[{"title": r["title"]} for r in DOCS[:3]]
        )
        with pytest.raises(CollectionMismatchError, match="no BM25 vectors"):
            pseudo_queries(coll)
    with pytest.raises(InvalidArgumentError, match="max_pairs=0"):
        pseudo_queries(titled, max_pairs=0)
    with pytest.raises(InvalidArgumentError, match="max_query_words=2 is below"):
        pseudo_queries(titled, min_query_words=3, max_query_words=2)
    with pytest.raises(InvalidArgumentError, match=r"bm25_min_rank=11 must be an integer in 1\.\.bm25_top_k"):
        pseudo_queries(titled, bm25_min_rank=11)
    with pytest.raises(InvalidArgumentError, match="bm25_min_rank=0"):
        pseudo_queries(titled, bm25_min_rank=0)
    with pytest.raises(InvalidArgumentError, match=r"query_word_dropout=1 must be in 0\.\.1"):
        pseudo_queries(titled, query_word_dropout=1)
    with pytest.raises(InvalidArgumentError, match="sentence_choice='first'"):
        pseudo_queries(titled, sentence_choice="first")  # type: ignore[arg-type]


def test_adapt_corpus_command(encoder: SentenceEncoder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    encoder.save(tmp_path / "tiny")
    model = SentenceEncoder.load(tmp_path / "tiny", device="cpu", precision="fp32")
    with TextCollection("corpus", model, location=tmp_path / "edge", show_progress_bar=False) as coll:
        coll.upsert_texts(list(TEXTS.values()), ids=list(TEXTS), payloads=[{"title": row["title"]} for row in DOCS])
    engine = ["--location", str(tmp_path / "edge"), "--collection", "corpus", "--model", str(tmp_path / "tiny")]
    argv = ["adapt-corpus", *engine, "--precision", "fp32", "--output", str(tmp_path / "adapted")]
    argv += [
        "--max-pairs",
        "30",
        "--held-out",
        "4",
        "--batch-size",
        "8",
        "--sentences",
        "last",
        "--mine-range",
        "5",
        "40",
        "--held-out-min-rank",
        "1",
        "--min-gain",
        "-100",  # the tiny random model gains nothing to speak of: keep it anyway, to test the re-embedding
    ]
    argv += ["--reembed-into", "adapted", "--no-progress"]
    assert main(argv) == 0
    report = capsys.readouterr().out
    assert "pseudo-queries: 30 confirmed by BM25" in report and "held-out nDCG@10 hybrid:" in report
    assert "re-embedded into adapted" in report
    trained = SentenceEncoder.load(tmp_path / "adapted", device="cpu")
    with TextCollection("adapted", trained, location=tmp_path / "edge", show_progress_bar=False) as coll:
        assert coll.count() == len(TEXTS)
    assert main([*argv[:-3], "--held-out", "60", "--no-progress"]) == 2  # every text held out: nothing to train on
    assert "lower held_out" in capsys.readouterr().err
    assert main([*argv[:-3], "--reembed-into", "corpus"]) == 2  # refused before anything is trained
    assert "names the collection being adapted" in capsys.readouterr().err


def test_the_report_cautions_where_the_held_out_sample_is_too_easy(tmp_path: Path) -> None:
    found = PseudoQueries([], texts=10, candidates=0, repeated=0, unconfirmed=0)
    result = CorpusAdaptation(
        found, 3, 4, 20, 20, {"dense": 97.3, "hybrid": 100.0}, {"dense": 98.9, "hybrid": 100.0}, tmp_path, None, {}
    )
    assert result.saturated_modes == ["dense", "hybrid"]
    assert "caution: held-out dense and hybrid scored >= 95" in result.report()
    harder = replace(result, before={"dense": 91.1, "hybrid": 100.0})
    assert harder.saturated_modes == ["hybrid"] and "caution: held-out hybrid scored" in harder.report()
    unsaturated = replace(result, before={"dense": 80.0, "hybrid": 90.0}).report()
    assert "caution: held-out" not in unsaturated and "note: held-out figures are on pseudo-queries" in unsaturated


def test_held_out_queries_are_made_harder(titled: Any) -> None:
    found = pseudo_queries(titled, max_pairs=40, sentence_choice="last")
    hard = harder_queries(titled, found.pairs, word_dropout=0.8, min_rank=2)  # 60 texts: BM25 finds most
    assert hard.pairs and hard.too_easy > 0 and len(hard.pairs) + hard.too_easy + hard.too_short == len(found.pairs)
    ranks = titled.search_texts([p.query for p in hard.pairs], limit=10, mode="sparse")
    assert all(not hits or hits[0].id != p.positive for p, hits in zip(hard.pairs, ranks, strict=True))
    assert len(harder_queries(titled, found.pairs, word_dropout=0, min_rank=1).pairs) == len(found.pairs)
    with pytest.raises(InvalidArgumentError, match="word_dropout=1"):
        harder_queries(titled, found.pairs, word_dropout=1)


@pytest.mark.parametrize("documents", [False, True])
def test_adaptation_keeps_the_base_model_without_a_gain_and_reads_documents(
    encoder: SentenceEncoder, tmp_path: Path, documents: bool
) -> None:
    with TextCollection("corpus", encoder, location=tmp_path / "edge", show_progress_bar=False) as coll:
        write = coll.upsert_documents if documents else coll.upsert_texts
        write(list(TEXTS.values()), ids=list(TEXTS), payloads=[{"title": row["title"]} for row in DOCS])
        result = adapt_to_corpus(
            coll,
            encoder,
            tmp_path / "out",
            held_out=6,
            max_pairs=40,
            sentence_choice="last",
            mine_range=(3, 40),
            batch_size=8,
            held_out_min_rank=1,
            min_gain=100.0,  # no model gains 100 points: the base model is kept
            reembed_into="never",
        )
        assert result.documents is documents and not result.kept and result.reembedded_into is None
        assert "gained less than +100.00" in result.reason or "too easy" in result.reason
        assert "kept the base model" in result.report() and ("documents" in result.report()) is documents
    kept = SentenceEncoder.load(tmp_path / "out", device="cpu", precision="fp32")
    assert np.allclose(kept.encode(["a claim"]), encoder.encode(["a claim"]), atol=1e-5)  # the base model, unchanged


def test_the_hybrid_ranking_is_distilled_behind_an_option(encoder: SentenceEncoder, tmp_path: Path) -> None:
    with TextCollection("corpus", encoder, location=tmp_path / "edge", show_progress_bar=False) as coll:
        coll.upsert_texts(list(TEXTS.values()), ids=list(TEXTS), payloads=[{"title": row["title"]} for row in DOCS])
        common = {"held_out": 6, "max_pairs": 30, "mine_range": (3, 40), "batch_size": 8, "held_out_min_rank": 1}
        result = adapt_to_corpus(coll, encoder, tmp_path / "out", distill_top_k=5, min_gain=-100.0, **common)
        assert result.kept and 0 < result.distilled <= 5 * result.train_pairs
        assert f"{result.distilled} (query, hit) pairs of the hybrid ranking distilled" in result.report()
        with pytest.raises(InvalidArgumentError, match="distill_top_k=1"):
            adapt_to_corpus(coll, encoder, tmp_path / "out", distill_top_k=1, **common)
