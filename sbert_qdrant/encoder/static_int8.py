"""Static int8: activation ranges calibrated once on real text, SmoothQuant-smoothed, run as fused u8 x s8 oneDNN
GEMMs (VNNI). Dynamic int8 (activations measured on the fly, ``runtime.quantize_dynamic_int8``) is the named fallback.

A calibration is a few hundred texts run in fp32 with each quantized Linear's input range recorded per channel.
SmoothQuant (Xiao et al., 2023) moves outlier channels' range from activations into weights: a Linear's input is
divided per channel by ``s = amax_x**alpha / amax_w**(1 - alpha)`` and its weight columns multiplied by ``s``, so one
per-tensor activation scale fits. Calibrations are cached per model (``cache_folder()``), so a reload does not
calibrate again.

Where the drift comes from (all-MiniLM-L6-v2, one Linear type quantized at a time, 2,000 STS-B train and Quora
sentences): q/k/v, attention output and FFN input each keep cosine to fp32 >= 0.9992; the FFN output (down
projection, fed by GELU, with channels reaching 10-25) alone drops it to 0.964 and STS-B dev by 0.33. So the down
projections smooth harder (``DOWN_PROJECTION_ALPHA``) and the first layer's, the one with the largest outliers, stays
in bf16 (fp32 without native bf16): min cosine 0.991, STS-B dev 86.70 (fp32 86.72).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..errors import InvalidArgumentError
from .base import Features

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: SmoothQuant's migration strength: 0 leaves activations alone, 1 moves all their range into the weights.
SMOOTH_ALPHA = 0.5
#: The FFN down projection's alpha: its GELU input has outlier channels ~5x the rest, so more of the range moves
#: into the weights (alpha 0.3: min cosine 0.64; 0.5: 0.964; 0.65: 0.988; 0.75: 0.991; 0.85: 0.992).
DOWN_PROJECTION_ALPHA = 0.75
#: At most this many texts calibrate (more add time, not accuracy).
CALIBRATION_TEXTS = 512
#: Fewer texts than this calibrate with a warning: rare channels' ranges may be missed and clipped later.
FEW_CALIBRATION_TEXTS = 100
_FORMAT = "sbert-qdrant static int8 v1"
_VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
#: oneDNN ISA limits (``ONEDNN_MAX_CPU_ISA``) that include VNNI: AVX2_VNNI, AVX512_CORE_VNNI/_BF16/_FP16/_AMX, AVX10.
_VNNI_ISA_MARKERS = ("VNNI", "BF16", "FP16", "AMX", "AVX10")


def static_int8_unsupported() -> str | None:
    """Why this CPU runs dynamic int8 instead of static (None: oneDNN may use VNNI int8 instructions here)."""
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    if not any(capabilities.get(flag) for flag in _VNNI_FLAGS):
        return f"the CPU has none of {', '.join(_VNNI_FLAGS)}, so static int8 GEMMs would not beat dynamic ones"
    limit = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL").upper()
    if limit != "ALL" and not any(marker in limit for marker in _VNNI_ISA_MARKERS):
        return f"ONEDNN_MAX_CPU_ISA={limit} keeps oneDNN off VNNI int8 instructions"
    return None


def cache_folder() -> Path:
    """Where calibrations are kept: ``$SBERT_QDRANT_CACHE``, else ``~/.cache/sbert-qdrant``."""
    return Path(os.environ.get("SBERT_QDRANT_CACHE") or Path.home() / ".cache" / "sbert-qdrant").expanduser()


def quantized_layer_names(model: nn.Module) -> list[str]:
    """The Linear layers static int8 quantizes: those inside the numbered transformer layers (a pooler or a
    classification head is tiny and stays fp32)."""
    return [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and ".layer." in name and any(part.isdigit() for part in name.split("."))
    ]


def _block_index(name: str) -> int:
    return next(int(part) for part in name.split(".") if part.isdigit())


def is_down_projection(linear: nn.Linear) -> bool:
    """Whether a transformer layer's Linear is its FFN output (intermediate size down to hidden size)."""
    return linear.in_features > linear.out_features


def kept_layer_names(model: nn.Module) -> list[str]:
    """Calibrated Linears that stay in bf16/fp32: the first transformer layer's FFN output, whose GELU input has the
    widest outliers (quantized alone it costs more cosine than all other down projections together)."""
    names = quantized_layer_names(model)
    first = min((_block_index(name) for name in names), default=None)
    return [
        name
        for name in names
        if _block_index(name) == first and is_down_projection(model.get_submodule(name))  # type: ignore[arg-type]
    ]


@dataclass(frozen=True)
class Calibration:
    """Per quantized Linear: each input channel's smallest and largest value over the calibration texts, and the
    largest absolute output (``output_reach``; empty in calibrations saved before it was recorded)."""

    low: dict[str, torch.Tensor]
    high: dict[str, torch.Tensor]
    texts_digest: str
    output_reach: dict[str, float] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        tensors = {f"{name}.low": t for name, t in self.low.items()} | {f"{n}.high": t for n, t in self.high.items()}
        tensors |= {f"{name}.output_reach": torch.tensor([reach]) for name, reach in self.output_reach.items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        save_file(tensors, str(partial), metadata={"format": _FORMAT, "texts": self.texts_digest})
        partial.replace(path)

    @classmethod
    def read(cls, path: Path) -> Calibration | None:
        """The calibration saved at ``path``; None when there is none of this format."""
        if not path.is_file():
            return None
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        if metadata.get("format") != _FORMAT:
            return None
        tensors = load_file(str(path))
        low = {k.removesuffix(".low"): t for k, t in tensors.items() if k.endswith(".low")}
        high = {k.removesuffix(".high"): t for k, t in tensors.items() if k.endswith(".high")}
        reach = {k.removesuffix(".output_reach"): float(t) for k, t in tensors.items() if k.endswith(".output_reach")}
        return cls(low, high, metadata.get("texts", ""), reach)


def texts_digest(texts: Sequence[Any]) -> str:
    return hashlib.blake2b(json.dumps(list(texts)).encode(), digest_size=8).hexdigest()


def calibration_path(weights_digest: str) -> Path:
    """The cached calibration of a model (by its fp32 weights' digest)."""
    return cache_folder() / "int8" / f"{weights_digest}.safetensors"


def calibrate(model: nn.Module, batches: Iterable[Features], run: Callable[[Features], object]) -> Calibration:
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
    return Calibration(low, high, "", reach)


class StaticInt8Linear(nn.Module):
    """A Linear run as u8 activations (one calibrated scale and zero point) x s8 weights (one scale per output
    channel), SmoothQuant-smoothed, on oneDNN's fused int8 GEMM with an fp32 output (or bf16, or u8 in a given
    quantization). A u8 input is taken as already quantized in this Linear's own quantization.

    ``weight_reach``: each input channel's largest absolute weight to smooth by, when Linears reading the same input
    (attention's query, key and value) must share one smoothing and so one quantization of it.
    """

    x_multiplier: torch.Tensor
    x_offset: torch.Tensor
    w_scale: torch.Tensor
    w_zero_point: torch.Tensor
    bias: torch.Tensor | None

    def __init__(
        self,
        linear: nn.Linear,
        low: torch.Tensor,
        high: torch.Tensor,
        alpha: float = SMOOTH_ALPHA,
        weight_reach: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        reach = torch.maximum(low.abs(), high.abs()).clamp(min=1e-5)
        if weight_reach is None:
            weight_reach = weight.abs().amax(0)
        smooth = (reach**alpha / weight_reach.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)
        weight = weight * smooth
        lowest = float(torch.clamp((low / smooth).min(), max=0.0))
        highest = float(torch.clamp((high / smooth).max(), min=0.0))
        self.x_scale = max(highest - lowest, 1e-8) / 255
        self.x_zero_point = min(255, round(-lowest / self.x_scale))
        # x / smooth / x_scale + zero point, as one multiply-add per element
        self.register_buffer("x_multiplier", (1 / (smooth * self.x_scale)).contiguous())
        self.register_buffer("x_offset", torch.tensor(float(self.x_zero_point)))
        w_scale = weight.abs().amax(1).clamp(min=1e-8) / 127
        int8_weight = torch.round(weight / w_scale[:, None]).clamp(-127, 127).to(torch.int8)
        self.packed_weight = torch.ops.onednn.qlinear_prepack(int8_weight, None)
        self.register_buffer("w_scale", w_scale.contiguous())
        self.register_buffer("w_zero_point", torch.zeros(w_scale.shape, dtype=torch.int64))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().contiguous())
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.post_op, self.post_op_algorithm = "none", ""
        #: bf16 where only this package's quantizer reads the output (FFN up projections on a native-bf16 CPU); u8
        #: (with ``output_scale`` and ``output_zero_point``) where the int8 attention kernel reads it.
        self.output_dtype = torch.float32
        self.output_scale, self.output_zero_point = 1.0, 0
        #: The native kernel's quantizer (``native.quantize_rows``) where it loaded, set by quantize_static_int8.
        self.native_quantize: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor] | None = None

    def fuse_gelu(self) -> None:
        """Apply the exact (erf) GELU to the output inside the GEMM, instead of as another pass after it."""
        self.post_op, self.post_op_algorithm = "gelu", "none"

    def quantize_output(self, scale: float, zero_point: int) -> None:
        """Write u8 outputs: ``round(y / scale) + zero_point``, clamped to 0..255."""
        self.output_dtype, self.output_scale, self.output_zero_point = torch.uint8, scale, zero_point

    def shares_quantization(self, *others: StaticInt8Linear) -> bool:
        """Whether ``others`` quantize their input exactly as this Linear does (so one u8 copy serves all)."""
        return all(
            (o.x_scale, o.x_zero_point) == (self.x_scale, self.x_zero_point)
            and torch.equal(o.x_multiplier, self.x_multiplier)
            for o in others
        )

    def quantize(self, rows: torch.Tensor) -> torch.Tensor:
        """``rows`` (fp32 or bf16, [n, in_features]) as u8 in this Linear's input quantization."""
        if self.native_quantize is not None:
            return self.native_quantize(rows, self.x_multiplier, float(self.x_zero_point))
        quantize = _quantizer() if rows.numel() >= COMPILED_QUANTIZE_SIZE else quantize_rows
        return quantize(rows, self.x_multiplier, self.x_offset)

    def gemm(self, quantized: torch.Tensor) -> torch.Tensor:
        """The int8 GEMM (with its fused post-op) of quantized rows."""
        return torch.ops.onednn.qlinear_pointwise(
            quantized,
            self.x_scale,
            self.x_zero_point,
            self.packed_weight,
            self.w_scale,
            self.w_zero_point,
            self.bias,
            self.output_scale,
            self.output_zero_point,
            self.output_dtype,
            self.post_op,
            [],
            self.post_op_algorithm,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        out = self.gemm(rows if rows.dtype == torch.uint8 else self.quantize(rows))
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        fused = "" if self.post_op == "none" else f", fused {self.post_op}"
        return f"in_features={self.in_features}, out_features={self.out_features}, static u8 x s8{fused}"


class Bf16Linear(nn.Module):
    """A Linear computed in bf16 (for a CPU with native bf16) between fp32 neighbours."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().to(torch.bfloat16), requires_grad=False)
        bias = linear.bias
        self.bias = None if bias is None else nn.Parameter(bias.detach().to(torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias).float()


def quantize_rows(rows: torch.Tensor, multiplier: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """``rows * multiplier + offset`` rounded to u8: the activation quantization of :class:`StaticInt8Linear`."""
    return torch.clamp(torch.round(rows * multiplier + offset), 0, 255).to(torch.uint8)


#: Activations of at least this many values are quantized by the compiled pass; smaller ones (short sentences)
#: eagerly, where the compiled call's fixed overhead outweighs its saving.
COMPILED_QUANTIZE_SIZE = 1 << 18
_compiled: list[Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = []


def _quantizer() -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """:func:`quantize_rows` compiled into one pass (eager it is four fp32 passes, half of a long batch's time),
    or eager when torch.compile cannot build here (no C++ compiler); decided once, on first use."""
    if not _compiled:
        multiplier, offset = torch.ones(384), torch.tensor(1.0)  # like the Linears' buffers: not inference tensors
        try:
            # rows as encode makes them (inference mode), so that no call compiles again; torch's own imports warn of
            # torch.jit
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                compiled = torch.compile(quantize_rows, dynamic=True)
                compiled(torch.zeros(64, 384), multiplier, offset)
                compiled(torch.zeros(64, 384, dtype=torch.bfloat16), multiplier, offset)
        except Exception as exc:  # noqa: BLE001 - any build failure means eager, which is correct
            logger.warning("static int8 quantizes activations eagerly (slower): torch.compile failed: %s", exc)
            compiled = quantize_rows
        _compiled.append(compiled)
    return _compiled[0]


def quantize_static_int8(model: nn.Module, calibration: Calibration) -> nn.Module:
    """Swap every calibrated Linear of ``model`` for a :class:`StaticInt8Linear` (the kept ones, see
    :func:`kept_layer_names`, for a :class:`Bf16Linear` on a CPU with native bf16, else left fp32), and each
    BERT-style self-attention for the int8 one, in place. Where the native kernels run (``native.py``) they quantize
    activations and compute attention; elsewhere PyTorch does."""
    from .native import native_library
    from .native import quantize_rows as native_quantize
    from .native_layers import install_int8_attention, install_residual_layer_norms
    from .runtime import native_bf16_cpu

    kept = set(kept_layer_names(model))
    bf16 = native_bf16_cpu()
    native = native_library() is not None
    if not native:
        _quantizer()  # built here, once, rather than by parallel batches
    names = quantized_layer_names(model)
    weight_reach = _shared_weight_reach(model, names)
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        linear = getattr(parent, child)
        if name in kept:
            if bf16:
                setattr(parent, child, Bf16Linear(linear))
            continue
        alpha = DOWN_PROJECTION_ALPHA if is_down_projection(linear) else SMOOTH_ALPHA
        quantized = StaticInt8Linear(
            linear, calibration.low[name], calibration.high[name], alpha, weight_reach.get(parent_name)
        )
        quantized.native_quantize = native_quantize if native else None
        setattr(parent, child, quantized)
    _fuse_gelus(model, bf16)
    install_int8_attention(model, calibration.output_reach)
    install_residual_layer_norms(model)
    return model


#: Linears that read one input (an attention's projections), by their name in the parent module.
SHARED_INPUT = ("query", "key", "value")


def _shared_weight_reach(model: nn.Module, names: list[str]) -> dict[str, torch.Tensor]:
    """Per parent module holding all of :data:`SHARED_INPUT`: the largest absolute weight per input channel over
    them, so that they smooth (and quantize) their common input alike."""
    reach: dict[str, torch.Tensor] = {}
    for parent_name in {name.rpartition(".")[0] for name in names}:
        parent = model.get_submodule(parent_name)
        linears = [getattr(parent, child, None) for child in SHARED_INPUT]
        weights = [linear.weight.detach().float() for linear in linears if isinstance(linear, nn.Linear)]
        if len(weights) == len(SHARED_INPUT) and all(f"{parent_name}.{c}" in names for c in SHARED_INPUT):
            reach[parent_name] = torch.stack([weight.abs().amax(0) for weight in weights]).amax(0)
    return reach


def _fuse_gelus(model: nn.Module, bf16: bool) -> None:
    """Move each FFN's exact GELU into its quantized up projection's GEMM (Hugging Face BERT-style blocks: a
    ``dense`` then an ``intermediate_act_fn``); other activations stay where they are.

    bf16: the up projection writes bf16 (its reader quantizes it to u8 anyway): half the bytes of the widest
    activation to write and read again (about 10 % of a long batch, relative probe; min cosine unchanged).
    """
    for module in model.modules():
        dense, act = getattr(module, "dense", None), getattr(module, "intermediate_act_fn", None)
        exact_gelu = isinstance(act, nn.GELU) and act.approximate == "none"
        exact_gelu = exact_gelu or getattr(act, "act", None) is nn.functional.gelu  # transformers' GELUActivation
        if isinstance(dense, StaticInt8Linear) and exact_gelu:
            dense.fuse_gelu()
            if bf16:
                dense.output_dtype = torch.bfloat16
            module.intermediate_act_fn = nn.Identity()


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
) -> Calibration | None:
    """The calibration to quantize ``model`` with, or None (with the reason logged) when dynamic int8 must run.

    ``texts`` (texts, or text pairs for a cross-encoder) given: calibrated on (up to ``CALIBRATION_TEXTS`` of)
    them, unless the cached calibration of these weights came from the same ones; then saved for later loads.
    None: the cached calibration of these weights.
    """
    reason = static_int8_unsupported()
    if reason is not None:
        logger.warning("precision='int8' runs dynamic int8: %s.", reason)
        return None
    path = calibration_path(weights_digest)
    cached = Calibration.read(path)
    names = set(quantized_layer_names(model))
    if cached is not None and set(cached.low) != names:
        cached = None
    if texts is None:
        if cached is None:
            logger.warning(
                "precision='int8' runs dynamic int8: no calibration for this model in %s; pass "
                "calibration_texts=[...] (a few hundred of your own texts) once to run static int8.",
                path.parent,
            )
        else:
            logger.info("static int8: calibration read from %s", path)
        return cached
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
    measured = calibrate(model, batches(chosen), run)
    calibration = Calibration(measured.low, measured.high, digest, measured.output_reach)
    calibration.save(path)
    logger.info("static int8: calibrated on %d texts, saved to %s", len(chosen), path)
    return calibration
