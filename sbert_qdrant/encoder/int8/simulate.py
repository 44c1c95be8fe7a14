"""Static int8 simulated in PyTorch, differentiably, for quantization-aware training: the arithmetic that
``quantize_static_int8`` and the native AVX2 kernels run (``kernels/int8_avx2.cpp``), as fake quantization with a
straight-through estimator (rounding passes the gradient as if it were the identity).

What is simulated, per Linear (``linear.static_coding``, the one place the coding is decided): SmoothQuant smoothing
from the current weights, u8 inputs at the calibrated scale (s16 for the kept ones), s8 weights with the AVX2 GEMM's
pair-safe 7-8-bit levels per output channel; per attention: q, k and v coded u8 at their calibrated output reach,
q.k in integers, the softmax as u8 weights (rounded, small ones dithered as the kernel does) normalized by their
integer sum, the context coded at the output projection's input scale. GELU, residual adds and LayerNorms stay fp32,
as the kernels compute them. Only the AVX2 int8 GEMM ISA is simulated (``cpu.int8_gemm_isa``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ...errors import UnsupportedError
from .calibration import ActivationRanges, quantized_layer_names
from .linear import SHARED_INPUT, SMOOTH_ALPHA, WEIGHT_LEVELS, input_limit, static_coding
from .native_layers import ZERO_POINT, kernel_head_size, key_validity
from .quantize import DOWN_PROJECTION_ALPHA, is_down_projection, kept_layer_names

#: The int8 GEMM ISAs simulated.
SIMULATED_ISAS = ("avx2",)
#: The kernels' softmax dither (``kernels/dither.h``): rows repeat every DITHER_ROWS query rows.
DITHER_ROWS = 16
_DITHER_KEY, _DITHER_ROW = 0.7548776662466927, 0.5698402909980532


def fake_round(x: torch.Tensor) -> torch.Tensor:
    """``round(x)`` forward (half to even, as the kernels), identity backward."""
    return x + (torch.round(x) - x).detach()


def fake_floor(x: torch.Tensor) -> torch.Tensor:
    """``floor(x)`` forward, identity backward."""
    return x + (torch.floor(x) - x).detach()


class SimulatedInt8Linear(nn.Module):
    """A Linear as :class:`~.linear.StaticInt8Linear` computes it on the AVX2 GEMM, with ``linear``'s (trainable)
    weight and bias: inputs and weights fake-quantized with the coding of the current weights (no gradient through
    the scales). ``weight_reach``: the largest absolute weight per input channel to smooth by, where Linears share one
    input (attention's query, key and value); None: this Linear's own."""

    low: torch.Tensor
    high: torch.Tensor

    def __init__(
        self,
        linear: nn.Linear,
        low: torch.Tensor,
        high: torch.Tensor,
        alpha: float,
        weight_reach: Callable[[], torch.Tensor] | None = None,
        wide_input: bool = False,
    ) -> None:
        super().__init__()
        self.linear, self.alpha, self.wide_input, self._reach = linear, alpha, wide_input, weight_reach
        self.register_buffer("low", low.detach().float().clone())
        self.register_buffer("high", high.detach().float().clone())
        self.limit = input_limit(linear.in_features, wide_input)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            reach = None if self._reach is None else self._reach()
            weight = self.linear.weight.detach().float()
            levels = WEIGHT_LEVELS["avx2"]
            coding = static_coding(weight, self.low, self.high, self.alpha, reach, levels, self.wide_input)
            multiplier = 1 / (coding.smooth * coding.x_scale)
        if self.wide_input:
            codes = torch.clamp(fake_round(x * multiplier), -self.limit, self.limit)
        else:
            codes = torch.clamp(fake_round(x * multiplier + coding.x_zero_point), 0, 255) - coding.x_zero_point
        w_scale = coding.w_scale[:, None]
        weights = torch.clamp(fake_round(self.linear.weight * coding.smooth / w_scale), -127, 127) * w_scale
        return nn.functional.linear(codes * coding.x_scale, weights, self.linear.bias)


def _coded(y: torch.Tensor, scale: float) -> torch.Tensor:
    """``y`` as the GEMM writes q, k or v: u8 ``round(y / scale) + 128``, returned as its signed code (-128..127)."""
    return torch.clamp(fake_round(y / scale) + ZERO_POINT, 0, 255) - ZERO_POINT


def _dither(rows: int, keys: int) -> torch.Tensor:
    """The kernels' dither for query rows ``0..rows-1`` and keys ``0..keys-1`` (computed in double, as they do)."""
    i = torch.arange(rows, dtype=torch.float64)[:, None] % DITHER_ROWS
    t = torch.arange(keys, dtype=torch.float64)[None, :] * _DITHER_KEY + i * _DITHER_ROW
    return (t - torch.floor(t)).float()


class SimulatedInt8SelfAttention(nn.Module):
    """A BERT-style self-attention as :class:`~.native_layers.StaticInt8SelfAttention` computes it with the AVX2
    kernels: q, k and v coded u8 at ``reach`` / 127, integer q.k, u8 softmax weights (``floor(255 e^(s - max) +
    d)``, d = 0.5, or the dither below 1), the context divided by their integer sum. Returns the context in fp32
    (the output projection codes it at its own input scale, as the kernel does)."""

    def __init__(
        self,
        query: SimulatedInt8Linear,
        key: SimulatedInt8Linear,
        value: SimulatedInt8Linear,
        heads: int,
        reach: tuple[float, float, float],
    ) -> None:
        super().__init__()
        self.query, self.key, self.value, self.heads = query, key, value, heads
        self.head_size = query.linear.out_features // heads
        self.scales = tuple(max(r, 1e-8) / 127 for r in reach)
        self.qk_scale = self.scales[0] * self.scales[1] / math.sqrt(self.head_size)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: object
    ) -> tuple[torch.Tensor, None]:
        batch, length, width = hidden_states.shape

        def heads(y: torch.Tensor, scale: float) -> torch.Tensor:
            return _coded(y, scale).view(batch, length, self.heads, self.head_size).transpose(1, 2)

        q = heads(self.query(hidden_states), self.scales[0])
        k = heads(self.key(hidden_states), self.scales[1])
        v = heads(self.value(hidden_states), self.scales[2])
        valid = key_validity(attention_mask, batch, length).bool()[:, None, None, :]
        scores = torch.where(valid, (q @ k.transpose(-1, -2)) * self.qk_scale, float("-inf"))
        x = torch.exp(scores - scores.amax(-1, keepdim=True).detach()) * 255
        dither = torch.where(x < 1, _dither(length, length), 0.5)
        weights = torch.clamp(fake_floor(x + dither), max=255)
        context = (weights @ v) * (self.scales[2] / weights.sum(-1, keepdim=True))
        return context.transpose(1, 2).reshape(batch, length, width), None


def simulate_int8(model: nn.Module, ranges: ActivationRanges, isa: str = "avx2") -> nn.Module:
    """Make ``model``'s calibrated Linears and BERT-style self-attentions their simulated int8 twins, in place, as
    ``quantize_static_int8`` makes them on a CPU with the ``isa`` int8 GEMM and the native kernels (the kept Linears
    with s16 inputs). The Linears keep their parameters: training the simulation trains the model."""
    if isa not in SIMULATED_ISAS:
        raise UnsupportedError(f"int8 is simulated for the {SIMULATED_ISAS} int8 GEMMs only, not {isa!r}.")
    kept = set(kept_layer_names(model) if ranges.kept is None else ranges.kept)
    names = quantized_layer_names(model)
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        linear = getattr(parent, child)
        shared = child in SHARED_INPUT and all(f"{parent_name}.{c}" in names for c in SHARED_INPUT)
        reach = _shared_reach(parent) if shared else None
        wide = name in kept
        if wide and not (linear.out_features % 16 == 0 and linear.in_features % 4 == 0):
            continue  # the native GEMM does not run this shape: it stays fp32 (no bf16 on AVX2)
        default = SMOOTH_ALPHA if wide or not is_down_projection(linear) else DOWN_PROJECTION_ALPHA
        alpha = ranges.alphas.get(name, default)
        simulated = SimulatedInt8Linear(linear, ranges.low[name], ranges.high[name], alpha, reach, wide)
        setattr(parent, child, simulated)
    _install_attention(model, ranges.output_reach)
    return model


def _shared_reach(parent: nn.Module) -> Callable[[], torch.Tensor]:
    linears = [getattr(parent, child) for child in SHARED_INPUT]

    def reach() -> torch.Tensor:
        weights = [(lin.linear if isinstance(lin, SimulatedInt8Linear) else lin).weight for lin in linears]
        return torch.stack([w.detach().float().abs().amax(0) for w in weights]).amax(0)

    return reach


def _install_attention(model: nn.Module, output_reach: dict[str, float]) -> None:
    """Swap each self-attention whose q, k, v and output projection are simulated int8 (the output's inputs u8) for
    its simulated int8 twin, where ``install_int8_attention`` would swap it for the kernel's."""
    for name, module in list(model.named_modules()):
        attention, output = getattr(module, "self", None), getattr(getattr(module, "output", None), "dense", None)
        heads = getattr(attention, "num_attention_heads", None)
        linears = [getattr(attention, part, None) for part in SHARED_INPUT]
        names = [f"{name}.self.{part}" for part in SHARED_INPUT]
        simulated = [lin for lin in linears if isinstance(lin, SimulatedInt8Linear)]
        if (
            len(simulated) != len(SHARED_INPUT)
            or not isinstance(output, SimulatedInt8Linear)
            or output.wide_input
            or not isinstance(heads, int)
            or getattr(getattr(attention, "config", None), "is_decoder", True)
            or not all(n in output_reach for n in names)
        ):
            continue
        query, key, value = simulated
        head_size, rest = divmod(query.linear.out_features, heads)
        if rest or not kernel_head_size(head_size):
            continue
        reach = (output_reach[names[0]], output_reach[names[1]], output_reach[names[2]])
        module.self = SimulatedInt8SelfAttention(query, key, value, heads, reach)
