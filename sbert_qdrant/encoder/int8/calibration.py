"""Activation ranges of static int8: measured once on real text (each quantized Linear's input range per channel and
its output reach), cached per model in the settings' cache folder, so a reload does not calibrate again. The default
model's ship with the package (``ranges/``, made by ``benchmarks/int8_ranges.py`` from the shared train texts), with
the held-out STS losses they were measured to cost per int8 ISA: ``precision="auto"`` reads those."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from ...errors import InvalidArgumentError
from ...settings import Settings
from .. import cpu
from ..features import Features

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: At most this many texts calibrate (more add time, not accuracy).
CALIBRATION_TEXTS = 512
#: Fewer texts than this calibrate with a warning: rare channels' ranges may be missed and clipped later.
FEW_CALIBRATION_TEXTS = 100
_FORMAT = "sbert-qdrant static int8 v1"
#: Ranges shipped with the package, by weights digest (statistics of train texts, not data).
PACKAGED = Path(__file__).parent / "ranges"
#: ``precision="auto"`` picks static int8 for a model only where its shipped ranges were measured to lose at most this
#: much STS Spearman (x100) on every dev set (:data:`DEV_SETS`, tuned on) with this CPU's int8 ISA: "within 0.1 of
#: fp32" with half kept as margin, since dev figures flatter unseen sets.
EXACT_GRADE_LOSS = 0.05
#: ... and at most this much on every held-apart set (sets nothing was calibrated or tuned on: MNLI, XNLI, SNLI dev,
#: Quora pairs; ``benchmarks/int8_heldapart.py``), of which it needs at least one: within 0.1 with a margin for sets
#: no one here has (a loss of 0.05 on dev was once 0.19 on STS-B test).
HELD_APART_LOSS = 0.075
#: The sets the int8 was tuned on (their losses flatter it most).
DEV_SETS = frozenset({"stsb_dev", "sick"})


def quantized_layer_names(model: nn.Module) -> list[str]:
    """The Linear layers static int8 calibrates: those inside the numbered transformer layers (a pooler or a
    classification head is tiny and stays fp32)."""
    return [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and ".layer." in name and any(part.isdigit() for part in name.split("."))
    ]


@dataclass(frozen=True)
class ActivationRanges:
    """Per quantized Linear: each input channel's smallest and largest value over the calibration texts, and the
    largest absolute output (``output_reach``; empty in files saved before it was recorded). ``losses``: int8 ISA ->
    held-out set -> STS Spearman (x100) lost against fp32, as measured (shipped ranges only).

    ``kept``: the Linears to keep out of u8 activations, chosen by measured sensitivity (None: the rule of
    ``quantize.kept_layer_names``); ``alphas``: SmoothQuant strengths per Linear where they differ from the defaults.
    Both travel with the ranges they were chosen for (files without them read as None and {})."""

    low: dict[str, torch.Tensor]
    high: dict[str, torch.Tensor]
    texts_digest: str
    output_reach: dict[str, float] = field(default_factory=dict)
    losses: dict[str, dict[str, float]] = field(default_factory=dict)
    kept: tuple[str, ...] | None = None
    alphas: dict[str, float] = field(default_factory=dict)

    def exact_grade(self, isa: str | None, limit: float | None = None) -> bool:
        """Whether these ranges were measured with ``isa`` and lost at most ``limit`` on every set; None: at most
        :data:`EXACT_GRADE_LOSS` on the dev sets and :data:`HELD_APART_LOSS` on the held-apart ones, at least one of
        which was measured (:meth:`int8_verdict` says why not)."""
        return self.int8_verdict(isa, limit) is None

    def int8_verdict(self, isa: str | None, limit: float | None = None) -> str | None:
        """None where these ranges are exact-grade with ``isa`` (:meth:`exact_grade`), else why not."""
        measured = self.losses.get(isa or "")
        if not measured:
            return f"no losses measured with int8 ISA {isa}"
        if limit is None and not set(measured) - DEV_SETS:
            return f"no held-apart set measured with {isa} (only {sorted(measured)})"
        for name, loss in sorted(measured.items(), key=lambda item: -item[1]):
            bound = limit if limit is not None else EXACT_GRADE_LOSS if name in DEV_SETS else HELD_APART_LOSS
            if loss > bound:
                return f"static int8 lost {loss:.3f} Spearman x100 on {name} with {isa} (limit {bound})"
        return None

    def save(self, path: Path) -> None:
        """Write to ``path`` atomically: a unique temporary file beside it, then renamed over it (two processes
        calibrating the same model each write whole files; the last rename wins)."""
        tensors = {f"{name}.low": t for name, t in self.low.items()} | {f"{n}.high": t for n, t in self.high.items()}
        tensors |= {f"{name}.output_reach": torch.tensor([reach]) for name, reach in self.output_reach.items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
        os.close(handle)
        try:
            metadata = {"format": _FORMAT, "texts": self.texts_digest, "losses": json.dumps(self.losses)}
            if self.kept is not None:
                metadata["kept"] = json.dumps(list(self.kept))
            if self.alphas:
                metadata["alphas"] = json.dumps(self.alphas)
            save_file(tensors, partial, metadata=metadata)
            os.replace(partial, path)
        finally:
            Path(partial).unlink(missing_ok=True)

    @classmethod
    def read(cls, path: Path) -> ActivationRanges | None:
        """The ranges saved at ``path``; None when there are none of this format."""
        if not path.is_file():
            return None
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        if metadata.get("format") != _FORMAT:
            return None
        tensors = load_file(str(path))
        low = {k.removesuffix(".low"): t for k, t in tensors.items() if k.endswith(".low")}
        high = {k.removesuffix(".high"): t for k, t in tensors.items() if k.endswith(".high")}
        reach = {k.removesuffix(".output_reach"): float(t) for k, t in tensors.items() if k.endswith(".output_reach")}
        kept = json.loads(metadata["kept"]) if "kept" in metadata else None
        return cls(
            low,
            high,
            metadata.get("texts", ""),
            reach,
            json.loads(metadata.get("losses") or "{}"),
            None if kept is None else tuple(kept),
            json.loads(metadata.get("alphas") or "{}"),
        )


def texts_digest(texts: Sequence[Any]) -> str:
    return hashlib.blake2b(json.dumps(list(texts)).encode(), digest_size=8).hexdigest()


def ranges_path(weights_digest: str) -> Path:
    """The cached activation ranges of a model (by its fp32 weights' digest)."""
    return Settings().cache / "int8" / f"{weights_digest}.safetensors"


def packaged_ranges_path(weights_digest: str) -> Path:
    """Where the package ships a model's activation ranges (by its fp32 weights' digest)."""
    return PACKAGED / f"{weights_digest}.safetensors"


def int8_isa() -> str | None:
    """The int8 GEMM ISA static int8 runs with here (losses are measured per ISA), None where it does not run."""
    isa, _ = cpu.int8_gemm_isa()
    return None if isa == "none" else isa


@functools.cache
def shipped_ranges(weights_digest: str) -> ActivationRanges | None:
    """The ranges the package ships for these weights (None: none), read once per process: ``auto``'s choice and
    the quantization both need them at every load."""
    return ActivationRanges.read(packaged_ranges_path(weights_digest))


def exact_grade_int8(weights_digest: str) -> bool:
    """Whether static int8 runs here with shipped ranges for these weights measured exact-grade on this ISA (where
    shipped ranges exist and are not, the reason is logged: ``auto`` then runs the next exact precision)."""
    return exact_grade_ranges(shipped_ranges(weights_digest) if int8_isa() else None)


def exact_grade_ranges(ranges: ActivationRanges | None) -> bool:
    """Whether static int8 runs here with ``ranges`` measured exact-grade on this ISA (else the reason is logged,
    where there are ranges: ``auto`` then runs the next exact precision)."""
    isa = int8_isa()
    if ranges is None or isa is None:
        return False
    why = ranges.int8_verdict(isa)
    if why is not None:
        logger.info("precision='auto' does not run int8: %s", why)
    return why is None


def calibrate(model: nn.Module, batches: Iterable[Features], run: Callable[[Features], object]) -> ActivationRanges:
    """Run ``batches`` through ``run`` (the fp32 model) and record every quantized Linear's input range (per
    channel) and output reach."""
    low: dict[str, torch.Tensor] = {}
    high: dict[str, torch.Tensor] = {}
    reach: dict[str, float] = {}
    hooks = []

    def record(name: str) -> Callable[[nn.Module, tuple[torch.Tensor, ...], torch.Tensor], None]:
        def hook(_: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            x = inputs[0].detach().float().reshape(-1, inputs[0].shape[-1])
            lo, hi = x.amin(0), x.amax(0)
            low[name] = torch.minimum(low[name], lo) if name in low else lo
            high[name] = torch.maximum(high[name], hi) if name in high else hi
            reach[name] = max(reach.get(name, 0.0), float(output.detach().abs().max()))

        return hook

    for name in quantized_layer_names(model):
        hooks.append(model.get_submodule(name).register_forward_hook(record(name)))
    try:
        with torch.inference_mode():
            for features in batches:
                run(features)
    finally:
        for hook in hooks:
            hook.remove()
    return ActivationRanges(low, high, "", reach)


def checked_calibration(
    items: object, precision: str, argument: str, check: Callable[[object], list[T]], like: str
) -> list[T] | None:
    """A load's calibration ``argument`` as a list checked by ``check`` (None stays None): non-empty, and given
    with precision "int8" only; ``like`` says what to pass (e.g. "texts like those you will encode")."""
    if items is None:
        return None
    if precision != "int8":
        raise InvalidArgumentError(
            f"{argument} calibrate static int8 and need precision='int8', not {precision!r}; drop them."
        )
    checked = check(items)
    if not checked:
        raise InvalidArgumentError(f"{argument} is empty; pass a few hundred {like}.")
    return checked


def static_calibration(
    model: nn.Module,
    weights_digest: str,
    texts: Sequence[Any] | None,
    batches: Callable[[list[Any]], Iterable[Features]],
    run: Callable[[Features], object],
) -> ActivationRanges | None:
    """The activation ranges to quantize ``model`` with, or None: none known yet (calibrate later, on the first texts
    encoded) or, where static int8 does not run here, dynamic int8 (the reason logged; :func:`static_supported`).

    ``texts`` (texts, or text pairs for a cross-encoder) given: calibrated on (up to ``CALIBRATION_TEXTS`` of)
    them, unless the cached ranges of these weights came from the same ones; then saved for later loads.
    None: the cached ranges of these weights (a calibration of your own), else the ones the package ships.
    """
    if not static_supported():
        return None
    path = ranges_path(weights_digest)
    cached = ActivationRanges.read(path)
    names = set(quantized_layer_names(model))
    if cached is not None and set(cached.low) != names:
        cached = None
    if texts is None:
        if cached is not None:
            logger.info("static int8: calibration read from %s", path)
            return cached
        shipped = shipped_ranges(weights_digest)
        if shipped is not None and set(shipped.low) == names:
            logger.info("static int8: the calibration shipped for this model")
            return shipped
        return None
    chosen = list(texts)[:CALIBRATION_TEXTS]
    digest = texts_digest(chosen)
    if cached is not None and cached.texts_digest == digest and set(cached.output_reach) == names:
        logger.info("static int8: calibration read from %s", path)
        return cached
    if len(chosen) < FEW_CALIBRATION_TEXTS:
        logger.warning(
            "static int8 calibrates on only %d texts: ranges they miss are clipped later; pass at least %d.",
            len(chosen),
            FEW_CALIBRATION_TEXTS,
        )
    ranges = replace(calibrate(model, batches(chosen), run), texts_digest=digest)
    ranges.save(path)
    logger.info("static int8: calibrated on %d texts, saved to %s", len(chosen), path)
    return ranges


def static_supported() -> bool:
    """Whether static int8 runs on this CPU; where it does not, the reason is logged and int8 is dynamic."""
    isa, reason = cpu.int8_gemm_isa()
    if isa == "none":
        logger.warning("precision='int8' runs dynamic int8: %s (static int8 GEMMs need VNNI or AVX2).", reason)
    return isa != "none"
