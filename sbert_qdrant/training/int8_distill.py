"""Quantization-aware distillation for static int8: the int8 model, simulated exactly as ``precision="int8"`` runs it
(``encoder.int8.simulate``), is fine-tuned to reproduce the fp32 model's sentence embeddings (and last token states)
on unlabelled text, the fp32 model as teacher. Its activation ranges stay those calibrated on the fp32 model; only
the transformer layers' weights train (embeddings stay, so the result is the layers' weights alone).

Trains in segments that resume: each run saves a checkpoint (weights, optimizer, step) and stops at ``steps`` or
after ``max_seconds``.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..encoder import SentenceEncoder
from ..encoder.int8.calibration import ActivationRanges
from ..encoder.int8.simulate import simulate_int8
from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)
#: Batches sorted by length together (:func:`_length_windows`).
WINDOW = 64


@dataclass(frozen=True)
class DistillConfig:
    """``steps`` of ``batch_size`` texts at learning rate ``lr`` (Adam, 5 % linear warm-up, then linear decay),
    token states weighted by ``token_weight`` beside the embeddings, texts cut at ``max_seq_length`` tokens
    (or the model's own limit, where lower)."""

    steps: int = 1000
    batch_size: int = 32
    lr: float = 1e-5
    token_weight: float = 0.1
    max_seq_length: int = 128
    seed: int = 0


def trained_names(model: nn.Module) -> list[str]:
    """The parameters distillation trains: those of the numbered transformer layers."""
    return [name for name, _ in model.named_parameters() if ".layer." in name]


def _loss(student: dict[str, torch.Tensor], teacher: dict[str, torch.Tensor], token_weight: float) -> torch.Tensor:
    cosine = nn.functional.cosine_similarity(student["sentence_embedding"], teacher["sentence_embedding"], dim=-1)
    mask = teacher["attention_mask"].unsqueeze(-1).float()
    scale = teacher["token_embeddings"].pow(2).mean(-1, keepdim=True).clamp(min=1e-6)
    tokens = ((student["token_embeddings"] - teacher["token_embeddings"]).pow(2) / scale * mask).sum() / (
        mask.sum() * student["token_embeddings"].shape[-1]
    )
    return (1 - cosine).mean() + token_weight * tokens


def distill_int8(
    encoder: SentenceEncoder,
    ranges: ActivationRanges,
    texts: Sequence[str],
    config: DistillConfig,
    checkpoint: Path,
    max_seconds: float | None = None,
) -> tuple[dict[str, torch.Tensor], int]:
    """Train the simulated int8 of ``encoder`` (fp32, left unchanged) towards it on ``texts`` with ``ranges``,
    resuming from ``checkpoint`` where it exists and saving it at the end; returns the trained parameters (the
    transformer's, by name) and the steps done so far."""
    if encoder.precision != "fp32":
        raise InvalidArgumentError(
            f"distillation needs the fp32 encoder as teacher, not precision={encoder.precision!r}; load it in fp32."
        )
    teacher = encoder.eval()
    student = copy.deepcopy(encoder)
    student.transformer.set_max_seq_length(min(config.max_seq_length, encoder.transformer.max_seq_length))
    model = student.transformer.model
    names = trained_names(model)
    state = torch.load(checkpoint, weights_only=True) if checkpoint.is_file() else None
    if state is not None:
        model.load_state_dict(state["weights"], strict=False)
    simulate_int8(model, ranges)
    parameters = dict(model.named_parameters())
    trained = [p for n, p in parameters.items() if _original_name(n) in names]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in trained:
        p.requires_grad_(True)
    optimizer = torch.optim.Adam(trained, lr=config.lr)
    step = 0
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
    warmup = max(1, config.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min((s + 1) / warmup, max(0.0, (config.steps - s) / max(1, config.steps - warmup))),
        last_epoch=step - 1,
    )
    order = _length_windows(texts, config.batch_size, config.seed)
    start = time.monotonic()
    student.train()
    for module in student.modules():  # dropout off: the student must compute what inference computes
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    while step < config.steps and (max_seconds is None or time.monotonic() - start < max_seconds):
        first = step * config.batch_size % len(order)
        batch = [texts[i] for i in (order[first:] + order[:first])[: config.batch_size]]
        features = student.tokenize(batch)
        with torch.no_grad():
            target = teacher(dict(features))
        loss = _loss(student(dict(features)), target, config.token_weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        step += 1
        if step % 10 == 0:
            logger.info("int8 distillation step %d/%d: loss %.6f", step, config.steps, loss.item())
    weights = {_original_name(n): p.detach().clone() for n, p in parameters.items() if _original_name(n) in names}
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"weights": weights, "optimizer": optimizer.state_dict(), "step": step}, checkpoint)
    return weights, step


def _length_windows(texts: Sequence[str], batch_size: int, seed: int) -> list[int]:
    """A shuffled order of ``texts`` in which each run of :data:`WINDOW` batches is sorted by length, so a batch pads
    little (one long text would pad all the others to its length) while batches still come in random order."""
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    size = batch_size * WINDOW
    windows = [sorted(order[i : i + size], key=lambda t: len(texts[t])) for i in range(0, len(order), size)]
    batches = [w[i : i + batch_size] for w in windows for i in range(0, len(w), batch_size)]
    random.Random(seed + 1).shuffle(batches)
    return [i for batch in batches for i in batch]


def _original_name(name: str) -> str:
    """A simulated Linear's parameter by its name in the model it simulates (``query.linear.weight`` ->
    ``query.weight``; the attention's projections hang under ``self`` either way)."""
    return name.replace(".linear.", ".")


def quantize_model(
    model: str | Path | None,
    texts: Sequence[str],
    output: Path,
    config: DistillConfig | None = None,
    max_seconds: float | None = None,
) -> int:
    """Distill ``model``'s static int8 on ``texts`` (unlabelled, like those it will encode; the first
    ``CALIBRATION_TEXTS`` calibrate) into ``output``: the model folder with its original weights (fp32 and bf16 run
    them) and the distilled int8 weights and ranges (``precision="int8"`` runs them). Resumable: a run stopped by
    ``max_seconds`` leaves a checkpoint in ``output`` that the next call continues; returns the steps done (the
    folder is complete when they reach ``config.steps``)."""
    from ..encoder.int8.calibration import CALIBRATION_TEXTS, calibrate
    from ..encoder.int8.distilled import DistilledInt8

    config = config or DistillConfig()
    if not texts:
        raise InvalidArgumentError(
            "quantize needs texts to distill on: pass a few thousand like those you will encode."
        )
    encoder = SentenceEncoder.load(model, device="cpu", precision="fp32")
    output.mkdir(parents=True, exist_ok=True)
    ranges_file = output / ".int8_distill_ranges.safetensors"
    ranges = ActivationRanges.read(ranges_file)
    if ranges is None:
        chosen = list(texts)[:CALIBRATION_TEXTS]
        ranges = calibrate(encoder.transformer.model, encoder._calibration_batches(chosen), encoder.transformer)
        ranges.save(ranges_file)
    checkpoint = output / ".int8_distill.pt"
    weights, step = distill_int8(encoder, ranges, texts, config, checkpoint, max_seconds)
    if step >= config.steps:
        encoder.save(output)
        DistilledInt8(weights, ranges).save(output)
        checkpoint.unlink()
        ranges_file.unlink()
    return step
