"""What this CPU can do, asked in one place: torch's cpuinfo flags (AMX, VNNI, bf16, AVX2, AVX-512), the model name
from ``/proc/cpuinfo``, and the environment limits that hold PyTorch (``ATEN_CPU_CAPABILITY``) or oneDNN
(``ONEDNN_MAX_CPU_ISA``) below what the CPU has."""

from __future__ import annotations

import os
from pathlib import Path

import torch

#: The flags that decide encoder speed, as torch names them (shown by ``summary`` and ``sbert-qdrant build-kernels``).
FLAGS = ("avx2", "avx512_f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile")
#: Any of these lets oneDNN run int8 GEMMs with VNNI dot products.
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
#: oneDNN ISA limits (``ONEDNN_MAX_CPU_ISA``) that include VNNI: AVX2_VNNI, AVX512_CORE_VNNI/_BF16/_FP16/_AMX, AVX10.
_VNNI_ISA_MARKERS = ("VNNI", "BF16", "FP16", "AMX", "AVX10")


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
    exact-grade. Elsewhere torch emulates bf16, several times slower than fp32."""
    return has("avx512_bf16") or has("amx_bf16")


def vnni_int8_unsupported() -> str | None:
    """Why oneDNN cannot run int8 GEMMs with VNNI here (None: it may): no VNNI flag, or ``ONEDNN_MAX_CPU_ISA``
    (or the older ``DNNL_MAX_CPU_ISA``) below it."""
    if not any(has(flag) for flag in VNNI_FLAGS):
        return f"the CPU has none of {', '.join(VNNI_FLAGS)}"
    limit = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL").upper()
    if limit != "ALL" and not any(marker in limit for marker in _VNNI_ISA_MARKERS):
        return f"ONEDNN_MAX_CPU_ISA={limit} keeps oneDNN off VNNI int8 instructions"
    return None


def avx512_vnni_unsupported() -> str | None:
    """Why code compiled for AVX512-VNNI should not run here (None: it may): the CPU lacks it, or
    ``ATEN_CPU_CAPABILITY`` holds PyTorch below AVX-512 (the caller asked for AVX2-only behaviour)."""
    if not has("avx512_vnni"):
        return "the CPU has no AVX512-VNNI"
    aten = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
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
