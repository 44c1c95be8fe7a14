"""Int8 self-attention for static int8 encoders on AVX512-VNNI CPUs.

PyTorch's attention on a CPU runs in fp32 (its bf16 kernel is no faster without AMX): about a third of a long batch
once the Linears are int8. Here q, k and v leave their GEMMs as u8 (static scales from the calibration), a small C++
kernel (``kernels/int8_attention.cpp``) computes q.k and softmax(q.k).v with VNNI dot products, and writes the context
already quantized for the output projection. The kernel is built on first use with the system's C++ compiler and
cached beside the calibrations; without a compiler or AVX512-VNNI, attention stays PyTorch's (logged, once).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch import nn

from .static_int8 import StaticInt8Linear, cache_folder

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("kernels") / "int8_attention.cpp"
_FLAGS = ("-O3", "-shared", "-fPIC", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma")
#: q, k and v are stored as u8 = value / scale + 128 (symmetric), so the kernel can read them as s8 by flipping a bit.
ZERO_POINT = 128
_kernel: list[ctypes._CFuncPtr | None] = []
_pool: list[ThreadPoolExecutor] = []


def int8_attention_unsupported() -> str | None:
    """Why attention stays PyTorch's on this machine (None: the int8 kernel may run)."""
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    if not capabilities.get("avx512_vnni"):
        return "the CPU has no AVX512-VNNI"
    aten = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if aten in ("default", "avx2"):
        return f"ATEN_CPU_CAPABILITY={aten} keeps PyTorch off AVX-512"
    if _compiler() is None:
        return "no C++ compiler (c++, g++ or $CXX) to build its kernel"
    return None


def _compiler() -> str | None:
    candidates = [os.environ.get("CXX"), "c++", "g++", "clang++"]
    return next((found for name in candidates if name and (found := shutil.which(name))), None)


def _build() -> Path:
    """The kernel's shared library, compiled once per source and flags into the cache folder."""
    source = SOURCE.read_bytes()
    digest = hashlib.blake2b(source + " ".join(_FLAGS).encode(), digest_size=8).hexdigest()
    library = cache_folder() / "kernels" / f"int8_attention-{digest}.so"
    if library.is_file():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    compiler = _compiler()
    assert compiler is not None  # checked by int8_attention_unsupported
    with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
        built = Path(scratch) / library.name
        subprocess.run([compiler, *_FLAGS, "-o", str(built), str(SOURCE)], check=True, capture_output=True, text=True)
        os.replace(built, library)  # atomic: a parallel build of the same source writes the same bytes
    return library


def attention_kernel() -> ctypes._CFuncPtr | None:
    """The loaded kernel, or None (reason logged once) where it cannot run; decided on first use."""
    if not _kernel:
        reason = int8_attention_unsupported()
        function = None
        if reason is None:
            try:
                function = ctypes.CDLL(str(_build())).sbq_int8_attention
            except (OSError, subprocess.CalledProcessError) as exc:
                detail = getattr(exc, "stderr", "") or exc
                reason = f"its kernel did not build: {str(detail).strip()[:500]}"
        if function is None:
            logger.warning("static int8 keeps PyTorch's fp32 attention: %s.", reason)
        else:
            p, i, f = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
            function.restype = ctypes.c_int
            function.argtypes = [p, p, p, i, p, i, i, i, i, f, f, p, f, p, i, i, i]
        _kernel.append(function)
    return _kernel[0]


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
    quantization of the input for the three GEMMs (they share its smoothing), u8 q/k/v, the VNNI kernel, and the
    context returned as u8 in ``output``'s own quantization (its Linear reads u8 as already quantized)."""

    def __init__(
        self,
        query: StaticInt8Linear,
        key: StaticInt8Linear,
        value: StaticInt8Linear,
        heads: int,
        output: StaticInt8Linear,
        reach: tuple[float, float, float],
    ) -> None:
        super().__init__()
        self.query, self.key, self.value, self.heads = query, key, value, heads
        self.head_size = query.out_features // heads
        scales = [max(r, 1e-8) / 127 for r in reach]
        for linear, scale in zip((query, key, value), scales, strict=True):
            linear.quantize_output(scale, ZERO_POINT)
        self.qk_scale = scales[0] * scales[1] * self.head_size**-0.5
        self.v_scale = scales[2]
        self.out_multiplier, self.out_offset = output.x_multiplier, float(output.x_zero_point)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: object
    ) -> tuple[torch.Tensor, None]:
        batch, length, width = hidden_states.shape
        x = self.query.quantize(hidden_states.reshape(-1, width))
        q, k, v = (linear.gemm(x) for linear in (self.query, self.key, self.value))
        valid = key_validity(attention_mask, batch, length)
        out = torch.empty(batch * length, self.query.out_features, dtype=torch.uint8)
        kernel = attention_kernel()
        assert kernel is not None  # only installed where it loaded

        def run(start: int, stop: int) -> int:
            return int(
                kernel(
                    q.data_ptr(), k.data_ptr(), v.data_ptr(), q.shape[1], valid.data_ptr(),
                    batch, length, self.heads, self.head_size, self.qk_scale, self.v_scale,
                    self.out_multiplier.data_ptr(), self.out_offset, out.data_ptr(), out.shape[1], start, stop,
                )
            )  # fmt: skip

        pairs, threads = batch * self.heads, torch.get_num_threads()
        if threads == 1 or pairs < 2:
            codes = [run(0, pairs)]
        else:  # ctypes releases the GIL: the (batch, head) pairs split over torch's share of threads
            if not _pool:
                _pool.append(ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="sbert-qdrant-attention"))
            bounds = [pairs * part // threads for part in range(threads + 1)]
            codes = list(_pool[0].map(run, bounds[:-1], bounds[1:]))
        if any(codes):
            raise ValueError(f"int8 attention cannot run head size {self.head_size} (a multiple of 16 up to 256)")
        return out.view(batch, length, -1), None


def install_int8_attention(model: nn.Module, output_reach: dict[str, float]) -> int:
    """Swap each bidirectional BERT-style self-attention whose Linears are static int8 (and whose q/k/v output
    ranges were calibrated, ``output_reach`` by Linear name) for a :class:`StaticInt8SelfAttention`, in place, where
    the kernel runs here; returns how many were swapped."""
    if attention_kernel() is None:
        return 0
    swapped = 0
    for name, module in list(model.named_modules()):
        attention, output = getattr(module, "self", None), getattr(getattr(module, "output", None), "dense", None)
        linears = [getattr(attention, part, None) for part in ("query", "key", "value")]
        config = getattr(attention, "config", None)
        heads = getattr(attention, "num_attention_heads", None)
        names = [f"{name}.self.{part}" for part in ("query", "key", "value")]
        if not (
            all(isinstance(linear, StaticInt8Linear) for linear in [*linears, output])
            and isinstance(heads, int)
            and config is not None
            and not getattr(config, "is_decoder", False)
            and all(n in output_reach for n in names)
            and linears[0].out_features % heads == 0  # type: ignore[union-attr]
            and (linears[0].out_features // heads) % 16 == 0  # type: ignore[union-attr]
            and linears[0].shares_quantization(*linears[1:])  # type: ignore[union-attr]
        ):
            continue
        reach = tuple(output_reach[n] for n in names)
        module.self = StaticInt8SelfAttention(*linears, heads, output, reach)  # type: ignore[arg-type, misc]
        swapped += 1
    return swapped
