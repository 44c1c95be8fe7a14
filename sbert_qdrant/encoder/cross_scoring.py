"""The CPU-side scoring path of a cross-encoder: its checks of pairs and activations, the activations themselves, the
rows of a re-rank's batches on a CPU, and the last layer cut to the first token where the head reads no other."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, get_args

import torch
from torch import nn

from ..errors import InvalidArgumentError, InvalidInputError
from ..types import Activation
from .runtime import cpu_streams

ACTIVATION_FUNCTIONS = {
    "sigmoid": torch.sigmoid,
    "identity": lambda logits: logits,
    "softmax": lambda logits: torch.softmax(logits, dim=-1),
    "tanh": torch.tanh,
}
#: Classification models whose head reads the first token's last hidden state alone (BERT's pooler, RoBERTa's and
#: ELECTRA's heads): scoring needs the last layer's attention output and FFN for that token only.
_FIRST_TOKEN_HEADS = frozenset(
    {
        "BertForSequenceClassification",
        "RobertaForSequenceClassification",
        "XLMRobertaForSequenceClassification",
        "ElectraForSequenceClassification",
    }
)
#: Set while this thread scores pairs (``predict``): the last layer then computes its first token alone.
_SCORING = threading.local()


def first_token_only(model: nn.Module) -> None:
    """Have the last layer compute its attention output and FFN for the first token alone while scoring
    (:func:`scoring`), where the head reads that token only (the others' last-layer outputs are never read): the same
    logits, ~9/12 of one layer's GEMMs fewer. A hook on the module that runs now (int8 swaps it when it quantizes),
    registered once."""
    target = _last_attention_output(model)
    if target is not None and not getattr(target, "_sbert_qdrant_first_token", False):
        target.register_forward_pre_hook(_first_token_rows)
        setattr(target, "_sbert_qdrant_first_token", True)  # noqa: B010  (a plain attribute, not a submodule)


@contextmanager
def scoring() -> Iterator[None]:
    """This thread scores pairs: the last layer computes its first token alone (where :func:`first_token_only`
    hooked it); training forwards, outside, compute every token."""
    _SCORING.on = True
    try:
        yield
    finally:
        _SCORING.on = False


def cpu_batch_rows(pairs: int, batch_size: int) -> int:
    """Rows per batch on a CPU: ``batch_size``, but small enough that a re-rank's few pairs make two batches per
    stream of ``run_batches`` (each stream one thread, no thread waiting on another inside each operation; the
    longest batches first, so the streams finish together). 20 pairs of 256 tokens on 2 cores: 4 batches of 5."""
    streams, _ = cpu_streams(torch.get_num_threads())
    if streams == 1:
        return batch_size
    return max(1, min(batch_size, -(-pairs // (2 * streams))))


def _last_attention_output(model: nn.Module) -> nn.Module | None:
    """The last layer's attention output module (``attention.output``) of a classification model whose head reads
    the first token alone (:data:`_FIRST_TOKEN_HEADS`), else None."""
    if type(model).__name__ not in _FIRST_TOKEN_HEADS or getattr(model.config, "is_decoder", False):
        return None
    layers = getattr(getattr(getattr(model, "base_model", None), "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return None
    output = getattr(getattr(layers[-1], "attention", None), "output", None)
    return output if isinstance(output, nn.Module) else None


def _first_token_rows(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Forward pre-hook of the last attention output while scoring: (context, residual) cut to the first token."""
    if not getattr(_SCORING, "on", False) or len(args) != 2:
        return None
    context, residual = args
    return context[:, :1].contiguous(), residual[:, :1].contiguous()


def checked_activation(activation: object) -> Activation:
    if activation not in get_args(Activation):
        raise InvalidArgumentError(f"activation={activation!r} is not one of {sorted(get_args(Activation))}.")
    return activation  # type: ignore[return-value]  # checked just above


def checked_pairs(pairs: object) -> list[tuple[str, str]]:
    """A list of (str, str), or an error naming the first bad pair and its index."""
    if pairs is None or isinstance(pairs, (str, bytes, dict)) or not isinstance(pairs, Sequence):
        raise InvalidInputError(f"pairs must be a sequence of (text_a, text_b), not {type(pairs).__name__}.")
    items = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise InvalidInputError(
                f"pairs[{i}] is {type(pair).__name__} ({pair!r:.60}), not a pair (text_a, text_b); "
                "pass [(a, b), ...], a single pair as [(a, b)]."
            )
        for j, text in enumerate(pair):
            if not isinstance(text, str):
                raise InvalidInputError(
                    f"pairs[{i}][{j}] is {type(text).__name__} ({text!r:.60}), not str; pass text, e.g. str(value)."
                )
        items.append((pair[0], pair[1]))
    return items
