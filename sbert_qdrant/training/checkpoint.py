"""Resumable checkpoints: a loadable model folder plus the optimizer, scheduler, RNG and step that produced it.

Layout of ``checkpoint/``: the sentence-transformers model files of the encoder or cross-encoder (with
``softmax_head/`` when training with SoftmaxLoss), ``trainer_state.json`` (step, best metric, configuration;
human-readable) and ``trainer_state.pt`` (tensors; read with ``torch.load(weights_only=True)``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from ..errors import ModelLoadError
from .losses import Objective, SoftmaxLoss
from .losses.base import Trainable

STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.pt"
CHECKPOINTS = "checkpoints"


class CheckpointError(ModelLoadError):
    """A checkpoint that cannot be resumed: missing files, or a run configured differently."""


def save_model(folder: Path, encoder: Trainable, objectives: list[Objective]) -> None:
    """The model in sentence-transformers format, plus the first SoftmaxLoss head (if any)."""
    encoder.save(folder)
    heads = [o for o in objectives if isinstance(o, SoftmaxLoss)]
    if heads:
        heads[0].save_head(folder)


def head_states(objectives: list[Objective]) -> list[dict[str, torch.Tensor]]:
    """Each objective's own parameters (its classifier, say), without the shared encoder (however deep: a
    MatryoshkaLoss holds it twice)."""
    shared = {id(t) for t in objectives[0].encoder.state_dict(keep_vars=True).values()} if objectives else set()
    return [{k: v.detach() for k, v in o.state_dict(keep_vars=True).items() if id(v) not in shared} for o in objectives]


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def write_checkpoint(
    folder: Path,
    encoder: Trainable,
    objectives: list[Objective],
    summary: dict[str, Any],
    tensors: dict[str, Any],
) -> None:
    """Write to a temporary folder first, so a crash never leaves a half-written checkpoint under its name."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    save_model(partial, encoder, objectives)
    torch.save(tensors, partial / STATE_TENSORS)
    (partial / STATE_JSON).write_text(json.dumps(summary, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def latest_checkpoint(path: Path) -> Path:
    """``path`` itself when it is a checkpoint, else the highest-step checkpoint under ``path/checkpoints``."""
    if (path / STATE_JSON).is_file():
        return path
    found = sorted((path / CHECKPOINTS).glob("step-*[0-9]"), key=lambda p: int(p.name.split("-")[1]))
    if not found:
        raise CheckpointError(f"{path} is neither a checkpoint nor an output folder holding {CHECKPOINTS}/step-N.")
    return found[-1]


def read_checkpoint(
    folder: Path, model_class: type[Trainable], device: torch.device
) -> tuple[dict[str, Any], dict[str, Any], Trainable]:
    """The summary, the tensor state (on CPU; the optimizer moves its own) and the saved model of a checkpoint."""
    try:
        summary = json.loads((folder / STATE_JSON).read_text(encoding="utf-8"))
        tensors = torch.load(folder / STATE_TENSORS, map_location="cpu", weights_only=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"cannot read the checkpoint in {folder} ({exc}); resume from another one.") from exc
    return summary, tensors, model_class.load(folder, device=device, precision="fp32")


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` checkpoints."""
    found = sorted((output_dir / CHECKPOINTS).glob("step-*[0-9]"), key=lambda p: int(p.name.split("-")[1]))
    for old in found[: max(0, len(found) - keep)]:
        shutil.rmtree(old)
