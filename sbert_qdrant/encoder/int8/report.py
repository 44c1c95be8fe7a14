"""What runs an int8 model, in one line: static or dynamic, the GEMMs' library, instruction set and weight bits, and
who computes attention, the activation quantizer and the residual add + LayerNorm (a native kernel and its
instruction set, or PyTorch). Benchmarks print it beside their figures."""

from __future__ import annotations

import torch
from torch import nn

from ...types import KernelIsa
from .. import cpu
from .linear import StaticInt8Linear
from .native import library_isa
from .native_layers import ResidualLayerNorm, StaticInt8SelfAttention
from .quantize import int8_mode


def int8_kernels(model: nn.Module) -> str:
    """What runs ``model`` (an encoder or its transformer), e.g. ``static int8 | GEMM: native avx2, u8 x s7/8 |
    attention: native avx2 | quantizer: native avx2 | add+LayerNorm: native avx2`` (``u8/s16 x s8`` where a kept
    Linear reads s16, ``GEMM: oneDNN avx512_vnni`` where oneDNN's run); ``dynamic int8 | GEMM: fbgemm
    avx512_vnni, u8 x s8 per batch | attention: PyTorch | ...``; ``not int8`` for a model that is not."""
    mode = int8_mode(model)
    if mode is None:
        return "not int8"
    modules = list(model.modules())
    if mode == "dynamic":
        gemm = f"fbgemm {cpu.fbgemm_isa()}, u8 x s8 per batch"
        return f"dynamic int8 | GEMM: {gemm} | attention: PyTorch | quantizer: PyTorch | add+LayerNorm: PyTorch"
    linears = [m for m in modules if isinstance(m, StaticInt8Linear)]
    bits = "/".join(str(b) for b in sorted(frozenset[int]().union(*(m.weight_bits for m in linears))))
    quantizers = {library_isa(m.quantizer_library) for m in linears if m.quantizer_library is not None}
    native = {library_isa(m.native) for m in linears if m.native is not None}
    gemm = _who(native) if native else f"oneDNN {cpu.int8_gemm_isa()[0]}"
    inputs = "u8/s16" if any(m.input_dtype == torch.int16 for m in linears) else "u8"
    parts = {
        "GEMM": f"{gemm}, {inputs} x s{bits}",
        "attention": _who({library_isa(m.library) for m in modules if isinstance(m, StaticInt8SelfAttention)}),
        "quantizer": _who(quantizers),
        "add+LayerNorm": _who({library_isa(m.library) for m in modules if isinstance(m, ResidualLayerNorm)}),
    }
    return " | ".join(["static int8", *(f"{name}: {who}" for name, who in parts.items())])


def _who(isas: set[KernelIsa | None]) -> str:
    """``native <isa>`` for the kernels' instruction set(s), else PyTorch."""
    named = sorted(isa for isa in isas if isa is not None)
    return f"native {'/'.join(named)}" if named else "PyTorch"
