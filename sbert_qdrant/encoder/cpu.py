"""What this CPU can do, asked in one place: torch's cpuinfo flags (AMX, VNNI, bf16, AVX2, AVX-512), the model name
from ``/proc/cpuinfo``, and the environment limits that hold PyTorch (``ATEN_CPU_CAPABILITY``) or oneDNN
(``ONEDNN_MAX_CPU_ISA``) below what the CPU has."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..types import Int8GemmIsa, KernelIsa

#: The flags that decide encoder speed, as torch names them (shown by ``summary`` and ``sbert-qdrant build-kernels``).
FLAGS = ("avx2", "avx512_f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile")
#: Any of these lets oneDNN run int8 GEMMs with VNNI dot products.
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
#: oneDNN ISA limits (``ONEDNN_MAX_CPU_ISA``) that include VNNI: AVX2_VNNI, AVX512_CORE_VNNI/_BF16/_FP16/_AMX, AVX10.
_VNNI_ISA_MARKERS = ("VNNI", "BF16", "FP16", "AMX", "AVX10")
#: oneDNN ISA limits below AVX2 (its int8 GEMMs there are SSE4.1 or reference code, slower than dynamic int8).
_BELOW_AVX2_ISAS = ("SSE41", "DEFAULT")


def capabilities() -> dict[str, object]:
    """torch's view of the CPU (``torch.cpu.get_capabilities()``; empty on a torch without it)."""
    return dict(torch.cpu.get_capabilities()) if hasattr(torch.cpu, "get_capabilities") else {}


def has(flag: str) -> bool:
    """Whether the CPU has ``flag`` (a key of :func:`capabilities`, e.g. "avx512_vnni")."""
    return bool(capabilities().get(flag))


def flags() -> list[str]:
    """Those of :data:`FLAGS` this CPU has."""
    return [flag for flag in FLAGS if has(flag)]


def native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16 or AMX): there bf16 is fast and, for inference,
    exact-grade. Elsewhere torch emulates bf16, several times slower than fp32. ``ONEDNN_MAX_CPU_ISA`` below bf16 or
    ``ATEN_CPU_CAPABILITY=avx2|default`` (an emulated AVX2 CPU) count as without: oneDNN's bf16 runs reference code
    there."""
    if not (has("avx512_bf16") or has("amx_bf16")):
        return False
    limit = _onednn_limit()
    if limit != "ALL" and not any(marker in limit for marker in ("BF16", "FP16", "AMX", "AVX10")):
        return False
    return aten_limit() not in ("default", "avx2")


def vnni_int8_unsupported() -> str | None:
    """Why oneDNN cannot run int8 GEMMs with VNNI here (None: it may): no VNNI flag, or ``ONEDNN_MAX_CPU_ISA``
    (or the older ``DNNL_MAX_CPU_ISA``) below it."""
    if not any(has(flag) for flag in VNNI_FLAGS):
        return f"the CPU has none of {', '.join(VNNI_FLAGS)}"
    limit = _onednn_limit()
    if limit != "ALL" and not any(marker in limit for marker in _VNNI_ISA_MARKERS):
        return f"ONEDNN_MAX_CPU_ISA={limit} keeps oneDNN off VNNI int8 instructions"
    return None


def aten_limit() -> str | None:
    """``ATEN_CPU_CAPABILITY`` lower-cased (e.g. "avx2", "default"), or None where it is not set."""
    return os.environ.get("ATEN_CPU_CAPABILITY", "").lower() or None


def _onednn_limit() -> str:
    return (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL").upper()


def int8_gemm_isa() -> tuple[Int8GemmIsa, str]:
    """Which instructions oneDNN's u8 x s8 GEMMs (static int8) run here, and why: "vnni" (VNNI dot products into
    s32; the reason names the flag), "avx2" (``vpmaddubsw``, whose s16 pair sums saturate unless weights keep to 7
    bits; the reason says why not VNNI), or "none" (static int8 does not pay; the reason says why not AVX2)."""
    no_vnni = vnni_int8_unsupported()
    if no_vnni is None:
        flag = next(flag for flag in VNNI_FLAGS if has(flag))
        return "vnni", flag if _onednn_limit() == "ALL" else f"{flag}, ONEDNN_MAX_CPU_ISA={_onednn_limit()}"
    if not has("avx2"):
        return "none", f"the CPU has neither VNNI nor AVX2 ({no_vnni})"
    if _onednn_limit() in _BELOW_AVX2_ISAS:
        return "none", f"ONEDNN_MAX_CPU_ISA={_onednn_limit()} keeps oneDNN below AVX2"
    return "avx2", no_vnni


def fbgemm_isa() -> str:
    """The widest instructions fbgemm (dynamic int8's GEMMs) uses here: it ignores ``ONEDNN_MAX_CPU_ISA`` and
    ``ATEN_CPU_CAPABILITY`` and obeys ``FBGEMM_ENABLE_INSTRUCTIONS`` (AVX2, AVX512, AVX512_E1 with VNNI)."""
    limit = os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS", "").upper()
    if has("avx512_f") and limit != "AVX2":
        return "avx512_vnni" if has("avx512_vnni") and limit not in ("AVX512", "AVX512_256") else "avx512"
    return "avx2" if has("avx2") else "reference"


def kernel_isa() -> tuple[KernelIsa | None, str]:
    """Which build of the native int8 kernels runs here: "avx512_vnni", else "avx2" (AVX2 and FMA), else None; with
    the reason the better one does not ("" for "avx512_vnni")."""
    no_avx512 = avx512_vnni_unsupported()
    if no_avx512 is None:
        return "avx512_vnni", ""
    if has("avx2") and has("fma3"):
        return "avx2", no_avx512
    return None, f"{no_avx512} and no AVX2 with FMA"


def avx512_vnni_unsupported() -> str | None:
    """Why code compiled for AVX512-VNNI should not run here (None: it may): the CPU lacks it, or
    ``ATEN_CPU_CAPABILITY`` holds PyTorch below AVX-512 (the caller asked for AVX2-only behaviour)."""
    if not has("avx512_vnni"):
        return "the CPU has no AVX512-VNNI"
    aten = aten_limit()
    if aten in ("default", "avx2"):
        return f"ATEN_CPU_CAPABILITY={aten} keeps PyTorch off AVX-512"
    return None


def model_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else torch's (e.g. "Intel Xeon")."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return str(capabilities().get("cpu_name") or "unknown CPU")


def summary() -> str:
    """The CPU's model, cores and speed-deciding flags, for benchmark tables and ``build-kernels``."""
    return f"{model_name()}, {os.cpu_count()} cores, flags: {' '.join(flags()) or 'none of note'}"
