"""The Linears of static int8: :class:`StaticInt8Linear` (u8 activations x s8 weights, SmoothQuant-smoothed, on the
native kernels' AVX2 GEMM or oneDNN's fused int8 GEMM) and :class:`Bf16Linear` (for the Linears kept out of int8 on a
CPU with native bf16)."""

from __future__ import annotations

import ctypes
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from ...types import Int8GemmIsa
from .. import cpu
from .native import gemm_s8, pack_weights, runs_gemm
from .native import quantize_rows as native_quantize_rows

logger = logging.getLogger(__name__)

#: SmoothQuant's migration strength: 0 leaves activations alone, 1 moves all their range into the weights.
SMOOTH_ALPHA = 0.5
#: Linears that read one input (an attention's projections), by their name in the parent module.
SHARED_INPUT = ("query", "key", "value")
#: The largest weight code by the GEMMs' ISA (``cpu.int8_gemm_isa``): VNNI adds u8 x s8 products in s32, AVX2's
#: ``vpmaddubsw`` adds pairs of them in saturating s16 (2 x 255 x 127 > 32767), so there (and below) weights keep to
#: 7 bits where any input could saturate a pair, and take up to 8 where the calibrated inputs cannot
#: (:func:`pair_safe_levels`).
WEIGHT_LEVELS: dict[Int8GemmIsa, int] = {"vnni": 127, "avx2": 63, "none": 63}
#: The s16 limit of ``vpmaddubsw``'s pair sums (input codes 2k and 2k + 1 times their weights).
PAIR_SUM_LIMIT = 32767
#: Headroom over the calibrated input codes that :func:`pair_safe_levels` keeps: inputs up to 1.25x a channel's
#: calibrated code (in u8 code units, zero point included) still cannot saturate a pair.
CODE_HEADROOM = 1.25
#: s16 activations' sums stay in s32: input features x the largest activation code x 127 < 2^31.
S32_LIMIT = 2**31 - 1


class StaticInt8Linear(nn.Module):
    """A Linear run as u8 activations (one calibrated scale and zero point) x s8 weights (one scale per output
    channel), SmoothQuant-smoothed, with an fp32 output (or bf16, or u8 at a given scale, or coded for the Linear that
    reads it). An input already coded (u8; s16 where ``wide_input``) is taken as coded at this Linear's own scale.

    The GEMM: the native kernels' (``native``, their AVX2 build: 10-20 % faster than oneDNN's there, any output
    coding fused) where :func:`~.native.runs_gemm` says so, else oneDNN's fused int8 GEMM. ``wide_input``: s16
    activations (symmetric, as many levels as s32 sums allow: about 13 bits for 1,536 features) for a Linear whose
    inputs 8 bits code too coarsely; native GEMM only, at about 1.7x fp32's speed.

    ``weight_reach``: each input channel's largest absolute weight to smooth by, when Linears reading the same input
    (attention's query, key and value) must share one smoothing and so one input scale. ``weight_levels``: the
    largest weight code safe for any input (:data:`WEIGHT_LEVELS`); below 127 (AVX2), each output channel takes as
    many more as its calibrated inputs leave room for (:func:`pair_safe_levels`).
    """

    x_multiplier: torch.Tensor
    x_offset: torch.Tensor
    w_scale: torch.Tensor
    w_zero_point: torch.Tensor
    bias: torch.Tensor | None
    col_offset: torch.Tensor
    col_scale: torch.Tensor

    def __init__(
        self,
        linear: nn.Linear,
        low: torch.Tensor,
        high: torch.Tensor,
        alpha: float = SMOOTH_ALPHA,
        weight_reach: torch.Tensor | None = None,
        weight_levels: int = WEIGHT_LEVELS["vnni"],
        native: ctypes.CDLL | None = None,
        wide_input: bool = False,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        #: The native library computing the GEMM, or None: oneDNN's.
        self.native = native if native is not None and runs_gemm(native, self.in_features, self.out_features) else None
        if wide_input and self.native is None:
            raise ValueError("s16 activations (wide_input=True) run on the native AVX2 GEMM only")
        #: How inputs are coded: u8, or s16 within +-input_limit.
        self.input_dtype = torch.int16 if wide_input else torch.uint8
        self.input_limit = input_limit(self.in_features, wide_input)
        weight = linear.weight.detach().float()
        coding = static_coding(weight, low, high, alpha, weight_reach, weight_levels, wide_input)
        weight, w_scale = coding.weight, coding.w_scale
        self.x_scale, self.x_zero_point = coding.x_scale, coding.x_zero_point
        # x / smooth / x_scale + zero point, as one multiply-add per element
        self.register_buffer("x_multiplier", (1 / (coding.smooth * self.x_scale)).contiguous())
        self.register_buffer("x_offset", torch.tensor(float(self.x_zero_point)))
        int8_weight = torch.round(weight / w_scale[:, None]).clamp(-127, 127).to(torch.int8)
        #: The widths its weight rows take: {8} with VNNI, {7, 8} or one of them on AVX2.
        self.weight_bits = frozenset(int(level).bit_length() + 1 for level in coding.levels.unique())
        if self.native is None:
            self.packed_weight = torch.ops.onednn.qlinear_prepack(int8_weight, None)
        else:
            self.packed_weight = pack_weights(self.native, int8_weight, wide_input)
            # (x - zero point) . w = x . w - zero point x sum(w): the second term per column, added to the s32 sums
            self.register_buffer("col_offset", (-self.x_zero_point * int8_weight.sum(1, dtype=torch.int32)).int())
            self.register_buffer("col_scale", (self.x_scale * w_scale).float())
        self.register_buffer("w_scale", w_scale.contiguous())
        self.register_buffer("w_zero_point", torch.zeros(w_scale.shape, dtype=torch.int64))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().contiguous())
        self.post_op, self.post_op_algorithm = "none", ""
        #: bf16 where only this package's quantizer reads the output (FFN up projections on a native-bf16 CPU); u8
        #: (with ``output_scale`` and ``output_zero_point``) where the int8 attention kernel reads it.
        self.output_dtype = torch.float32
        self.output_scale, self.output_zero_point = 1.0, 0
        #: Coded outputs of the native GEMM: ``round(y * output_multiplier + output_offset)`` per column, clamped to
        #: 0..255 (u8) or to +-output_limit (s16).
        self.output_multiplier: torch.Tensor | None = None
        self.output_offset, self.output_limit = 0.0, 0.0
        #: The native library whose quantizer (``native.quantize_rows``) codes the inputs, where it loaded (set by
        #: ``quantize_static_int8``; it may serve a Linear whose GEMM is oneDNN's).
        self.quantizer_library: ctypes.CDLL | None = None

    def fuse_gelu(self) -> None:
        """Apply the exact (erf) GELU to the output inside the GEMM, instead of as another pass after it."""
        self.post_op, self.post_op_algorithm = "gelu", "none"

    def quantize_output(self, scale: float, zero_point: int) -> None:
        """Write u8 outputs: ``round(y / scale) + zero_point``, clamped to 0..255."""
        self.output_dtype, self.output_scale, self.output_zero_point = torch.uint8, scale, zero_point
        self.output_multiplier, self.output_offset = torch.full((self.out_features,), 1 / scale), float(zero_point)

    def code_output_for(self, reader: StaticInt8Linear) -> bool:
        """Write outputs already coded as ``reader`` codes its inputs (u8 or s16, its smoothing included), so that
        ``reader`` skips quantizing them: one pass less over the widest activation. Only the native GEMM codes per
        column; returns whether this one does."""
        if self.native is None or reader.in_features != self.out_features:
            return False
        self.output_dtype = reader.input_dtype
        self.output_multiplier, self.output_offset = reader.x_multiplier, float(reader.x_zero_point)
        self.output_limit = float(reader.input_limit)
        return True

    def shares_input_scale(self, *others: StaticInt8Linear) -> bool:
        """Whether ``others`` code their input to u8 exactly as this Linear does (so one u8 copy serves all)."""
        return all(
            (o.x_scale, o.x_zero_point) == (self.x_scale, self.x_zero_point)
            and torch.equal(o.x_multiplier, self.x_multiplier)
            for o in others
        )

    def quantize(self, rows: torch.Tensor) -> torch.Tensor:
        """``rows`` (fp32 or bf16, [n, in_features]) coded at this Linear's input scale (u8, or s16)."""
        if self.input_dtype == torch.int16:
            limit = self.input_limit
            return torch.clamp(torch.round(rows.float() * self.x_multiplier), -limit, limit).to(torch.int16)
        if self.quantizer_library is not None:
            return native_quantize_rows(self.quantizer_library, rows, self.x_multiplier, float(self.x_zero_point))
        quantize = compiled_quantizer() if rows.numel() >= COMPILED_QUANTIZE_SIZE else quantize_rows
        return quantize(rows, self.x_multiplier, self.x_offset)

    def native_epilogue(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, bool]:
        """What the native GEMM does to its sums (``native.gemm_s8``'s ``epilogue``)."""
        return self.col_offset, self.col_scale, self.bias, self.post_op == "gelu"

    def native_output(self) -> tuple[torch.dtype, torch.Tensor | None, float, float]:
        """How the native GEMM writes its outputs (``native.gemm_s8``'s ``output``)."""
        return self.output_dtype, self.output_multiplier, self.output_offset, self.output_limit

    def gemm(self, quantized: torch.Tensor) -> torch.Tensor:
        """The int8 GEMM (with its fused post-op) of quantized rows."""
        if self.native is not None:
            return gemm_s8(
                self.native,
                quantized,
                self.packed_weight,
                self.out_features,
                self.native_epilogue(),
                self.native_output(),
            )
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
        out = self.gemm(rows if rows.dtype == self.input_dtype else self.quantize(rows))
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        fused = "" if self.post_op == "none" else f", fused {self.post_op}"
        shape = f"in_features={self.in_features}, out_features={self.out_features}"
        gemm = "oneDNN" if self.native is None else "native"
        inputs = "s16" if self.input_dtype == torch.int16 else "u8"
        return f"{shape}, static {inputs} x s{'/'.join(map(str, sorted(self.weight_bits)))}{fused}, {gemm} GEMM"


class JoinedGemm:
    """The native GEMMs of Linears that read one input coded alike and write coded outputs (attention's query, key
    and value), as one call: their packed weights, column terms and output codes side by side, so the input is read
    once for all of them. Their own packed weights become views of the joined ones (no copy kept)."""

    def __init__(self, linears: Sequence[StaticInt8Linear]) -> None:
        if not self.joinable(linears):
            raise ValueError("only native GEMMs of one input coding, with coded outputs and no post-op, join")
        self.library = cast(ctypes.CDLL, linears[0].native)
        sizes = [linear.packed_weight.numel() for linear in linears]
        self.packed = torch.cat([linear.packed_weight for linear in linears])
        for linear, part in zip(linears, self.packed.split(sizes), strict=True):
            linear.packed_weight = part
        self.out_features = sum(linear.out_features for linear in linears)
        epilogues = [linear.native_epilogue() for linear in linears]
        self.epilogue = (
            torch.cat([offsets for offsets, _, _, _ in epilogues]),
            torch.cat([scales for _, scales, _, _ in epilogues]),
            torch.cat([torch.zeros(lin.out_features) if lin.bias is None else lin.bias for lin in linears]),
            False,
        )
        dtype, _, offset, limit = linears[0].native_output()
        multipliers = torch.cat([cast(torch.Tensor, linear.output_multiplier) for linear in linears])
        self.output = (dtype, multipliers, offset, limit)

    @staticmethod
    def joinable(linears: Sequence[StaticInt8Linear]) -> bool:
        """Whether :class:`JoinedGemm` can join ``linears``."""
        first = linears[0]
        return (
            first.native is not None
            and first.shares_input_scale(*linears[1:])
            and all(
                linear.native is first.native
                and linear.post_op == "none"
                and linear.output_multiplier is not None
                and linear.output_dtype == first.output_dtype
                and (linear.output_offset, linear.output_limit) == (first.output_offset, first.output_limit)
                for linear in linears
            )
        )

    def __call__(self, codes: torch.Tensor) -> torch.Tensor:
        """The joined outputs, side by side ([n, sum of out_features])."""
        return gemm_s8(self.library, codes, self.packed, self.out_features, self.epilogue, self.output)


def input_limit(in_features: int, wide_input: bool) -> int:
    """The largest input code: 255 (u8), or for s16 as many levels as s32 sums of ``in_features`` products allow."""
    return min(32767, S32_LIMIT // (127 * in_features)) if wide_input else 255


@dataclass(frozen=True)
class StaticCoding:
    """How a :class:`StaticInt8Linear` codes its input and weights: ``smooth`` (per input channel; inputs are divided
    by it, ``weight`` columns multiplied), the input's ``x_scale`` and ``x_zero_point`` (0 for s16), and per output
    channel its largest weight code (``levels``) and ``w_scale``."""

    smooth: torch.Tensor
    weight: torch.Tensor
    x_scale: float
    x_zero_point: int
    levels: torch.Tensor
    w_scale: torch.Tensor


def static_coding(
    weight: torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
    alpha: float,
    weight_reach: torch.Tensor | None,
    weight_levels: int,
    wide_input: bool,
) -> StaticCoding:
    """The coding of a Linear of ``weight`` (fp32, [out, in]) whose inputs were calibrated to ``low``..``high`` per
    channel (``StaticInt8Linear``'s arguments): the one place it is decided, for the kernels and their simulation."""
    reach = torch.maximum(low.abs(), high.abs()).clamp(min=1e-5)
    if weight_reach is None:
        weight_reach = weight.abs().amax(0)
    smooth = (reach**alpha / weight_reach.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)
    weight = weight * smooth
    lowest = float(torch.clamp((low / smooth).min(), max=0.0))
    highest = float(torch.clamp((high / smooth).max(), min=0.0))
    if wide_input:
        weight_levels = WEIGHT_LEVELS["vnni"]  # vpmaddwd adds exactly: no pair can saturate
        x_scale, x_zero_point = max(-lowest, highest, 1e-8) / input_limit(weight.shape[1], True), 0
    else:
        x_scale = max(highest - lowest, 1e-8) / 255
        x_zero_point = min(255, round(-lowest / x_scale))
    levels = torch.full((weight.shape[0],), float(weight_levels))
    if weight_levels < WEIGHT_LEVELS["vnni"]:
        codes = (high / smooth / x_scale + x_zero_point).clamp(min=0.0)
        levels = pair_safe_levels(weight, (codes * CODE_HEADROOM).clamp(max=255.0), weight_levels)
    w_scale = weight.abs().amax(1).clamp(min=1e-8) / levels
    return StaticCoding(smooth, weight, x_scale, x_zero_point, levels, w_scale)


def pair_safe_levels(weight: torch.Tensor, codes: torch.Tensor, floor: int) -> torch.Tensor:
    """Per output channel, the largest weight code (``floor`` to 127) at which no pair of input channels (2k, 2k + 1:
    ``vpmaddubsw``'s pairs) with u8 codes up to ``codes`` can sum past :data:`PAIR_SUM_LIMIT`: 8-bit weights where
    the inputs leave room, 7-bit ones where they do not (``floor`` 63 is safe for any input: 2 x 255 x 63 < 32767)."""
    reach = weight.abs() / weight.abs().amax(1, keepdim=True).clamp(min=1e-12)
    products = nn.functional.pad(reach * codes, (0, weight.shape[1] % 2))  # an odd last channel pairs with nothing
    pairs = products.reshape(weight.shape[0], -1, 2).sum(-1).amax(1)
    return (PAIR_SUM_LIMIT / pairs.clamp(min=1e-12)).floor().clamp(min=floor, max=WEIGHT_LEVELS["vnni"])


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


def compiled_quantizer() -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """:func:`quantize_rows` compiled into one pass (eager it is four fp32 passes, half of a long batch's time),
    or eager when torch.compile cannot build here (no C++ compiler) or ``ATEN_CPU_CAPABILITY`` is set (inductor then
    builds vector code against headers without it: on an AVX-512 CPU held to avx2 it failed to build or, for some
    shapes, returned wrong codes); decided once, on first use."""
    if not _compiled and cpu.aten_limit() is not None:
        logger.warning("static int8 quantizes activations eagerly (slower): ATEN_CPU_CAPABILITY=%s", cpu.aten_limit())
        _compiled.append(quantize_rows)
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
