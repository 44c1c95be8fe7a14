"""BERT sublayers of a static int8 encoder run by the native kernels (``native.py``, AVX512-VNNI).

Self-attention: PyTorch's runs in fp32 on a CPU (its bf16 kernel is no faster without AMX), about a third of a long
batch once the Linears are int8. Here q, k and v leave their GEMMs as u8 (static scales from the calibration), the
kernel computes q.k and softmax(q.k).v with VNNI dot products and writes the context already quantized for the output
projection. Sublayer outputs: the residual add and LayerNorm in one pass. Where the kernels cannot run, PyTorch's
modules stay.
"""

from __future__ import annotations

import ctypes

import torch
from torch import nn

from .linear import SHARED_INPUT, Bf16Linear, JoinedGemm, StaticInt8Linear
from .native import add_layer_norm, split

#: q, k and v are stored as u8 = value / scale + 128 (symmetric), so the kernel can read them as s8 by flipping a bit.
ZERO_POINT = 128
#: The head sizes the kernel runs: multiples of 16 up to 256 (``sbq_int8_attention`` refuses others).
HEAD_SIZES = "a multiple of 16 up to 256"


def kernel_head_size(head_size: int) -> bool:
    """Whether the kernel runs heads of ``head_size`` columns (:data:`HEAD_SIZES`)."""
    return head_size % 16 == 0 and 0 < head_size <= 256


def key_validity(attention_mask: torch.Tensor | None, batch: int, length: int) -> torch.Tensor:
    """u8 [batch, length]: 1 for keys attention may read, from a padding mask as transformers passes it (None,
    [batch, length], or [batch, 1, queries, length], boolean or additive)."""
    if attention_mask is None:
        return torch.ones(batch, length, dtype=torch.uint8)
    mask = attention_mask
    if mask.dim() == 4:
        mask = mask[:, 0, 0, :]  # a padding mask: every query row has the same keys; row 0 is a real token
    if mask.dim() != 2 or mask.shape[-1] != length:
        raise ValueError(f"int8 attention reads padding masks only, got one of shape {tuple(attention_mask.shape)}")
    valid = mask if mask.dtype == torch.bool else (mask == 0 if mask.is_floating_point() else mask != 0)
    return valid.expand(batch, length).to(torch.uint8).contiguous()


class StaticInt8SelfAttention(nn.Module):
    """A BERT-style self-attention (``query``/``key``/``value`` Linears, bidirectional, padding mask) in int8: one
    u8 copy of the input for the three GEMMs (they share its smoothing and scale; one joined GEMM where they are the
    native ones), u8 q/k/v, the VNNI kernel of
    ``library``, and the context returned as u8 at ``output``'s own input scale (its Linear reads u8 as already
    coded)."""

    def __init__(
        self,
        library: ctypes.CDLL,
        query: StaticInt8Linear,
        key: StaticInt8Linear,
        value: StaticInt8Linear,
        heads: int,
        output: StaticInt8Linear,
        reach: tuple[float, float, float],
    ) -> None:
        super().__init__()
        self.library = library
        self.query, self.key, self.value, self.heads = query, key, value, heads
        self.head_size = query.out_features // heads
        scales = [max(r, 1e-8) / 127 for r in reach]
        for linear, scale in zip((query, key, value), scales, strict=True):
            linear.quantize_output(scale, ZERO_POINT)
        self.qk_scale = scales[0] * scales[1] * self.head_size**-0.5
        self.v_scale = scales[2]
        self.out_multiplier, self.out_offset = output.x_multiplier, float(output.x_zero_point)
        linears = (query, key, value)
        #: q, k and v in one GEMM where theirs are the native ones (the kernel reads them side by side).
        self.joined = JoinedGemm(linears) if JoinedGemm.joinable(linears) else None

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: object
    ) -> tuple[torch.Tensor, None]:
        batch, length, width = hidden_states.shape
        x = self.query.quantize(hidden_states.reshape(-1, width))
        if self.joined is not None:
            q, k, v = self.joined(x).split(self.query.out_features, dim=1)
        else:
            q, k, v = (linear.gemm(x) for linear in (self.query, self.key, self.value))
        valid = key_validity(attention_mask, batch, length)
        out = torch.empty(batch * length, self.query.out_features, dtype=torch.uint8)
        library = self.library

        def run(start: int, stop: int) -> int:
            return int(
                library.sbq_int8_attention(
                    q.data_ptr(), k.data_ptr(), v.data_ptr(), q.stride(0), valid.data_ptr(),
                    batch, length, self.heads, self.head_size, self.qk_scale, self.v_scale,
                    self.out_multiplier.data_ptr(), self.out_offset, out.data_ptr(), out.shape[1], start, stop,
                )
            )  # fmt: skip

        if any(split(run, batch * self.heads, out.numel())):
            raise ValueError(f"int8 attention cannot run head size {self.head_size} ({HEAD_SIZES})")
        return out.view(batch, length, -1), None


def install_int8_attention(model: nn.Module, output_reach: dict[str, float], library: ctypes.CDLL) -> int:
    """Swap each bidirectional BERT-style self-attention whose Linears are static int8 (the output projection with u8
    inputs; q/k/v output ranges calibrated, ``output_reach`` by Linear name) for a
    :class:`StaticInt8SelfAttention` run by ``library``, in place; returns how many were swapped."""
    swapped = 0
    for name, module in list(model.named_modules()):
        attention, output = getattr(module, "self", None), getattr(getattr(module, "output", None), "dense", None)
        config = getattr(attention, "config", None)
        heads = getattr(attention, "num_attention_heads", None)
        linears = [getattr(attention, part, None) for part in SHARED_INPUT]
        names = [f"{name}.self.{part}" for part in SHARED_INPUT]
        quantized = [linear for linear in linears if isinstance(linear, StaticInt8Linear)]
        if (
            len(quantized) != len(SHARED_INPUT)
            or not isinstance(output, StaticInt8Linear)
            or output.input_dtype != torch.uint8  # kept s16: it reads no u8 context
            or not isinstance(heads, int)
            or config is None
            or getattr(config, "is_decoder", False)
            or not all(n in output_reach for n in names)
        ):
            continue
        query, key, value = quantized
        head_size, rest = divmod(query.out_features, heads)
        if rest or not kernel_head_size(head_size) or not query.shares_input_scale(key, value):
            continue
        reach = (output_reach[names[0]], output_reach[names[1]], output_reach[names[2]])
        module.self = StaticInt8SelfAttention(library, query, key, value, heads, output, reach)
        swapped += 1
    return swapped


class ResidualLayerNorm(nn.Module):
    """A BERT-style sublayer output (``LayerNorm(dense(x) + residual)``, dropout off at inference) whose add and
    LayerNorm run as one native pass of ``library``."""

    def __init__(self, library: ctypes.CDLL, dense: nn.Module, norm: nn.LayerNorm) -> None:
        super().__init__()
        self.library, self.dense, self.LayerNorm = library, dense, norm

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        return add_layer_norm(self.library, self.dense(hidden_states), input_tensor, self.LayerNorm)


def install_residual_layer_norms(model: nn.Module, library: ctypes.CDLL) -> int:
    """Swap each BERT-style sublayer output (exactly ``dense``, ``LayerNorm`` and ``dropout``, its dense quantized
    or bf16) for a :class:`ResidualLayerNorm` run by ``library``, in place; returns how many were swapped."""
    swapped = 0
    for name, module in list(model.named_modules()):
        children = dict(module.named_children())
        norm = children.get("LayerNorm")
        if (
            set(children) == {"dense", "LayerNorm", "dropout"}
            and isinstance(children["dense"], StaticInt8Linear | Bf16Linear)
            and isinstance(norm, nn.LayerNorm)
            and norm.elementwise_affine
            and norm.bias is not None
            and len(norm.normalized_shape) == 1
            and norm.weight.dtype == torch.float32
        ):
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, ResidualLayerNorm(library, children["dense"], norm))
            swapped += 1
    return swapped
