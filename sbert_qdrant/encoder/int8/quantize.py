"""Turning a transformer's Linears int8 in place: static (calibrated activation ranges, SmoothQuant-smoothed, the
native kernels where they run) or dynamic (activations scaled per batch: the fallback), and telling which one runs.

Where the drift comes from (all-MiniLM-L6-v2, one Linear type quantized at a time, 2,000 STS-B train and Quora
sentences): q/k/v, attention output and FFN input each keep cosine to fp32 >= 0.9992; the FFN output (down
projection, fed by GELU, with channels reaching 10-25) alone drops it to 0.964 and STS-B dev by 0.33. So the down
projections smooth harder (``DOWN_PROJECTION_ALPHA``) and the first layer's, the one with the largest outliers, stays
in bf16 (fp32 without native bf16): min cosine 0.991, STS-B dev 86.70 (fp32 86.72). Where the native AVX2 GEMM runs,
it runs there with s16 activations instead (13 bits: STS-B dev loss 0.030, SICK 0.014 on an AVX2 EPYC; u8 ones
there: 0.060 and 0.041), at about 1.7x fp32's speed.
"""

from __future__ import annotations

import ctypes
import re
import warnings
from typing import Literal

import torch
from torch import nn

from .. import cpu
from .calibration import ActivationRanges, quantized_layer_names
from .linear import SHARED_INPUT, SMOOTH_ALPHA, WEIGHT_LEVELS, Bf16Linear, StaticInt8Linear, compiled_quantizer
from .native import library_isa, load_library, native_library, runs_gemm
from .native_layers import install_int8_attention, install_residual_layer_norms

#: The FFN down projection's alpha: its GELU input has outlier channels ~5x the rest, so more of the range moves
#: into the weights (alpha 0.3: min cosine 0.64; 0.5: 0.964; 0.65: 0.988; 0.75: 0.991; 0.85: 0.992).
DOWN_PROJECTION_ALPHA = 0.75
#: The numbered block path of a transformer layer: ``encoder.layer.0.`` (BERT, MPNet), ``transformer.layer.0.``.
_LAYER_INDEX = re.compile(r"\.(\d+)\.")


def quantize_int8(model: nn.Module, ranges: ActivationRanges | None) -> nn.Module:
    """``model`` in int8, in place: static with calibrated ``ranges``, else dynamic."""
    return quantize_dynamic_int8(model) if ranges is None else quantize_static_int8(model, ranges)


def int8_mode(model: nn.Module) -> Literal["static", "dynamic"] | None:
    """ "static" or "dynamic" for an int8-quantized transformer, None for one that is not."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    if any(isinstance(m, StaticInt8Linear) for m in model.modules()):
        return "static"
    return "dynamic" if any(isinstance(m, DynamicInt8Linear) for m in model.modules()) else None


def int8_layer_names(model: nn.Module) -> list[str]:
    """The Linear layers dynamic int8 quantizes: all but those of the first transformer layer.

    The first layer works on raw word embeddings; keeping it in fp32 halves the STS-B loss of int8
    (measured on STS-B train with all-MiniLM-L6-v2: -0.44 -> -0.19 Spearman) for 1/N of the speed-up.
    """
    linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    indexed = {name: int(m.group(1)) for name in linears if (m := _LAYER_INDEX.search(name))}
    first = min(indexed.values(), default=None)
    return [name for name in linears if indexed.get(name) != first]


def quantize_dynamic_int8(model: nn.Module) -> nn.Module:
    """Dynamic int8 (activations scaled per batch; the fallback of static int8) of all but the first layer."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    chosen = dict.fromkeys(int8_layer_names(model), per_channel_dynamic_qconfig)
    with warnings.catch_warnings():  # torch.ao announces its move to torchao; the API still works
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, chosen, dtype=torch.qint8, inplace=True)


def _block_index(name: str) -> int:
    return next(int(part) for part in name.split(".") if part.isdigit())


def is_down_projection(linear: nn.Linear) -> bool:
    """Whether a transformer layer's Linear is its FFN output (intermediate size down to hidden size)."""
    return linear.in_features > linear.out_features


def kept_layer_names(model: nn.Module) -> list[str]:
    """Calibrated Linears kept out of u8 activations (in bf16/fp32, or s16 x s8 on the native AVX2 GEMM): the first
    transformer layer's FFN output, whose GELU input has the widest outliers (quantized alone it costs more cosine
    than all other down projections together)."""
    names = quantized_layer_names(model)
    first = min((_block_index(name) for name in names), default=None)
    return [
        name
        for name in names
        if _block_index(name) == first and is_down_projection(model.get_submodule(name))  # type: ignore[arg-type]
    ]


def quantize_static_int8(model: nn.Module, ranges: ActivationRanges) -> nn.Module:
    """Swap every calibrated Linear of ``model`` for a :class:`StaticInt8Linear` (the kept ones, see
    :func:`kept_layer_names`, for a :class:`Bf16Linear` on a CPU with native bf16, else for one with s16 inputs
    where the native AVX2 GEMM runs them, else left fp32), and each
    BERT-style self-attention for the int8 one, in place. Where the native kernels run (``native.py``) they quantize
    activations and compute attention (and, on AVX2, the GEMMs); elsewhere PyTorch does."""
    kept = set(kept_layer_names(model) if ranges.kept is None else ranges.kept)
    bf16 = cpu.native_bf16()
    library = native_library()
    if library is None:
        compiled_quantizer()  # built here, once, rather than by parallel batches
    names = quantized_layer_names(model)
    weight_reach = shared_weight_reach(model, names)
    levels = WEIGHT_LEVELS[cpu.int8_gemm_isa()[0]]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        linear = getattr(parent, child)
        reach = weight_reach.get(parent_name)
        if name in kept:  # s16 inputs smooth at SMOOTH_ALPHA: their 13 bits hold the GELU's outliers unaided
            # attention's q, k and v go s16 where a native GEMM runs them, so the int8 attention kernel still reads
            # their u8 outputs (bf16 ones would need PyTorch's attention)
            # (the AVX2 build is looked for only where it may serve: a bf16 CPU keeps its other kept Linears bf16)
            wide = _wide_library(library) if not bf16 or child in SHARED_INPUT else None
            if wide is not None and runs_gemm(wide, linear.in_features, linear.out_features):
                low, high, alpha = ranges.low[name], ranges.high[name], ranges.alphas.get(name, SMOOTH_ALPHA)
                setattr(parent, child, StaticInt8Linear(linear, low, high, alpha, reach, native=wide, wide_input=True))
            elif bf16:
                setattr(parent, child, Bf16Linear(linear))
            continue
        alpha = ranges.alphas.get(name, DOWN_PROJECTION_ALPHA if is_down_projection(linear) else SMOOTH_ALPHA)
        quantized = StaticInt8Linear(linear, ranges.low[name], ranges.high[name], alpha, reach, levels, library)
        if library is not None:
            quantized.quantizer_library = library
        setattr(parent, child, quantized)
    _fuse_gelus(model, bf16)
    _code_intermediates(model)
    if library is not None:
        install_int8_attention(model, ranges.output_reach, library)
        install_residual_layer_norms(model, library)
    return model


def _wide_library(library: ctypes.CDLL | None) -> ctypes.CDLL | None:
    """The kernels whose GEMM runs s16 x s8 (their AVX2 build): this CPU's own, or beside the AVX512-VNNI ones where
    the CPU also runs AVX2 with FMA (for the Linears kept out of u8 that oneDNN cannot run in s16); None without."""
    if library is None or library_isa(library) == "avx2":
        return library
    if not (cpu.has("avx2") and cpu.has("fma3")):
        return None
    return load_library("avx2")[0]


def shared_weight_reach(model: nn.Module, names: list[str]) -> dict[str, torch.Tensor]:
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
            if bf16 and dense.native is None:  # our GEMM writes fp32 or codes
                dense.output_dtype = torch.bfloat16
            module.intermediate_act_fn = nn.Identity()


def _code_intermediates(model: nn.Module) -> None:
    """Have each FFN's up projection write its output (GELU'd) as u8 already coded for the down projection that
    reads it (Hugging Face BERT-style blocks: ``intermediate.dense`` read only by ``output.dense``, the activation
    fused or none), where both are int8 and the up projection's GEMM codes per column (the native one)."""
    for module in model.modules():
        intermediate = getattr(module, "intermediate", None)
        up = getattr(intermediate, "dense", None)
        down = getattr(getattr(module, "output", None), "dense", None)
        direct = isinstance(getattr(intermediate, "intermediate_act_fn", None), nn.Identity)
        if direct and isinstance(up, StaticInt8Linear) and isinstance(down, StaticInt8Linear):
            up.code_output_for(down)
