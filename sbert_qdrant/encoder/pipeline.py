"""The encoding pipeline of an accelerator: token-budget batches over length-sorted texts, the host's work
(tokenizing, collating into pinned buffers) on a worker thread ahead of the device, non-blocking copies both ways,
and each batch's results landing in the caller's array while the device computes the next.

On a CPU, ``runtime.run_batches`` runs instead (several batches at once, each on a share of the cores).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from queue import Empty, Full, Queue
from typing import Generic, TypeVar

import numpy as np
import torch

from ..errors import InvalidArgumentError

T = TypeVar("T")

#: Padded tokens per batch on an accelerator unless told otherwise (text-embeddings-inference's default is 16,384;
#: a MiniLM batch of this many tokens takes ~0.8 GFLOP per layer, enough to fill a large GPU).
DEFAULT_BATCH_TOKENS = 32_768
#: Texts tokenized per worker step: the tokenizer's one call over many texts is faster than one per batch, and a
#: chunk is length-sorted on its own, so the device starts after the first chunk instead of after every text.
TOKENIZE_CHUNK = 8192
#: Batches prepared ahead of the device, and batches computed before the oldest one's results are read.
PREPARED_AHEAD, IN_FLIGHT = 3, 2


def token_budget_batches(lengths: Sequence[int], max_tokens: int, max_texts: int) -> list[np.ndarray]:
    """Index batches over texts sorted longest first, each holding at most ``max_texts`` texts and, padded to its
    longest text, at most ``max_tokens`` tokens (a single text longer than the budget makes a batch of its own)."""
    for name, value in (("max_tokens", max_tokens), ("max_texts", max_texts)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name}={value!r} must be a positive integer.")
    counts = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-counts, kind="stable")
    batches, start = [], 0
    while start < len(order):
        size = min(max_texts, max(1, max_tokens // max(1, int(counts[order[start]]))), len(order) - start)
        batches.append(order[start : start + size])
        start += size
    return batches


def chunked_batches(
    count: int,
    lengths_of: Callable[[range], list[int]],
    max_tokens: int,
    max_texts: int,
    chunk: int = TOKENIZE_CHUNK,
) -> Iterator[np.ndarray]:
    """Token-budget batches of ``count`` texts, ``chunk`` texts at a time: ``lengths_of(span)`` gives (tokenizing)
    the token counts of texts ``span``; each batch holds indices into all ``count`` texts."""
    for start in range(0, count, chunk):
        span = range(start, min(count, start + chunk))
        for batch in token_budget_batches(lengths_of(span), max_tokens, max_texts):
            yield batch + start


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
    count: int,
    lengths_of: Callable[[range], list[int]],
    collate: Callable[[np.ndarray], dict[str, torch.Tensor]],
    compute: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    land: Callable[[np.ndarray, np.ndarray], None],
    device: torch.device,
    max_tokens: int,
    max_texts: int,
) -> None:
    """Encode ``count`` inputs on ``device``: on the worker, ``lengths_of(span)`` tokenizes a chunk and
    ``collate(index)`` a token-budget batch into host tensors; on the device thread ``compute(features)`` runs the
    model on them (``to_device`` first); ``land(index, rows)`` takes each batch's results in input positions."""
    batches = chunked_batches(count, lengths_of, max_tokens, max_texts)
    prepared = ((index, collate(index)) for index in batches)
    pipelined(
        prepared, lambda item: compute(to_device(item[1], device)), lambda item, rows: land(item[0], rows), device
    )
