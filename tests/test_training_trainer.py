"""The trainer: warm-up schedule, round-robin tasks, evaluation and best model, checkpoint save and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import tiny_transformer

from sbert_qdrant import InvalidArgumentError, Normalize, Pooling, SentenceEncoder
from sbert_qdrant.training import (
    CheckpointError,
    Example,
    MultipleNegativesRankingLoss,
    SoftmaxLoss,
    STSEvaluator,
    Trainer,
    TrainingConfig,
    read_nli,
    warmup_linear,
)
from sbert_qdrant.training.trainer import autocast_dtype

DATA = Path(__file__).parent / "data"
NLI = read_nli(DATA / "nli_train_sample.tsv")
PAIRS = [Example(e.texts) for e in NLI]


def fresh_encoder() -> SentenceEncoder:
    transformer = tiny_transformer(seed=0)
    return SentenceEncoder([transformer, Pooling(transformer.dimension), Normalize()], device="cpu")


def sts_evaluator() -> STSEvaluator:
    left, right = [e.texts[0] for e in NLI], [e.texts[1] for e in NLI]
    return STSEvaluator(left, right, [float(e.label == 1) for e in NLI])


def test_warmup_then_linear_decay_values() -> None:
    values = [warmup_linear(step, warmup_steps=2, total_steps=10) for step in range(11)]
    assert values == pytest.approx([0.0, 0.5, 1.0, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8, 0.0])
    assert warmup_linear(5, warmup_steps=0, total_steps=5) == 0.0


def test_scheduler_applies_ten_percent_warmup(tiny_encoder: SentenceEncoder) -> None:
    config = TrainingConfig(max_steps=20, batch_size=16, learning_rate=1e-3, precision="fp32")
    trainer = Trainer(tiny_encoder, [(SoftmaxLoss(tiny_encoder), NLI)], config)
    assert trainer.total_steps() == 20 and trainer.batches_per_epoch() == 4  # ceil(60 / 16)
    seen: list[float] = []
    original = torch.optim.AdamW.step

    def spy(self: torch.optim.AdamW, *args: object, **kwargs: object) -> object:
        seen.append(self.param_groups[0]["lr"])
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.optim.AdamW, "step", spy)
        trainer.fit()
    assert seen[:3] == pytest.approx([0.0, 5e-4, 1e-3]) and seen[-1] == pytest.approx(1e-3 / 18)


def test_epochs_round_robin_over_two_objectives(tiny_encoder: SentenceEncoder) -> None:
    tasks = [(SoftmaxLoss(tiny_encoder), NLI), (MultipleNegativesRankingLoss(tiny_encoder), PAIRS[:20])]
    config = TrainingConfig(epochs=2, batch_size=8, precision="fp32")
    trainer = Trainer(tiny_encoder, tasks, config)
    assert trainer.batches_per_epoch() == 6  # 3 rounds until the 20 pairs are used up, 2 tasks each
    result = trainer.fit()
    assert result.steps == 12 and len(result.losses) == 12 and result.examples_per_second > 0


def test_same_seed_same_run_and_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    config = TrainingConfig(max_steps=6, batch_size=8, learning_rate=1e-3, checkpoint_steps=3, precision="fp32")
    straight = fresh_encoder()
    full = Trainer(straight, [(SoftmaxLoss(straight), NLI)], config, output_dir=tmp_path / "a").fit()
    checkpoint = tmp_path / "a" / "checkpoints" / "step-0000003"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step"] == 3

    resumed_encoder = fresh_encoder()
    resumed = Trainer(resumed_encoder, [(SoftmaxLoss(resumed_encoder), NLI)], config, output_dir=tmp_path / "b")
    result = resumed.fit(resume_from=checkpoint)
    assert result.losses == pytest.approx(full.losses, abs=1e-6)
    for (name, a), b in zip(straight.state_dict().items(), resumed_encoder.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5, msg=name)
    heads = [t.objectives[0] for t in (resumed,)]
    saved = SoftmaxLoss.load_head(SentenceEncoder.load(tmp_path / "a", device="cpu", precision="fp32"), tmp_path / "a")
    torch.testing.assert_close(heads[0].classifier.weight, saved.classifier.weight, atol=1e-6, rtol=1e-5)

    other = TrainingConfig(max_steps=6, batch_size=4, learning_rate=1e-3, precision="fp32")
    encoder = fresh_encoder()
    with pytest.raises(CheckpointError, match=r"batch_size: 8 -> 4"):
        Trainer(encoder, [(SoftmaxLoss(encoder), NLI)], other).fit(resume_from=tmp_path / "a")


def test_best_model_by_primary_metric_is_kept(tmp_path: Path) -> None:
    encoder = fresh_encoder()
    config = TrainingConfig(max_steps=6, batch_size=8, learning_rate=5e-3, eval_steps=2, precision="fp32")
    trainer = Trainer(encoder, [(SoftmaxLoss(encoder), NLI)], config, sts_evaluator(), output_dir=tmp_path / "m")
    result = trainer.fit()
    assert [step for step, _ in result.evaluations] == [2, 4, 6]
    best = max(result.evaluations, key=lambda e: e[1]["spearman"])
    assert result.best_step == best[0] and result.best_metric == best[1]["spearman"]
    final = sts_evaluator()(SentenceEncoder.load(tmp_path / "m", device="cpu", precision="fp32"))
    assert final["spearman"] == pytest.approx(best[1]["spearman"], abs=1e-4)
    assert sts_evaluator()(encoder)["spearman"] == pytest.approx(best[1]["spearman"], abs=1e-4)
    assert not (tmp_path / "m" / "best").exists()


def test_bf16_autocast_runs_on_cpu(tiny_encoder: SentenceEncoder) -> None:
    config = TrainingConfig(max_steps=2, batch_size=8, precision="bf16")
    result = Trainer(tiny_encoder, [(SoftmaxLoss(tiny_encoder), NLI)], config).fit()
    assert result.steps == 2 and all(torch.isfinite(torch.tensor(result.losses)))
    assert autocast_dtype("fp32", torch.device("cpu")) is None
    with pytest.raises(InvalidArgumentError, match=r"fp16' training needs CUDA"):
        autocast_dtype("fp16", torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_training_on_cuda_with_mixed_precision() -> None:
    transformer = tiny_transformer()
    encoder = SentenceEncoder([transformer, Pooling(transformer.dimension), Normalize()], device="cuda")
    for precision in ("bf16", "fp16"):
        config = TrainingConfig(max_steps=3, batch_size=8, precision=precision)  # type: ignore[arg-type]
        result = Trainer(encoder, [(SoftmaxLoss(encoder), NLI)], config).fit()
        assert result.steps == 3 and all(torch.isfinite(torch.tensor(result.losses)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size=0 must be a positive integer"),
        ({"warmup_ratio": 1.5}, "warmup_ratio=1.5"),
        ({"precision": "fp8"}, "precision='fp8'"),
        ({"max_grad_norm": 0.0}, "max_grad_norm=0.0"),
    ],
)
def test_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        TrainingConfig(**kwargs)


def test_trainer_refuses_mismatched_setups(tiny_encoder: SentenceEncoder) -> None:
    other = fresh_encoder()
    with pytest.raises(InvalidArgumentError, match=r"wraps another encoder"):
        Trainer(tiny_encoder, [(SoftmaxLoss(other), NLI)])
    with pytest.raises(InvalidArgumentError, match=r"checkpoint_steps needs output_dir"):
        Trainer(tiny_encoder, [(SoftmaxLoss(tiny_encoder), NLI)], TrainingConfig(checkpoint_steps=2))
