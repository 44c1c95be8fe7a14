"""Where and how the encoder runs: device choice, numeric precision, length-sorted batching."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import get_args

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import InvalidArgumentError
from ..settings import Precision
from . import cpu
from .int8 import ActivationRanges, quantize_int8

logger = logging.getLogger(__name__)

PRECISIONS: tuple[str, ...] = get_args(Precision)
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


def resolve_precision(precision: str, device: torch.device) -> str:
    """The precision to run: ``precision`` itself, or for "auto" the fastest exact-grade one on ``device``.

    "auto": fp16 on CUDA GPUs with tensor cores (compute capability >= 7), bf16 on CPUs with native bf16, else fp32.
    int8 is never chosen: it moves vectors measurably (see the README's speed table).
    """
    check_precision(precision, device)
    if precision != "auto":
        return precision
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 7:
        chosen, reason = "fp16", "CUDA tensor cores"
    elif device.type == "cpu" and cpu.native_bf16():
        chosen, reason = "bf16", "the CPU has native bf16"
    else:
        chosen, reason = "fp32", f"no exact-grade faster precision on this {device.type}"
    logger.info("precision='auto' runs %s on %s (%s)", chosen, device, reason)
    return chosen


def place(
    module: nn.Module,
    model: nn.Module,
    device: str | torch.device | None,
    precision: str,
    ranges: ActivationRanges | None = None,
) -> tuple[torch.device, str]:
    """Move ``module`` to ``device`` and run its ``model`` at ``precision``; the device and precision chosen."""
    target = resolve_device(device)
    chosen = resolve_precision(precision, target)
    module.to(target)
    apply_precision(model, chosen, ranges)
    return target, chosen


def apply_precision(model: nn.Module, precision: str, ranges: ActivationRanges | None = None) -> nn.Module:
    """Cast (bf16/fp16) or quantize (int8: static with calibrated activation ``ranges``, else dynamic) a transformer
    in place; fp32 is left as is."""
    if precision in _HALF_DTYPES:
        return model.to(_HALF_DTYPES[precision])
    if precision == "int8":
        return quantize_int8(model, ranges)
    return model


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Index batches of texts with similar token counts, longest first (so memory peaks show at once)."""
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


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
