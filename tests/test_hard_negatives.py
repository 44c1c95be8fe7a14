"""Hard-negative mining from a collection (texts and documents, guards, bad input), batches without duplicates, the
CLI verb, and a tiny end-to-end adaptation run: mine, train MNRL, the loss falls and retrieval rises."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from same_hits import assert_ranked_like

from sbert_qdrant import InvalidArgumentError, InvalidInputError, SentenceEncoder, TextCollection, testing
from sbert_qdrant.cli import main
from sbert_qdrant.training import (
    Example,
    MinedNegatives,
    MultipleNegativesRankingLoss,
    RetrievalEvaluator,
    Trainer,
    TrainingConfig,
    read_texts,
)
from sbert_qdrant.training.hard_negatives import MiningGuards, mine_hard_negatives, mined_columns
from sbert_qdrant.training.trainer import no_duplicate_batches

DATA = Path(__file__).parent / "data"
ROWS = [json.loads(line) for line in (DATA / "scifact_sample.jsonl").read_text(encoding="utf-8").splitlines()]
DOCS = {row["_id"]: f"{row['title']} {row['text']}" for row in ROWS if row["kind"] == "doc"}
QUERIES = [(row["text"], row["relevant"]) for row in ROWS if row["kind"] == "query"]


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return testing.tiny_encoder()


@pytest.fixture(scope="module")
def collection(encoder: SentenceEncoder, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample abstracts as texts and, in the same collection, as documents (ids prefixed ``d``)."""
    coll = TextCollection("scifact", encoder, location=tmp_path_factory.mktemp("edge"), show_progress_bar=False)
    coll.upsert_texts(list(DOCS.values()), ids=list(DOCS))
    coll.upsert_documents(list(DOCS.values()), ids=[f"d{key}" for key in DOCS], chunk_tokens=12)
    yield coll
    coll.close()


def allowed(hits: list[Any], positives: set[Any], guards: MiningGuards) -> list[Any]:
    """The hits the guards allow as negatives, best first, computed here from the collection's own ranking."""
    score = next((h.score for h in hits if h.id in positives), None)
    return [h for h in hits[guards.range_min :] if h.id not in positives and guards.allows(h.score, score)]


def assert_mined(negatives: Sequence[str], candidates: list[Any], texts: dict[Any, str], k: int) -> None:
    """The mined negatives are the ``k`` best candidates, in order (the miner encodes its queries in other batches
    and searches on its own: near-equal scores may swap)."""
    assert len(negatives) == min(k, len(candidates)), negatives
    by_text = {texts[h.id]: h.id for h in candidates}
    assert set(negatives) <= set(by_text), [t for t in negatives if t not in by_text]
    assert_ranked_like([by_text[t] for t in negatives], candidates, rel=0.0, abs=1e-5)


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_mined_texts_are_the_best_non_positive_hits(collection: Any, mode: str) -> None:
    queries = [q for q, relevant in QUERIES for _ in relevant]
    positives = [d for _, relevant in QUERIES for d in relevant]
    mined = mine_hard_negatives(collection, queries, positives, mode=mode, num_negatives=3, batch_size=5)  # type: ignore[arg-type]
    assert len(mined.examples) == len(queries) and not mined.skipped
    for (query, relevant), example in zip([(q, r) for q, r in QUERIES for _ in r], mined.examples, strict=True):
        hits = collection.search_text(query, limit=50, mode=mode)
        assert example.texts[0] == query and example.texts[1] in {DOCS[d] for d in relevant}
        assert_mined(example.texts[2:], allowed(hits, set(relevant), MiningGuards()), DOCS, 3)
        assert not {DOCS[d] for d in relevant} & set(example.texts[2:])  # every positive of the query excluded


def test_guards_rank_range_score_and_margin(collection: Any) -> None:
    query, relevant = QUERIES[0]
    hits = collection.search_text(query, limit=20, mode="dense")
    top = [h for h in hits if h.id not in relevant]
    cut = (top[2].score + top[3].score) / 2  # between two hits, not on one: the miner's scores may move by ulps
    guards = MiningGuards(range_min=2, range_max=20, max_score=cut)
    mined = mine_hard_negatives(collection, [query], [relevant], mode="dense", num_negatives=2, guards=guards)
    assert_mined(mined.examples[0].texts[2:], allowed(hits, set(relevant), guards), DOCS, 2)
    assert all(h.score <= cut for h in hits if DOCS[h.id] in mined.examples[0].texts[2:])
    assert DOCS[hits[0].id] not in mined.examples[0].texts[2:] and DOCS[hits[1].id] not in mined.examples[0].texts[2:]

    # A margin keeps only candidates scored clearly below the positive: a wide one leaves none, the row is skipped.
    wide = MiningGuards(range_max=20, absolute_margin=2.0)
    skipped = mine_hard_negatives(collection, [query], [relevant[0]], mode="dense", num_negatives=1, guards=wide)
    assert skipped.examples == [] and skipped.skipped == [(query, relevant[0])]
    relative = MiningGuards(relative_margin=0.1)
    assert relative.allows(0.5, 0.6) and not relative.allows(0.55, 0.6)
    assert not MiningGuards(absolute_margin=0.0).allows(0.5, None)  # an unranked positive: no margin can be judged


def test_documents_count_all_their_chunks_as_positive(collection: Any) -> None:
    query, relevant = QUERIES[1]
    positives = [f"d{d}" for d in relevant]
    mined = mine_hard_negatives(collection, [query], [positives], documents=True, mode="dense", num_negatives=3)
    hits = collection.search_documents(query, limit=50, mode="dense")
    candidates = allowed(hits, set(positives), MiningGuards())
    stored = {key: collection.get_document(key).text for key in [*positives, *(h.id for h in candidates)]}
    assert mined.examples[0].texts[1] in {stored[p] for p in positives}
    assert_mined(mined.examples[0].texts[2:], candidates, stored, 3)
    assert len({h.id for h in hits}) == len(hits)  # one hit per document: no positive's chunk comes back as another


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ({"positives": ["nope"]}, InvalidInputError),  # not a stored text: refused before any search
        ({"positives": []}, InvalidInputError),
        ({"positives": [[]]}, InvalidInputError),
        ({"num_negatives": 0}, InvalidArgumentError),
        ({"mode": "bm42"}, InvalidArgumentError),
    ],
)
def test_bad_input_is_refused_naming_the_value(collection: Any, call: dict[str, Any], error: type) -> None:
    options: dict[str, Any] = {"queries": [QUERIES[0][0]], "positives": [QUERIES[0][1]], **call}
    with pytest.raises(error):
        mine_hard_negatives(collection, options.pop("queries"), options.pop("positives"), **options)


def test_guard_settings_are_checked() -> None:
    for bad in ({"range_min": 5, "range_max": 5}, {"range_min": -1}, {"relative_margin": 1.0},
                {"absolute_margin": -0.1}, {"min_score": 0.9, "max_score": 0.1}):  # fmt: skip
        with pytest.raises(InvalidArgumentError):
            MiningGuards(**bad)


def test_batches_without_duplicates() -> None:
    texts = [{1, 2}, {1, 3}, {4, 5}, {2, 6}, {7, 8}, {9, 10}, {1, 11}]  # texts 1 and 2 recur
    batches, clashes = no_duplicate_batches(list(range(7)), texts, batch_size=3)
    assert len(batches) == math.ceil(7 / 3) and sorted(i for b in batches for i in b) == list(range(7))
    assert clashes == 0
    for batch in batches:
        seen = [t for i in batch for t in texts[i]]
        assert len(seen) == len(set(seen))
    forced, clashes = no_duplicate_batches([0, 1, 2], [{1}, {1}, {1}], batch_size=2)  # text 1 fits nowhere twice
    assert len(forced) == 2 and clashes == 1


def test_cli_mines_a_file_the_trainer_reads(
    collection: Any, encoder: SentenceEncoder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": q, "positive_id": d}) + "\n" for q, r in QUERIES for d in r))
    encoder.save(tmp_path / "tiny")
    store = tmp_path / "store"
    with TextCollection("sample", encoder, location=store, show_progress_bar=False) as coll:
        coll.upsert_texts(list(DOCS.values()), ids=list(DOCS))
    out = tmp_path / "mined.jsonl"
    argv = ["mine-negatives", str(pairs), "--output", str(out), "--negatives", "2", "--collection", "sample"]
    assert main([*argv, "--location", str(store), "--model", str(tmp_path / "tiny"), "--no-progress"]) == 0
    assert "examples with 2 negatives" in capsys.readouterr().err
    columns = list(json.loads(out.read_text().splitlines()[0]))
    assert columns == ["query", "positive", "negative_1", "negative_2"] == mined_columns(columns)
    assert all(len(e.texts) == 4 for e in read_texts(out, columns))
    argv = ["train", "--objective", "mnrl", "--train", str(out), "--model", str(tmp_path / "tiny"), "--device", "cpu"]
    argv += ["--output", str(tmp_path / "m"), "--max-steps", "2", "--batch-sampler", "no_duplicates", "--no-progress"]
    assert main([*argv, "--eval-retrieval", str(out)]) == 0
    captured = capsys.readouterr()
    assert "trained 2 steps" in captured.err and "best ndcg@10" in captured.err
    assert [json.loads(line)["step"] for line in captured.out.splitlines()] == [0, 2]


def test_tiny_end_to_end_lowers_the_loss_and_raises_retrieval(tmp_path: Path) -> None:
    encoder = testing.tiny_encoder(seed=1)
    pairs = [(q, d) for q, relevant in QUERIES for d in relevant]
    queries = {i: q for i, (q, _) in enumerate(pairs)}
    relevant = {i: {d} for i, (_, d) in enumerate(pairs)}

    def index(model: SentenceEncoder) -> TextCollection:
        coll = TextCollection("eval", model, location=tmp_path / "eval", recreate=True, show_progress_bar=False)
        coll.upsert_texts(list(DOCS.values()), ids=list(DOCS))
        return coll

    evaluator = RetrievalEvaluator(queries, DOCS, relevant, searcher=index)
    before = evaluator(encoder)
    with TextCollection("mine", encoder, location=tmp_path / "mine", show_progress_bar=False) as coll:
        coll.upsert_texts(list(DOCS.values()), ids=list(DOCS))
        mined = mine_hard_negatives(coll, [q for q, _ in pairs], [d for _, d in pairs], num_negatives=1)
    examples: list[Example] = mined.examples
    sampler: Any = "no_duplicates"
    config = TrainingConfig(epochs=4, batch_size=4, learning_rate=3e-3, precision="fp32", batch_sampler=sampler)
    result = Trainer(encoder, [(MultipleNegativesRankingLoss(encoder), examples)], config).fit()
    after = evaluator(encoder)
    assert result.steps == 12 and sum(result.losses[-3:]) < 0.5 * sum(result.losses[:3])
    assert after["ndcg@10"] > before["ndcg@10"] + 30, (before, after)  # 4 -> 100 on this sample when measured


def test_mined_rows_become_a_rerankers_labelled_pairs() -> None:
    mined = MinedNegatives([Example(("q1", "p1", "n1", "n2")), Example(("q2", "p2", "n3", "n4"))])
    pairs = [(e.texts, e.label) for e in mined.labelled_pairs()]
    assert pairs[:3] == [(("q1", "p1"), 1), (("q1", "n1"), 0), (("q1", "n2"), 0)]
    assert len(pairs) == 6 and sum(label for _, label in pairs) == 2
