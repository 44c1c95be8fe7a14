"""Test support for code built on sbert-qdrant: tiny random encoders, a qdrant-client whose calls fail on cue, and a
counter of device syncs.

``tiny_encoder()`` is a 2-layer, 32-dim random BERT with the default model's real WordPiece tokenizer: fast enough
for unit tests, meaningless for search quality. ``FaultInjectingClient`` wraps a ``QdrantClient`` or an
``AsyncQdrantClient`` (e.g. ``":memory:"``) and raises the scripted exceptions (those qdrant-client raises for
network faults, or any other) before passing calls through. It is a test double: use it where a real network cannot
be made to fail on demand.
"""

from __future__ import annotations

import collections
import inspect
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoTokenizer, BertConfig, BertModel

from .encoder import Normalize, Pooling, SentenceEncoder, Transformer
from .encoder.loading import DEFAULT_MODEL, resolve_model_folder


def tiny_transformer(max_seq_length: int = 32, seed: int = 0) -> Transformer:
    """A 2-layer, 32-dim random BERT (weights from ``seed``) with all-MiniLM-L6-v2's real WordPiece tokenizer."""
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_folder(DEFAULT_MODEL)))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return Transformer(BertModel(config).eval(), tokenizer, max_seq_length=max_seq_length)


def tiny_encoder(seed: int = 0) -> SentenceEncoder:
    """``tiny_transformer`` + mean pooling + normalisation, on the CPU."""
    transformer = tiny_transformer(seed=seed)
    return SentenceEncoder([transformer, Pooling(transformer.dimension, "mean"), Normalize()], device="cpu")


class FaultInjectingClient:
    """Calls ``inner``'s methods, first raising the faults scripted for each method name, in order.

    faults: method name -> one entry per call: an exception to raise, or None to let that call through.
    """

    def __init__(self, inner: Any, faults: dict[str, list[Exception | None]] | None = None) -> None:
        self.inner = inner
        self.faults = faults if faults is not None else {}
        #: How many times each method was called, faults included.
        self.calls: dict[str, int] = {}

    def _next_fault(self, name: str) -> Exception | None:
        self.calls[name] = self.calls.get(name, 0) + 1
        script = self.faults.get(name)
        return script.pop(0) if script else None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not callable(method):
            return method
        if inspect.iscoroutinefunction(method):

            async def acall(*args: Any, **kwargs: Any) -> Any:
                fault = self._next_fault(name)
                if fault is not None:
                    raise fault
                return await method(*args, **kwargs)

            return acall

        def call(*args: Any, **kwargs: Any) -> Any:
            fault = self._next_fault(name)
            if fault is not None:
                raise fault
            return method(*args, **kwargs)

        return call


class DeviceSyncCounter(TorchDispatchMode):
    """Counts, on the thread that enters it, the operations that read a tensor's value on the host (``.item()``,
    ``bool(tensor)``, a data-dependent shape): each is a wait for the device on a GPU. On a CPU it counts the same
    calls, so a test can hold a path at zero syncs without a GPU.

        with DeviceSyncCounter() as syncs:
            encoder(features)
        assert syncs.total == 0, syncs.calls
    """

    #: The ATen operations a host read of a device tensor goes through.
    SYNCING = frozenset({"_local_scalar_dense", "is_nonzero", "nonzero", "equal"})

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name in self.SYNCING:
            self.calls[name] += 1
        return func(*args, **(kwargs or {}))
