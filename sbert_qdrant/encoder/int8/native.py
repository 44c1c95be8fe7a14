"""The int8 kernels (int8 attention, activation quantization, residual add + LayerNorm; on AVX2 also the u8 x s8
GEMM, faster there than oneDNN's) of the instruction set this CPU runs (``cpu.kernel_isa``: ``kernels/int8.cpp`` on
AVX512-VNNI, ``kernels/int8_avx2.cpp`` on AVX2 + FMA or where ``ATEN_CPU_CAPABILITY=avx2`` asks for AVX2), loaded
from the library ``build.py`` keeps in the cache folder and called through ctypes (which releases the GIL, so a call
can be split over threads). Where they are not used (``SBERT_QDRANT_NATIVE=off``, neither instruction set, no
library and no compiler, a failed build) callers keep their PyTorch paths (and oneDNN's GEMM) and the reason is
logged.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ...errors import UnsupportedError
from ...settings import Settings
from ...types import KernelIsa
from .. import cpu
from .build import build_library

logger = logging.getLogger(__name__)

#: Below this many values a call runs on one thread (splitting costs more than it saves).
SPLIT_SIZE = 1 << 16
#: The library of each kernels folder and instruction set (or why none), decided on first use.
_loaded: dict[tuple[Path, KernelIsa], tuple[ctypes.CDLL | None, str]] = {}
_pool: list[ThreadPoolExecutor] = []
_once = threading.Lock()  # parallel encode streams may ask for the library or the pool first


def kernels_folder(settings: Settings | None = None) -> Path:
    """Where the kernels' library is kept: ``kernels/`` in the settings' cache folder."""
    return (settings or Settings()).cache / "kernels"


def native_unsupported(settings: Settings | None = None) -> str | None:
    """Why the int8 kernels are not used here, before any build (None: they may be)."""
    if (settings or Settings()).native == "off":
        return "SBERT_QDRANT_NATIVE=off"
    isa, reason = cpu.kernel_isa()
    return reason if isa is None else None


def native_library() -> ctypes.CDLL | None:
    """The loaded kernels of this CPU's instruction set, or None with the reason logged (at INFO when switched off,
    else as a warning)."""
    settings = Settings()
    reason = native_unsupported(settings)
    isa = cpu.kernel_isa()[0]
    if reason is None and isa is not None:
        library, reason = load_library(isa, kernels_folder(settings))
        if library is not None:
            return library
    level = logging.INFO if settings.native == "off" else logging.WARNING
    logger.log(level, "static int8 runs without its int8 kernels (PyTorch's attention and quantizer): %s.", reason)
    return None


def load_library(isa: KernelIsa, folder: Path | None = None) -> tuple[ctypes.CDLL | None, str]:
    """The ``isa`` kernels from ``folder`` (default: :func:`kernels_folder`), built there if need be, loaded once per
    process; or None and why. Any x86-64 CPU with the instruction set runs them, whatever :func:`native_library`
    would choose (tests run the AVX2 build on AVX-512 CPUs)."""
    key = (folder or kernels_folder(), isa)
    with _once:
        if key not in _loaded:
            _loaded[key] = _load(*key)
        return _loaded[key]


def library_isa(library: ctypes.CDLL) -> KernelIsa | None:
    """The instruction set of a library :func:`load_library` loaded (None: not one of them)."""
    return next((isa for (_, isa), (loaded, _) in _loaded.items() if loaded is library), None)


def _load(folder: Path, isa: KernelIsa) -> tuple[ctypes.CDLL | None, str]:
    try:
        library = ctypes.CDLL(str(build_library(folder, isa=isa)))
    except (UnsupportedError, OSError) as exc:
        return None, str(exc)
    p, i, f = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    library.sbq_int8_attention.restype = ctypes.c_int
    library.sbq_int8_attention.argtypes = [p, p, p, i, p, i, i, i, i, f, f, p, f, p, i, i, i]
    library.sbq_quantize_rows.restype = None
    library.sbq_quantize_rows.argtypes = [p, i, i, p, f, p, i, i]
    library.sbq_add_layer_norm.restype = None
    library.sbq_add_layer_norm.argtypes = [p, p, p, p, f, p, i, i, i]
    if isa == "avx2":
        for pack in (library.sbq_pack_u8s8_weights, library.sbq_pack_s16s8_weights):
            pack.restype, pack.argtypes = None, [p, i, i, p]
        library.sbq_gemm_s8.restype = None
        library.sbq_gemm_s8.argtypes = [p, i, i, p, i, i, p, p, p, i, i, p, f, f, p, i, i, i]
    return library, ""


def split(run: Callable[[int, int], int | None], items: int, values: int) -> list[int | None]:
    """``run(start, stop)`` over ``items`` (of ``values`` values in all), split over torch's share of threads."""
    threads = torch.get_num_threads()
    if threads == 1 or items < 2 or values < SPLIT_SIZE:
        return [run(0, items)]
    with _once:
        if not _pool:
            _pool.append(ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="sbert-qdrant-int8"))
    bounds = [items * part // threads for part in range(threads + 1)]
    return list(_pool[0].map(run, bounds[:-1], bounds[1:]))


def quantize_rows(library: ctypes.CDLL, rows: torch.Tensor, multiplier: torch.Tensor, offset: float) -> torch.Tensor:
    """``rows`` (fp32 or bf16, [n, width]) as u8 ``clamp(round(rows * multiplier + offset))`` by the kernel."""
    rows = rows.contiguous()
    out = torch.empty(rows.shape, dtype=torch.uint8)
    width, bf16 = rows.shape[1], int(rows.dtype == torch.bfloat16)

    def run(start: int, stop: int) -> None:
        library.sbq_quantize_rows(
            rows.data_ptr(), bf16, width, multiplier.data_ptr(), offset, out.data_ptr(), start, stop
        )

    split(run, rows.shape[0], rows.numel())
    return out


def add_layer_norm(library: ctypes.CDLL, a: torch.Tensor, b: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """``norm(a + b)`` (fp32, normalized over the last dimension) by the kernel, in one pass over memory."""
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    width = a.shape[-1]

    def run(start: int, stop: int) -> None:
        library.sbq_add_layer_norm(
            a.data_ptr(), b.data_ptr(), norm.weight.data_ptr(), norm.bias.data_ptr(), norm.eps, out.data_ptr(),
            width, start, stop,
        )  # fmt: skip

    split(run, a.numel() // width, a.numel())
    return out


def runs_gemm(library: ctypes.CDLL, in_features: int, out_features: int) -> bool:
    """Whether ``library`` computes the int8 GEMM of a Linear of this shape: its AVX2 build does (VNNI CPUs keep
    oneDNN's, as fast there), for output features a multiple of 16 and input features of 4."""
    return library_isa(library) == "avx2" and out_features % 16 == 0 and in_features % 4 == 0


def pack_weights(library: ctypes.CDLL, weight: torch.Tensor, wide: bool) -> torch.Tensor:
    """s8 weights ([out_features, in_features]) in the layout of :func:`gemm_s8` for u8 inputs, or for s16 ones
    (``wide``: held as s16)."""
    weight = weight.contiguous()
    packed = torch.empty(weight.numel(), dtype=torch.int16 if wide else torch.int8)
    pack = library.sbq_pack_s16s8_weights if wide else library.sbq_pack_u8s8_weights
    pack(weight.data_ptr(), weight.shape[0], weight.shape[1], packed.data_ptr())
    return packed


#: The kernel's output kinds (``GemmOutput`` in int8_avx2.cpp).
_OUTPUT_KINDS = {torch.float32: 0, torch.uint8: 1, torch.int16: 2}


def gemm_s8(
    library: ctypes.CDLL,
    rows: torch.Tensor,
    packed: torch.Tensor,
    out_features: int,
    epilogue: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, bool],
    output: tuple[torch.dtype, torch.Tensor | None, float, float],
) -> torch.Tensor:
    """``rows`` (u8, or s16 for weights packed ``wide``; [n, in_features]) times weights packed by
    :func:`pack_weights`, through ``epilogue`` (column offsets, column scales, bias or None, GELU):
    ``y = (rows . w + offset) * scale + bias``, GELU'd if asked; written as ``output`` (dtype, per-column multiplier,
    offset, limit) says: fp32 ``y``; u8 ``clamp(round(y * multiplier + offset), 0, 255)``; s16
    ``clamp(round(y * multiplier), -limit, limit)``."""
    rows = rows.contiguous()
    col_offset, col_scale, bias, gelu = epilogue
    dtype, multiplier, offset, limit = output
    out = torch.empty(rows.shape[0], out_features, dtype=dtype)
    width, wide = rows.shape[1], int(rows.dtype == torch.int16)

    def run(start: int, stop: int) -> None:
        library.sbq_gemm_s8(
            rows.data_ptr(), wide, width, packed.data_ptr(), out_features, width, col_offset.data_ptr(),
            col_scale.data_ptr(), None if bias is None else bias.data_ptr(), int(gelu), _OUTPUT_KINDS[dtype],
            None if multiplier is None else multiplier.data_ptr(), offset, limit, out.data_ptr(), out_features,
            start, stop,
        )  # fmt: skip

    split(run, rows.shape[0], out.numel())
    return out
