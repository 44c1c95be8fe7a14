"""The int8 kernels of ``kernels/int8.cpp`` (int8 attention, activation quantization, residual add + LayerNorm),
built on first use with the system's C++ compiler, cached beside the calibrations, and called through ctypes (which
releases the GIL, so a call can be split over threads). Where they cannot run (no AVX512-VNNI, no compiler, a failed
build) the reason is logged once and callers keep their PyTorch paths.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .static_int8 import cache_folder

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("kernels") / "int8.cpp"
_FLAGS = ("-O3", "-shared", "-fPIC", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma")
#: Below this many values a call runs on one thread (splitting costs more than it saves).
SPLIT_SIZE = 1 << 16
_library: list[ctypes.CDLL | None] = []
_pool: list[ThreadPoolExecutor] = []
_once = threading.Lock()  # parallel encode streams may ask for the library or the pool first


def native_unsupported() -> str | None:
    """Why the int8 kernels cannot run on this machine (None: they may)."""
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    if not capabilities.get("avx512_vnni"):
        return "the CPU has no AVX512-VNNI"
    aten = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if aten in ("default", "avx2"):
        return f"ATEN_CPU_CAPABILITY={aten} keeps PyTorch off AVX-512"
    if _compiler() is None:
        return "no C++ compiler (c++, g++, clang++ or $CXX) to build them"
    return None


def _compiler() -> str | None:
    candidates = [os.environ.get("CXX"), "c++", "g++", "clang++"]
    return next((found for name in candidates if name and (found := shutil.which(name))), None)


def _build() -> Path:
    """The kernels' shared library, compiled once per source and flags into the cache folder."""
    source = SOURCE.read_bytes()
    digest = hashlib.blake2b(source + " ".join(_FLAGS).encode(), digest_size=8).hexdigest()
    library = cache_folder() / "kernels" / f"int8-{digest}.so"
    if library.is_file():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    compiler = _compiler()
    assert compiler is not None  # checked by native_unsupported
    with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
        built = Path(scratch) / library.name
        subprocess.run([compiler, *_FLAGS, "-o", str(built), str(SOURCE)], check=True, capture_output=True, text=True)
        os.replace(built, library)  # atomic: a parallel build of the same source writes the same bytes
    return library


def native_library() -> ctypes.CDLL | None:
    """The loaded kernels, or None (reason logged once) where they cannot run; decided on first use."""
    with _once:
        if not _library:
            _library.append(_load())
    return _library[0]


def _load() -> ctypes.CDLL | None:
    reason = native_unsupported()
    library = None
    if reason is None:
        try:
            library = ctypes.CDLL(str(_build()))
        except (OSError, subprocess.CalledProcessError) as exc:
            reason = f"they did not build: {str(getattr(exc, 'stderr', '') or exc).strip()[:500]}"
    if library is None:
        logger.warning("static int8 runs without its int8 kernels (PyTorch's attention and quantizer): %s.", reason)
        return None
    p, i, f = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    library.sbq_int8_attention.restype = ctypes.c_int
    library.sbq_int8_attention.argtypes = [p, p, p, i, p, i, i, i, i, f, f, p, f, p, i, i, i]
    library.sbq_quantize_rows.restype = None
    library.sbq_quantize_rows.argtypes = [p, i, i, p, f, p, i, i]
    library.sbq_add_layer_norm.restype = None
    library.sbq_add_layer_norm.argtypes = [p, p, p, p, f, p, i, i, i]
    return library


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


def quantize_rows(rows: torch.Tensor, multiplier: torch.Tensor, offset: float) -> torch.Tensor:
    """``rows`` (fp32 or bf16, [n, width]) as u8 ``clamp(round(rows * multiplier + offset))`` by the kernel (the
    library must have loaded)."""
    library = native_library()
    assert library is not None
    rows = rows.contiguous()
    out = torch.empty(rows.shape, dtype=torch.uint8)
    width, bf16 = rows.shape[1], int(rows.dtype == torch.bfloat16)

    def run(start: int, stop: int) -> None:
        library.sbq_quantize_rows(
            rows.data_ptr(), bf16, width, multiplier.data_ptr(), offset, out.data_ptr(), start, stop
        )

    split(run, rows.shape[0], rows.numel())
    return out


def add_layer_norm(a: torch.Tensor, b: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """``norm(a + b)`` (fp32, normalized over the last dimension) by the kernel, in one pass over memory."""
    library = native_library()
    assert library is not None
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
