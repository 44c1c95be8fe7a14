"""Matryoshka vectors: the loss that trains an encoder's leading values to stand alone (MatryoshkaLoss), a small
first-stage slot re-scored by the full vector in the engine (``first_stage_dim=``), and the storage presets
(``quantization=``) accepted or refused by each engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from flavours import Engines
from qdrant_client import QdrantClient

from sbert_qdrant import SentenceEncoder, TextCollection, testing
from sbert_qdrant.cli import main
from sbert_qdrant.errors import CollectionMismatchError, InvalidArgumentError, UnsupportedError
from sbert_qdrant.layout import PointLayout, VectorSlot
from sbert_qdrant.training import (
    CoSENTLoss,
    Example,
    MatryoshkaLoss,
    MultipleNegativesRankingLoss,
    SoftmaxLoss,
    make_batch,
)
from sbert_qdrant.types import QUANTIZATIONS

DATA = Path(__file__).parent / "data"
PAIRS = [
    Example([f"question {i} about topic {i % 7}", f"answer {i} on topic {i % 7} and item {i % 3}"]) for i in range(12)
]
TEXTS = [f"text number {i} about topic {i % 17} and thing {i % 5}" for i in range(120)]
QUERIES = ["text about topic 3 and thing 2", "number 42", "topic 16"]


def test_the_loss_sums_each_cut_and_falls_with_training(tiny_encoder: SentenceEncoder) -> None:
    torch.manual_seed(0)
    loss = MatryoshkaLoss(MultipleNegativesRankingLoss(tiny_encoder), dims=(32, 16, 8), weights=(1.0, 0.5, 0.25))
    batch = make_batch(loss, PAIRS)
    with torch.no_grad():
        parts = loss.losses(batch)
        total = loss(batch)
    assert list(parts) == [32, 16, 8] and all(p > 0 for p in parts.values())
    assert len({round(float(p), 4) for p in parts.values()}) == 3  # each cut scores the batch differently
    assert torch.isclose(total, parts[32] + 0.5 * parts[16] + 0.25 * parts[8], rtol=1e-4)
    with torch.no_grad():  # the full size alone is the inner loss
        assert torch.isclose(MatryoshkaLoss(loss.inner, dims=[32])(batch), loss.inner(batch), rtol=1e-4)
    optimizer = torch.optim.AdamW(tiny_encoder.parameters(), lr=1e-3)
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        value = loss(batch)
        value.backward()
        optimizer.step()
        losses.append(value.item())
    assert losses[-1] < 0.7 * losses[0]
    with torch.no_grad():
        after = loss.losses(batch)
    assert all(after[d] < parts[d] for d in (32, 16, 8))  # every cut learned, the smallest included


def test_the_loss_wraps_a_labelled_objective_and_refuses_what_it_cannot_cut(tiny_encoder: SentenceEncoder) -> None:
    scored = [Example(list(p.texts), label=float(i % 4) / 3) for i, p in enumerate(PAIRS)]
    loss = MatryoshkaLoss(CoSENTLoss(tiny_encoder), dims=(32, 8))
    with torch.no_grad():
        assert float(loss(make_batch(loss, scored))) > 0
    with pytest.raises(Exception, match="label"):
        loss.check_examples(PAIRS)  # the inner objective reads the examples: CoSENT needs a score
    with pytest.raises(InvalidArgumentError, match="SoftmaxLoss"):
        MatryoshkaLoss(SoftmaxLoss(tiny_encoder), dims=(16,))
    for dims in ([], [64], [0], [16, 16], "16"):
        with pytest.raises(InvalidArgumentError, match="dims="):
            MatryoshkaLoss(MultipleNegativesRankingLoss(tiny_encoder), dims=dims)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="weights="):
        MatryoshkaLoss(MultipleNegativesRankingLoss(tiny_encoder), dims=(32, 16), weights=(1.0,))


def _full_order(encoder: SentenceEncoder, query: str) -> list[int]:
    scores = encoder.encode_document(TEXTS) @ encoder.encode_query([query])[0]
    return [int(i) for i in np.argsort(-scores, kind="stable")]


def test_a_first_stage_slot_is_written_and_rescored_by_the_full_vector(make: Engines) -> None:
    encoder = testing.tiny_encoder()
    coll = make.open(encoder, first_stage_dim=8)
    first = coll.layout.first_stage("text")
    assert first is not None and (first.name, first.size, first.index) == ("text_8d", 8, True)
    assert coll.layout.primary.name == "text" and coll.layout.primary.index is False  # the full vector: no graph
    coll.upsert_texts(TEXTS, ids=list(range(len(TEXTS))))
    assert coll.stored_vectors() == {"text": 32, "text_8d": 8}
    for query in QUERIES:
        # every point a candidate: the re-scored order is the full vectors' order, scores the full cosine
        hits = coll.search_text(query, limit=10, candidates=len(TEXTS))
        expected = _full_order(encoder, query)[:10]
        full = encoder.encode_document(TEXTS) @ encoder.encode_query([query])[0]
        assert np.allclose([h.score for h in hits], sorted(full, reverse=True)[:10], atol=1e-4)
        assert np.allclose(full[[h.id for h in hits]], full[expected], atol=1e-4)  # the same, up to near ties
        assert len(coll.search_text(query, limit=5, mode="hybrid")) == 5
    vector = encoder.encode_query([QUERIES[0]])[0]
    assert [h.id for h in coll.search_by_vector(vector, limit=3)] == [h.id for h in coll.search_text(QUERIES[0], 3)]
    # the first 8 values alone find other neighbours than the full vector (so the re-scoring is what orders them)
    small = encoder.encode_document(TEXTS)[:, :8]
    small_scores = small @ vector[:8] / np.linalg.norm(small, axis=1) / np.linalg.norm(vector[:8])
    assert [int(i) for i in np.argsort(-small_scores)[:10]] != _full_order(encoder, QUERIES[0])[:10]


def test_reopening_checks_the_first_stage(make: Engines) -> None:
    encoder = testing.tiny_encoder()
    make.open(encoder, "mrl", first_stage_dim=8).upsert_texts(TEXTS[:10])
    assert make.open(encoder, "mrl", first_stage_dim=8).count() == 10
    with pytest.raises(CollectionMismatchError, match="first_stage_dim=8"):
        make.open(encoder, "mrl").upsert_texts(["more"])
    with pytest.raises(CollectionMismatchError, match="first_stage_dim=8"):
        make.open(encoder, "mrl", first_stage_dim=16).search_text("text")
    make.open(encoder, "plain").upsert_texts(TEXTS[:10])
    with pytest.raises(CollectionMismatchError, match="without a first stage"):
        make.open(encoder, "plain", first_stage_dim=8).search_text("text")


def test_first_stage_arguments_are_checked() -> None:
    encoder = testing.tiny_encoder()
    for bad in (0, 32, 64, True, "8"):
        with pytest.raises(InvalidArgumentError, match="first_stage_dim="):
            TextCollection("c", encoder, client=QdrantClient(":memory:"), first_stage_dim=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="unnamed vector"):
        TextCollection("c", encoder, client=QdrantClient(":memory:"), vector_name="", sparse=None, first_stage_dim=8)
    with pytest.raises(InvalidArgumentError, match="sbert-qdrant's own layout"):
        TextCollection("c", encoder, client=QdrantClient(":memory:"), text_field="page_content", first_stage_dim=8)


@pytest.mark.parametrize("first_stage", [None, 16])
@pytest.mark.parametrize("preset", QUANTIZATIONS)
def test_storage_presets_on_edge_search_rescored_by_default(tmp_path: Path, preset: str, first_stage: int) -> None:
    encoder = testing.tiny_encoder()
    options = {"quantization": preset, "first_stage_dim": first_stage}
    with TextCollection("q", encoder, location=tmp_path, **options) as coll:  # type: ignore[arg-type]
        coll.upsert_texts(TEXTS, ids=list(range(len(TEXTS))))
        coll.optimize()
        full = encoder.encode_document(TEXTS) @ encoder.encode_query([QUERIES[0]])[0]
        deep = {"candidates": len(TEXTS)} if first_stage else {}  # a first stage draws them; codes alone do not
        hits = coll.search_text(QUERIES[0], limit=5, **deep)  # type: ignore[arg-type]
        # the full float32 vectors re-score the candidates: the scores are exact cosines
        assert np.allclose([h.score for h in hits], full[[h.id for h in hits]], atol=2e-3)
    with TextCollection("q", encoder, location=tmp_path, **options) as reopened:  # type: ignore[arg-type]
        assert len(reopened.search_text(QUERIES[1], limit=3)) == 3


@pytest.mark.parametrize("preset", QUANTIZATIONS)
def test_local_mode_refuses_the_storage_presets_it_would_ignore(preset: str) -> None:
    coll = TextCollection("q", testing.tiny_encoder(), client=QdrantClient(":memory:"), quantization=preset)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError, match=f"quantization='{preset}'"):
        coll.upsert_texts(TEXTS[:3])
    assert coll.list_collections() == []  # refused before anything was written
    with pytest.raises(InvalidArgumentError, match="quantization="):
        TextCollection("q", testing.tiny_encoder(), client=QdrantClient(":memory:"), quantization="int4")  # type: ignore[arg-type]


def test_the_command_line_trains_matryoshka_and_opens_a_first_stage(
    tiny_encoder: SentenceEncoder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny_encoder.save(tmp_path / "tiny")
    common = ["--device", "cpu", "--no-progress", "--precision", "fp32", "--batch-size", "8"]
    train = ["train", "--objective", "mnrl", "--train", str(DATA / "nli_triplets_sample.tsv"), "--max-steps", "2"]
    train += ["--model", str(tmp_path / "tiny"), "--output", str(tmp_path / "mrl"), "--checkpoint-steps", "1"]
    assert main([*train, "--matryoshka-dims", "32,16,8", "--matryoshka-weights", "1,1,0.5", *common]) == 0
    assert "trained 2 steps" in capsys.readouterr().err
    assert SentenceEncoder.load(tmp_path / "mrl", device="cpu").dimension == 32
    assert main([*train, "--matryoshka-dims", "32,64", *common]) == 2
    assert "dims=" in capsys.readouterr().err
    records = tmp_path / "texts.txt"
    records.write_text("\n".join(TEXTS[:20]) + "\n")
    engine = ["--collection", "mrl", "--location", str(tmp_path / "qdrant"), "--model", str(tmp_path / "mrl")]
    engine += ["--device", "cpu", "--no-progress", "--first-stage-dim", "8"]
    assert main(["index", str(records), *engine, "--quantization", "int8"]) == 0
    assert main(["search", "topic 3", *engine, "--limit", "2"]) == 0
    assert main(["search", "topic 3", *engine[:-2], "--limit", "2"]) == 2  # opened without its first stage
    assert "first_stage_dim=8" in capsys.readouterr().err


def test_the_layout_describes_the_first_stage() -> None:
    layout = PointLayout.ours(VectorSlot("text"), first_stage_dim=64)
    assert [(s.name, s.kind, s.size, s.index, s.prefix_of) for s in layout.slots] == [
        ("text", "dense", 0, False, None),
        ("text_64d", "dense", 64, True, "text"),
        ("bm25", "sparse", 0, True, None),
    ]
    assert layout.primary.name == "text" and layout.first_stage("text") == layout.slots[1]
    assert layout.first_stage("text_64d") is None
    filled = layout.filled({"text": (384, "model@abc")})
    assert filled.slots[1].filled_by == "model@abc" and filled.slots[1].size == 64
    with pytest.raises(InvalidArgumentError, match="no full dense slot"):
        PointLayout((VectorSlot("text"), VectorSlot("small", size=8, prefix_of="other")))
    with pytest.raises(InvalidArgumentError, match="below the encoder's dimension"):
        PointLayout.ours(VectorSlot("text"), first_stage_dim=384).filled({"text": (384, None)})
