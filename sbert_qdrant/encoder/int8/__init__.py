"""Static int8 for CPUs, behind this one entry point: activation ranges calibrated once on real text, SmoothQuant-
smoothed Linears run as fused u8 x s8 GEMMs (oneDNN's with VNNI; on AVX2 our own, with 7-8-bit weights, see
``cpu.int8_gemm_isa``), and native kernels for AVX512-VNNI or AVX2 + FMA CPUs (int8 attention, activation
quantization, residual add + LayerNorm) built ahead (``sbert-qdrant build-kernels``) or on first use, cached, behind
``SBERT_QDRANT_NATIVE=auto|off``. Dynamic int8 (activations scaled per batch) is the named fallback; ``int8_kernels``
says which of these run a model.

A calibration is a few hundred texts run in fp32 with each quantized Linear's input range recorded per channel.
SmoothQuant (Xiao et al., 2023) moves outlier channels' range from activations into weights: a Linear's input is
divided per channel by ``s = amax_x**alpha / amax_w**(1 - alpha)`` and its weight columns multiplied by ``s``, so one
per-tensor activation scale fits. The ranges are cached per model in the settings' cache folder; the default
model's ship with the package, measured exact-grade per int8 ISA (what ``precision="auto"`` reads).

Modules: ``calibration`` (ranges, measured, cached and shipped), ``plan`` (an encoder's int8: static, static once
calibrated on its first texts, or dynamic), ``linear`` (the int8 and bf16 Linears), ``quantize`` (a
model made int8), ``build`` / ``native`` / ``native_layers`` (the kernels: built, loaded, installed), ``report``
(what runs).
"""

from __future__ import annotations

from .build import build_library
from .calibration import ActivationRanges, checked_calibration, exact_grade_int8
from .native import kernels_folder, native_unsupported
from .plan import Int8Plan
from .quantize import int8_mode, quantize_int8
from .report import int8_kernels

__all__ = [
    "ActivationRanges",
    "Int8Plan",
    "build_library",
    "checked_calibration",
    "exact_grade_int8",
    "int8_kernels",
    "int8_mode",
    "kernels_folder",
    "native_unsupported",
    "quantize_int8",
]
