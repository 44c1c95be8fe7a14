"""Batching for an accelerator: token-budget batches over length-sorted texts, the host's work
(tokenizing, collating into pinned buffers) on a worker thread ahead of the device, non-blocking copies both ways,
and each batch's results landing in the caller's array while the device computes the next.

On a CPU, ``runtime.run_batches`` runs instead (several batches at once, each on a share of the cores).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from queue import Empty, Full, Queue
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from ..errors import InvalidArgumentError

T = TypeVar("T")

#: Padded tokens per batch on an accelerator unless told otherwise (text-embeddings-inference's default is 16,384;
#: a MiniLM batch of this many tokens takes ~0.8 GFLOP per layer, enough to fill a large GPU).
DEFAULT_BATCH_TOKENS = 32_768
#: Texts per batch on a CPU unless told otherwise (sentence-transformers' default).
CPU_BATCH = 32
#: Texts tokenized per step: the first chunk small, so that the first batch leaves within milliseconds, each next
#: one twice as large up to ``TOKENIZE_CHUNK`` (the tokenizer's one call over many texts is faster than one per
#: batch, and a chunk is length-sorted on its own).
FIRST_CHUNK, TOKENIZE_CHUNK = 256, 8192
#: Batches prepared ahead of the device, and batches computed before the oldest one's results are read.
PREPARED_AHEAD, IN_FLIGHT = 3, 2


def token_budget_batches(
    lengths: Sequence[int] | np.ndarray, max_tokens: int, max_texts: int | None
) -> list[np.ndarray]:
    """Index batches over texts sorted longest first, each holding, padded to its longest text, at most
    ``max_tokens`` tokens (a single text longer than the budget makes a batch of its own) and at most ``max_texts``
    texts (None: the budget alone)."""
    for name, value in (("max_tokens", max_tokens), ("max_texts", max_texts)):
        if value is None and name == "max_texts":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name}={value!r} must be a positive integer.")
    counts = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-counts, kind="stable")
    most = len(order) if max_texts is None else max_texts
    batches, start = [], 0
    while start < len(order):
        size = min(most, max(1, max_tokens // max(1, int(counts[order[start]]))), len(order) - start)
        batches.append(order[start : start + size])
        start += size
    return batches


def batch_cap(batch_size: int | None, device: torch.device) -> int | None:
    """The most inputs per batch: ``batch_size`` (checked); None: ``CPU_BATCH`` on a CPU, and on an accelerator no
    count at all (each batch holds what the token budget lets in)."""
    if batch_size is None:
        return CPU_BATCH if device.type == "cpu" else None
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size={batch_size!r} must be a positive integer (or None: the default).")
    return batch_size


def chunk_spans(count: int, first: int = FIRST_CHUNK, most: int = TOKENIZE_CHUNK) -> list[range]:
    """Consecutive spans covering ``count`` inputs: ``first`` long, each next one twice as long, up to ``most``."""
    spans, start, size = [], 0, first
    while start < count:
        spans.append(range(start, min(count, start + size)))
        start, size = start + size, min(most, size * 2)
    return spans


@dataclass(frozen=True)
class Chunk:
    """Inputs ``start`` .. ``start + len(lengths)`` tokenized: their ``tokens`` (as the feed keeps them) and token
    counts."""

    start: int
    tokens: Any
    lengths: np.ndarray


class _Handoff(Generic[T]):
    """A bounded queue from the worker to the consuming thread that either side can stop."""

    def __init__(self, depth: int) -> None:
        self.queue: Queue[tuple[T] | BaseException | None] = Queue(maxsize=depth)
        self.stopped = threading.Event()

    def put(self, value: tuple[T] | BaseException | None) -> bool:
        """Hand ``value`` over; False once the consumer has stopped listening."""
        while not self.stopped.is_set():
            try:
                self.queue.put(value, timeout=0.05)
                return True
            except Full:
                continue
        return False

    def produce(self, items: Iterable[T]) -> None:
        try:
            for item in items:
                if not self.put((item,)):
                    return
            self.put(None)
        except BaseException as exc:  # noqa: BLE001  # handed over: raised on the consuming thread
            self.put(exc)

    def drain(self) -> Iterator[T]:
        while (got := self.queue.get()) is not None:
            if isinstance(got, BaseException):
                raise got
            yield got[0]

    def stop(self) -> None:
        self.stopped.set()
        while True:  # unblock a worker waiting for room
            try:
                self.queue.get_nowait()
            except Empty:
                return


@contextmanager
def ahead(items: Iterable[T], depth: int = PREPARED_AHEAD) -> Iterator[Iterator[T]]:
    """``items`` iterated on a worker thread up to ``depth`` ahead of the consumer, in order; an exception there is
    raised where the consumer reaches it; leaving the block stops the worker."""
    handoff: _Handoff[T] = _Handoff(depth)
    worker = threading.Thread(target=handoff.produce, args=(items,), name="sbert-qdrant-prepare", daemon=True)
    worker.start()
    try:
        yield handoff.drain()
    finally:
        handoff.stop()
        worker.join()


def pipelined(
    items: Iterable[T],
    compute: Callable[[T], torch.Tensor],
    land: Callable[[T, np.ndarray], None],
    device: torch.device,
) -> None:
    """Run ``compute(item)`` on the device for every item, in order, and ``land(item, result)`` with its result on
    the host.

    ``items`` is iterated on a worker thread (so it should do the host's work: tokenizing, collating into pinned
    memory), up to ``PREPARED_AHEAD`` ahead. On CUDA a result is copied back without blocking and landed once
    ``IN_FLIGHT`` batches are queued, so the device computes while the host lands. An exception in ``items``,
    ``compute`` or ``land`` stops the worker and is raised here.
    """
    landing: deque[tuple[T, torch.Tensor, torch.cuda.Event | None]] = deque()
    with ahead(items) as prepared, torch.inference_mode():
        for item in prepared:
            landing.append((item, *_to_host(compute(item), device)))
            if len(landing) >= IN_FLIGHT:
                _land(land, *landing.popleft())
        while landing:
            _land(land, *landing.popleft())


def _to_host(result: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.cuda.Event | None]:
    """``result`` on the host: on CUDA a pinned copy started without blocking, and the event that says it is done."""
    if device.type != "cuda":
        return result.cpu(), None
    host = torch.empty(result.shape, dtype=result.dtype, pin_memory=True)
    host.copy_(result, non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return host, event


def _land(land: Callable[[T, np.ndarray], None], item: T, host: torch.Tensor, event: torch.cuda.Event | None) -> None:
    if event is not None:
        event.synchronize()
    land(item, host.numpy())


def to_device(features: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Host tensors on ``device``; from pinned memory the copies do not block the host."""
    return {name: value.to(device, non_blocking=True) for name, value in features.items()}


def host_tensor(array: np.ndarray, pin: bool) -> torch.Tensor:
    """A host tensor of ``array``, in pinned (page-locked) memory where ``pin``: such copies to a GPU run
    asynchronously."""
    tensor = torch.from_numpy(array)
    return tensor.pin_memory() if pin else tensor


def encode_pipelined(
    chunks: Iterable[Chunk],
    collate: Callable[[Chunk, np.ndarray], dict[str, torch.Tensor]],
    compute: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    land: Callable[[Chunk, np.ndarray, np.ndarray], None],
    device: torch.device,
    max_tokens: int,
    max_texts: int | None,
) -> None:
    """Encode the inputs of ``chunks`` (a feed's, tokenizing as it goes) on ``device``: on the worker, each chunk is
    cut into token-budget batches and ``collate(chunk, index)`` makes a batch's host tensors; on the device thread
    ``compute(features)`` runs the model on them (``to_device`` first); ``land(chunk, index, rows)`` takes each
    batch's results (``index``: positions within the chunk)."""
    prepared = (
        (chunk, index, collate(chunk, index))
        for chunk in chunks
        for index in token_budget_batches(chunk.lengths, max_tokens, max_texts)
    )
    pipelined(
        prepared,
        lambda item: compute(to_device(item[2], device)),
        lambda item, rows: land(item[0], item[1], rows),
        device,
    )
