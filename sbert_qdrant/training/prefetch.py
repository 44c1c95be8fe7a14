"""The trainer's batches made ahead on a worker thread: picking and collating step k+1's examples (and on CUDA,
copying them to the GPU on a stream of their own) while step k computes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ..encoder.batching import ahead
from .losses import Batch, Objective

Made = tuple[Objective, Batch]


@contextmanager
def prefetched(make: Callable[[int], Made], steps: range, device: torch.device) -> Iterator[Iterator[Made]]:
    """``make(step)`` for every step, in order, made on a worker thread ahead of the loop that reads them."""
    if device.type != "cuda":
        with ahead(make(step) for step in steps) as made:
            yield made
        return
    side = torch.cuda.Stream(device)

    def on_side(step: int) -> tuple[Made, torch.cuda.Event]:
        with torch.cuda.stream(side):
            objective, batch = make(step)
            event = torch.cuda.Event()
            event.record(side)
        return (objective, batch), event

    def ready(item: tuple[Made, torch.cuda.Event]) -> Made:
        (objective, batch), event = item
        current = torch.cuda.current_stream(device)
        current.wait_event(event)
        for tensor in _tensors(batch):
            tensor.record_stream(current)  # made on the side stream, used and freed on this one
        return objective, batch

    with ahead(on_side(step) for step in steps) as copied:
        yield (ready(item) for item in copied)


def _tensors(batch: Batch) -> Iterator[torch.Tensor]:
    for features in batch.features:
        yield from (value for value in features.values() if isinstance(value, torch.Tensor))
    if batch.labels is not None:
        yield batch.labels
