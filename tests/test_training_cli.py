"""``sbert-qdrant train`` and ``evaluate`` end to end on the tiny model; the result loads in both libraries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.cli import main
from sbert_qdrant.training import SoftmaxLoss

DATA = Path(__file__).parent / "data"
COMMON = ["--device", "cpu", "--no-progress", "--batch-size", "8", "--precision", "fp32"]


@pytest.fixture
def tiny_model(tiny_encoder: SentenceEncoder, tmp_path: Path) -> str:
    tiny_encoder.save(tmp_path / "tiny")
    return str(tmp_path / "tiny")


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_train_softmax_nli_then_evaluate(tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nli-model"
    argv = ["train", "--objective", "softmax-nli", "--train", str(DATA / "nli_train_sample.tsv"), "--model", tiny_model]
    argv += ["--output", str(out), "--eval-sts", str(DATA / "stsb_dev_sample.tsv"), "--max-steps", "4"]
    assert main([*argv, "--eval-steps", "2", "--checkpoint-steps", "2", *COMMON]) == 0
    captured = capsys.readouterr()
    assert [row["step"] for row in json_lines(captured.out)] == [0, 2, 4]
    assert "trained 4 steps" in captured.err and "best spearman" in captured.err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-0000002", "step-0000004"]

    texts = ["A man is playing a guitar.", "Two dogs run on the beach."]
    ours = SentenceEncoder.load(out, device="cpu", precision="fp32")
    from sentence_transformers import SentenceTransformer

    theirs = SentenceTransformer(str(out), device="cpu")
    np.testing.assert_allclose(theirs.encode(texts), ours.encode(texts), atol=1e-5)
    label = SoftmaxLoss.load_head(ours, out).predict(texts[:1], texts[1:])[0]
    assert label in {"contradiction", "entailment", "neutral"}

    assert main([*argv, "--resume", *COMMON]) == 0  # already at its last step: nothing left to train
    assert "trained 4 steps" in capsys.readouterr().err

    sts, pairs = str(DATA / "stsb_dev_sample.tsv"), str(DATA / "quora_train_sample.jsonl")
    retrieval = str(DATA / "nli_triplets_sample.tsv")
    evaluate = ["evaluate", "--model", str(out), "--sts", sts, "--pairs", pairs, "--retrieval", retrieval]
    assert main([*evaluate, "--device", "cpu"]) == 0
    rows = json_lines(capsys.readouterr().out)
    assert [r["evaluator"] for r in rows] == ["sts", "pairs", "retrieval"]
    assert {"spearman", "pearson"} <= set(rows[0]) and {"ap", "f1", "accuracy"} <= set(rows[1])
    assert {"mrr@10", "ndcg@10", "recall@1"} <= set(rows[2])


def test_train_two_objectives_round_robin(tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--model", tiny_model, "--output", str(tmp_path / "m"), "--max-steps", "4", *COMMON]
    argv += ["--objective", "contrastive", "--train", str(DATA / "quora_train_sample.jsonl")]
    argv += ["--objective", "triplet", "--train", str(DATA / "nli_triplets_sample.tsv")]
    assert main(argv) == 0
    assert "trained 4 steps" in capsys.readouterr().err
    assert (tmp_path / "m" / "modules.json").is_file()


def test_train_reports_a_bad_row_with_file_and_line(
    tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "nli.tsv"
    bad.write_text("premise\thypothesis\tlabel\na\tb\tentailment\nc\td\tunsure\n", encoding="utf-8")
    argv = ["train", "--train", str(bad), "--model", tiny_model, "--output", str(tmp_path / "m"), *COMMON]
    assert main(argv) == 2
    assert f"{bad}:3: label 'unsure' is not in the label map" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_mined_file_trains_late_interaction_and_a_reranker(
    tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sbert_qdrant import CrossEncoder, MultiVectorEncoder

    mined = tmp_path / "mined.jsonl"
    rows = [
        {"query": "learn python", "positive": "Learning to code in Python", "negative_1": "Best pizza in Naples"},
        {"query": "sky colour", "positive": "Why is the sky blue?", "negative_1": "How do I learn Python?"},
    ]
    mined.write_text("".join(json.dumps(row) + "\n" for row in rows))
    late, rerank = tmp_path / "late", tmp_path / "rerank"
    argv = ["train", "--model", tiny_model, "--train", str(mined), "--max-steps", "2", *COMMON]
    assert main([*argv, "--objective", "late-interaction", "--token-dim", "8", "--output", str(late)]) == 0
    assert main([*argv, "--objective", "cross-encoder-binary", "--output", str(rerank)]) == 0
    assert "trained 2 steps" in capsys.readouterr().err
    assert MultiVectorEncoder.load(late, device="cpu").dimension == 8
    assert len(CrossEncoder.load(rerank, device="cpu", precision="fp32").predict([("sky", "blue")])) == 1
    again = ["train", "--model", str(late), "--train", str(mined), "--output", str(tmp_path / "m"), *COMMON]
    assert main([*again, "--objective", "mnrl"]) == 2
    assert "is a late-interaction model; train it with --objective late-interaction" in capsys.readouterr().err


def test_a_trained_cross_encoder_is_certified_for_static_int8(
    tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After training a cross-encoder, ``train`` certifies its static int8 on held-apart training queries and writes
    the ranges into the folder (``load(precision="auto")`` reads them), printing the loss and the verdict; where
    int8 does not run it says so and the training still succeeds; ``--no-certify-int8`` skips it."""
    from sbert_qdrant import CrossEncoder
    from sbert_qdrant.encoder.int8.calibration import int8_isa

    topics = ["python code", "blue sky", "pizza dough", "rain clouds", "chess opening", "tennis serve"]
    rows = [
        {"query": f"{topic} {i}", "positive": f"all about {topic} number {i}", "negative_1": f"nothing on {other} {i}"}
        for i in range(3)
        for topic, other in zip(topics, topics[1:] + topics[:1], strict=True)
    ]
    data = tmp_path / "groups.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    argv = ["train", "--model", tiny_model, "--train", str(data), "--max-steps", "1", "--seed", "1", *COMMON]
    argv += ["--objective", "cross-encoder-listwise", "--certify-groups", "4"]
    assert main([*argv, "--output", str(tmp_path / "ce")]) == 0
    err = capsys.readouterr().err
    ranges = list((tmp_path / "ce").glob("int8_ranges-*.safetensors"))
    if int8_isa() is None:
        assert "int8: not certified" in err and not ranges
    else:
        assert "int8: static int8" in err and "vs fp32 on 4 held-apart groups: nDCG@10 loss" in err
        assert len(ranges) == 1
        auto = CrossEncoder.load(tmp_path / "ce", device="cpu", precision="auto")
        assert (auto.precision == "int8") == ("; exact-grade" in err)
    assert main([*argv, "--output", str(tmp_path / "plain"), "--no-certify-int8"]) == 0
    assert "int8:" not in capsys.readouterr().err
    assert not list((tmp_path / "plain").glob("int8_ranges-*.safetensors"))
    assert main([*argv, "--output", str(tmp_path / "x"), "--certify-groups", "0"]) == 2
    assert "--certify-groups 0 must be 1 or more" in capsys.readouterr().err
