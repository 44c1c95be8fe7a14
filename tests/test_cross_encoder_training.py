"""Training cross-encoders: the objectives lower their loss on real pairs, the trainer keeps the best model and
resumes exactly, and ``sbert-qdrant train --objective cross-encoder-*`` writes a folder both libraries load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import CrossEncoder as ReferenceCrossEncoder

from sbert_qdrant import CrossEncoder, InvalidArgumentError, InvalidInputError
from sbert_qdrant.cli import main
from sbert_qdrant.training import (
    CrossEncoderBCELoss,
    CrossEncoderListwiseLoss,
    CrossEncoderMSELoss,
    Example,
    Objective,
    PairClassificationEvaluator,
    Trainer,
    TrainingConfig,
    make_batch,
    read_binary_pairs,
    read_scored_pairs,
)

DATA = Path(__file__).parent / "data"
STS = read_scored_pairs(DATA / "stsb_dev_sample.tsv")[:64]
QUORA = read_binary_pairs(DATA / "quora_train_sample.jsonl")
#: (question, its duplicate, three non-duplicate questions): 9 groups from the Quora sample.
_OTHERS = [e.texts[1] for e in QUORA if e.label == 0]
_DUPLICATES = [e for e in QUORA if e.label == 1][: len(_OTHERS) // 3]
GROUPS = [Example((e.texts[0], e.texts[1], *_OTHERS[3 * i : 3 * i + 3])) for i, e in enumerate(_DUPLICATES)]
COMMON = ["--device", "cpu", "--no-progress", "--batch-size", "8", "--precision", "fp32", "--lr", "1e-3"]


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sbert_qdrant.testing import tiny_encoder

    folder = tmp_path_factory.mktemp("encoder")
    tiny_encoder().save(folder)
    return folder


def fresh(encoder_folder: Path) -> CrossEncoder:
    return CrossEncoder.from_transformer(encoder_folder, device="cpu", seed=0)


def loss_on(objective: Objective, examples: list[Example]) -> float:
    objective.eval()
    with torch.no_grad():
        return float(objective(make_batch(objective, examples)))


def pair_evaluator(examples: list[Example]) -> PairClassificationEvaluator:
    return PairClassificationEvaluator(
        [e.texts[0] for e in examples], [e.texts[1] for e in examples], [int(e.label or 0) for e in examples]
    )


@pytest.mark.parametrize(
    ("loss_class", "examples"),
    [(CrossEncoderMSELoss, STS), (CrossEncoderBCELoss, QUORA), (CrossEncoderListwiseLoss, GROUPS)],
)
def test_training_lowers_the_loss(encoder_folder: Path, loss_class: type[Objective], examples: list[Example]) -> None:
    cross_encoder, toy = fresh(encoder_folder), examples[:16]
    objective = loss_class(cross_encoder)
    before = loss_on(objective, toy)
    config = TrainingConfig(epochs=30, batch_size=16, learning_rate=5e-3, precision="fp32")
    result = Trainer(cross_encoder, [(objective, toy)], config).fit()
    assert result.steps == 30 and np.mean(result.losses[-5:]) < np.mean(result.losses[:5])
    assert loss_on(objective, toy) < 0.5 * before


def test_by_hand_the_losses_are_bce_on_logits_and_mse_on_sigmoid(encoder_folder: Path) -> None:
    cross_encoder = fresh(encoder_folder)
    logits = torch.from_numpy(cross_encoder.predict([e.texts for e in STS[:8]], activation="identity"))  # type: ignore[misc]
    gold = torch.tensor([float(e.label or 0) for e in STS[:8]])
    expected = torch.nn.functional.mse_loss(torch.sigmoid(logits), gold)
    assert loss_on(CrossEncoderMSELoss(cross_encoder), STS[:8]) == pytest.approx(float(expected), rel=1e-4)
    duplicate = torch.tensor([float(e.label or 0) for e in QUORA[:8]])
    logits = torch.from_numpy(cross_encoder.predict([e.texts for e in QUORA[:8]], activation="identity"))  # type: ignore[misc]
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits, duplicate)
    assert loss_on(CrossEncoderBCELoss(cross_encoder), QUORA[:8]) == pytest.approx(float(expected), rel=1e-4)


def test_by_hand_the_listwise_loss_is_cross_entropy_over_each_group(encoder_folder: Path) -> None:
    cross_encoder, groups = fresh(encoder_folder), GROUPS[:4]
    logits = [cross_encoder.predict([(g.texts[0], t) for t in g.texts[1:]], activation="identity") for g in groups]
    scores = 2.0 * torch.from_numpy(np.stack(logits))
    expected = torch.nn.functional.cross_entropy(scores, torch.zeros(len(groups), dtype=torch.long))
    assert loss_on(CrossEncoderListwiseLoss(cross_encoder, scale=2.0), groups) == pytest.approx(
        float(expected), rel=1e-4
    )


def test_objectives_refuse_what_they_cannot_train(encoder_folder: Path) -> None:
    three = CrossEncoder.from_transformer(encoder_folder, num_labels=3, device="cpu")
    with pytest.raises(InvalidArgumentError, match=r"num_labels=3; start one with .*num_labels=1"):
        CrossEncoderBCELoss(three)
    objective = CrossEncoderBCELoss(fresh(encoder_folder))
    with pytest.raises(InvalidInputError, match=r"examples\[0\] has 3 texts; CrossEncoderBCELoss needs 2"):
        objective.check_examples([Example(("a", "b", "c"), 1)])
    with pytest.raises(InvalidInputError, match=r"examples\[1\] has label None; CrossEncoderBCELoss needs a binary"):
        objective.check_examples([Example(("a", "b"), 1), Example(("a", "b"))])
    listwise = CrossEncoderListwiseLoss(fresh(encoder_folder))
    with pytest.raises(InvalidInputError, match=r"examples\[0\] has 2 texts; CrossEncoderListwiseLoss needs 3\.\.64"):
        listwise.check_examples([Example(("q", "p"))])
    with pytest.raises(InvalidInputError, match=r"examples\[1\] has 4 texts; .* the same in every example"):
        listwise.check_examples([Example(("q", "p", "n")), Example(("q", "p", "n", "m"))])
    with pytest.raises(InvalidInputError, match=r"examples\[0\] has label 1; CrossEncoderListwiseLoss needs no label"):
        listwise.check_examples([Example(("q", "p", "n"), 1)])
    with pytest.raises(InvalidArgumentError, match=r"scale=0 must be positive"):
        CrossEncoderListwiseLoss(fresh(encoder_folder), scale=0)


def test_trainer_keeps_the_best_cross_encoder_and_resumes_exactly(encoder_folder: Path, tmp_path: Path) -> None:
    train, held_out = QUORA[:44], QUORA[44:]
    config = TrainingConfig(max_steps=6, batch_size=8, learning_rate=1e-3, precision="fp32", eval_steps=2)
    straight = fresh(encoder_folder)
    checkpointed = TrainingConfig(**{**config.__dict__, "checkpoint_steps": 3})
    result = Trainer(
        straight, [(CrossEncoderBCELoss(straight), train)], checkpointed, pair_evaluator(held_out), tmp_path / "a"
    ).fit()
    assert [step for step, _ in result.evaluations] == [2, 4, 6] and result.best_step in (2, 4, 6)
    saved = CrossEncoder.load(tmp_path / "a", device="cpu", precision="fp32")
    pairs = [e.texts for e in held_out]
    np.testing.assert_allclose(saved.predict(pairs), straight.predict(pairs), atol=1e-6)  # the best, restored
    best_ap = max(metrics["ap"] for _, metrics in result.evaluations)
    assert pair_evaluator(held_out)(saved)["ap"] == pytest.approx(best_ap)
    reference = ReferenceCrossEncoder(str(tmp_path / "a"), device="cpu")
    np.testing.assert_allclose(reference.predict(pairs), saved.predict(pairs), atol=1e-5)

    checkpoint = tmp_path / "a" / "checkpoints" / "step-0000003"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step"] == 3
    resumed = fresh(encoder_folder)
    tasks = [(CrossEncoderBCELoss(resumed), train)]
    again = Trainer(resumed, tasks, checkpointed, pair_evaluator(held_out), tmp_path / "b").fit(resume_from=checkpoint)
    assert again.steps == 6 and again.losses == pytest.approx(result.losses, abs=1e-6)
    # steps 4 and 6 evaluate as in the straight run
    assert [(step, metrics["ap"]) for step, metrics in again.evaluations] == [
        (step, pytest.approx(metrics["ap"])) for step, metrics in result.evaluations[1:]
    ]


def test_cli_trains_regression_then_binary_cross_encoders(
    encoder_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts, quora = str(DATA / "stsb_dev_sample.tsv"), str(DATA / "quora_train_sample.jsonl")
    out = tmp_path / "sts-ce"
    argv = ["train", "--objective", "cross-encoder-regression", "--train", sts, "--model", str(encoder_folder)]
    argv += ["--output", str(out), "--eval-sts", sts, "--max-steps", "4", "--eval-steps", "2", "--limit", "64"]
    assert main([*argv, *COMMON]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    assert [row["step"] for row in rows] == [0, 2, 4] and "best spearman" in captured.err
    trained = CrossEncoder.load(out, device="cpu", precision="fp32")
    pairs = [("A man is playing a guitar.", "A man plays the guitar.")]
    np.testing.assert_allclose(ReferenceCrossEncoder(str(out), device="cpu").predict(pairs), trained.predict(pairs))

    # a cross-encoder folder as --model continues training it
    argv = ["train", "--objective", "cross-encoder-binary", "--train", quora, "--model", str(out)]
    assert main([*argv, "--output", str(tmp_path / "quora-ce"), "--max-steps", "2", *COMMON]) == 0
    assert "trained 2 steps" in capsys.readouterr().err
    assert main(["evaluate", "--model", str(tmp_path / "quora-ce"), "--pairs", quora, "--device", "cpu"]) == 0
    assert {"ap", "f1"} <= set(json.loads(capsys.readouterr().out.splitlines()[-1]))


def test_cli_trains_a_listwise_cross_encoder_on_groups(
    encoder_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "groups.jsonl"
    columns = ["query", "positive", "negative_1", "negative_2", "negative_3"]
    path.write_text("".join(json.dumps(dict(zip(columns, g.texts, strict=True))) + "\n" for g in GROUPS))
    argv = ["train", "--objective", "cross-encoder-listwise", "--train", str(path), "--model", str(encoder_folder)]
    argv += ["--columns", ",".join(columns), "--output", str(tmp_path / "ce"), "--max-steps", "2"]
    assert main([*argv, *COMMON]) == 0
    assert "trained 2 steps" in capsys.readouterr().err
    assert CrossEncoder.load(tmp_path / "ce", device="cpu", precision="fp32").predict(
        [(GROUPS[0].texts[0], GROUPS[0].texts[1])]
    ).shape == (1,)


def test_cli_refuses_mixed_objectives_and_a_cross_encoder_for_a_bi_encoder_objective(
    encoder_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quora = str(DATA / "quora_train_sample.jsonl")
    mixed = ["train", "--objective", "contrastive", "--objective", "cross-encoder-binary", "--train", quora]
    assert main([*mixed, "--train", quora, "--output", str(tmp_path / "x"), *COMMON]) == 2
    assert "mixes objectives of cross-encoder and encoder models" in capsys.readouterr().err
    fresh(encoder_folder).save(tmp_path / "ce")
    wrong = ["train", "--objective", "contrastive", "--train", quora, "--model", str(tmp_path / "ce")]
    assert main([*wrong, "--output", str(tmp_path / "y"), *COMMON]) == 2
    assert "is a cross-encoder model; train it with --objective cross-encoder-binary" in capsys.readouterr().err
