"""Where and how both encoders run: device choice, numeric precision and its setup, length-sorted batching."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import InvalidArgumentError
from ..types import PRECISIONS, Precision
from . import cpu
from .int8 import Int8Plan

logger = logging.getLogger(__name__)

_HALF_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: At most this many batches run at once on a CPU (see ``run_batches``).
MAX_CPU_STREAMS = 4


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` picks cuda, then mps, then cpu; a named device must exist."""
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidArgumentError(
            f"device={device!r} is not a torch device; use 'cpu', 'cuda', 'cuda:1' or 'mps'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device={device!r} asks for CUDA but torch sees no CUDA GPU; use 'cpu' or None.")
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise InvalidArgumentError(f"device={device!r} asks for MPS but it is not available; use 'cpu' or None.")
    return resolved


def check_precision(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run, before any weights are touched."""
    if precision not in PRECISIONS:
        raise InvalidArgumentError(f"precision={precision!r} is not one of {PRECISIONS}.")
    if precision == "fp16" and device.type == "cpu":
        raise InvalidArgumentError("precision='fp16' needs a CUDA or MPS device; on CPU use 'bf16' or 'int8'.")
    if precision == "int8" and device.type != "cpu":
        raise InvalidArgumentError(
            f"precision='int8' is CPU quantization and cannot run on {device}; use 'fp16' or 'bf16' there."
        )


def checked_device(device: str | torch.device | None, precision: str) -> torch.device:
    """The device a model runs on (``resolve_device``), once ``precision`` is known to run there."""
    target = resolve_device(device)
    check_precision(precision, target)
    return target


def set_up(
    owner: nn.Module,
    model: nn.Module,
    device: torch.device,
    precision: str,
    exact_int8: Callable[[], bool],
    int8_plan: Callable[[], Int8Plan],
) -> tuple[Precision, Int8Plan | None]:
    """Run ``owner`` on ``device`` (from ``checked_device``) at ``precision``: the precision chosen (``exact_int8()``
    says, under "auto" only, whether static int8 is exact-grade for this model here) and, at int8, ``int8_plan()``,
    the plan that quantizes ``model``. The one setup of both encoders."""
    chosen = resolve_precision(precision, device, exact_int8=precision == "auto" and exact_int8())
    plan = int8_plan() if chosen == "int8" else None
    place(owner, model, device, chosen, plan)
    return cast(Precision, chosen), plan


def resolve_precision(precision: str, device: torch.device, exact_int8: bool = False) -> str:
    """The precision to run: ``precision`` itself (checked by ``check_precision``), or for "auto" the fastest
    exact-grade one on ``device``.

    "auto": fp16 on CUDA GPUs with tensor cores (compute capability >= 7); on a CPU, static int8 where
    ``exact_int8`` (the model's shipped int8 ranges were measured exact-grade with this CPU's int8 ISA:
    ``calibration.exact_grade_int8``), else bf16 with native bf16, else fp32 (docs/int8.md, "precision='auto'").
    """
    if precision != "auto":
        return precision
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 7:
        chosen, reason = "fp16", "CUDA tensor cores"
    elif device.type == "cpu" and exact_int8:
        chosen, reason = "int8", "static int8 measured exact-grade for this model with this CPU's int8 instructions"
    elif device.type == "cpu" and cpu.native_bf16():
        chosen, reason = "bf16", "the CPU has native bf16"
    else:
        chosen, reason = "fp32", f"no exact-grade faster precision on this {device.type}"
    logger.info("precision='auto' runs %s on %s (%s)", chosen, device, reason)
    return chosen


def place(module: nn.Module, model: nn.Module, device: torch.device, precision: str, int8: Int8Plan | None) -> None:
    """Move ``module`` to ``device`` and run its ``model`` at ``precision`` (int8: as ``int8`` plans)."""
    module.to(device)
    if precision in _HALF_DTYPES:
        model.to(_HALF_DTYPES[precision])
    elif int8 is not None:
        int8.apply()


def length_sorted_batches(lengths: Sequence[int] | np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Index batches of up to ``batch_size`` texts with similar token counts, longest first (so memory peaks show at
    once). A batch ends early where the token count changes once it holds half of ``batch_size``: fewer padded rows
    to compute (10,000 Quora questions at 32: 4.3 % of the rows were padding)."""
    counts = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-counts, kind="stable")
    run_ends = [*(np.flatnonzero(np.diff(counts[order])) + 1).tolist(), len(order)]  # where each equal count ends
    batches, start, half = [], 0, max(1, batch_size // 2)
    for end in run_ends:
        while end - start >= batch_size:
            batches.append(order[start : start + batch_size])
            start += batch_size
        if end > start and (end - start >= half or end == len(order)):
            batches.append(order[start:end])
            start = end
    return batches


def cpu_streams(threads: int) -> tuple[int, int]:
    """How to spend ``threads`` CPU threads on many batches: (batches at once, threads per batch)."""
    streams = max(1, min(threads, MAX_CPU_STREAMS))
    return streams, max(1, threads // streams)


def run_batches(
    batches: Sequence[np.ndarray],
    run: Callable[[np.ndarray], None],
    device: torch.device,
    progress: bool,
    desc: str,
) -> None:
    """Call ``run(index)`` for every batch under inference mode, with a progress bar.

    On a CPU, several batches run at once, each on a share of torch's threads (as OpenVINO's throughput mode does):
    a transformer's many small operations keep one core busier than they keep two, so parallel batches finish more
    texts per second (measured by benchmarks/encode.py). Elsewhere, and for a single batch, one after another.
    """
    threads = torch.get_num_threads()
    streams, per_stream = cpu_streams(threads) if device.type == "cpu" and len(batches) > 1 else (1, threads)
    with tqdm(total=len(batches), desc=desc, unit="batch", disable=not progress) as bar:
        if streams == 1:
            with torch.inference_mode():
                for index in batches:
                    run(index)
                    bar.update()
            return

        def run_one(index: np.ndarray) -> None:
            torch.set_num_threads(per_stream)  # this thread's own OpenMP team size
            with torch.inference_mode():
                run(index)

        try:
            with ThreadPoolExecutor(streams, thread_name_prefix="sbert-qdrant-batch") as pool:
                for _ in pool.map(run_one, batches):
                    bar.update()
        finally:
            torch.set_num_threads(threads)
