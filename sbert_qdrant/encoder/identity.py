"""An encoder's identity: its model's name and a fingerprint of what decides its vectors (weights, modules and their
settings: pooling modes, Dense activation, Normalize; the document prompt), so that a collection tells vectors of its
own encoder from another model's.

The weights are read as fp32, before a model is cast or quantized: the same weights give the same identity at any
precision, on any device, after a save and reload; training changes it, and so does a ``truncate_dim`` cut (its
vectors are another size).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from typing import cast

import torch
from torch import nn

from .base import EncoderModule

#: Values sampled per parameter tensor (evenly spaced): fine-tuning moves all of them.
_SAMPLES = 512


def weights_digest(modules: nn.Module) -> str:
    """A digest of the modules' types and a sample of every parameter's values."""
    digest = hashlib.blake2b(digest_size=16)
    for module in modules.children():
        digest.update(type(module).__name__.encode())
    for name, parameter in modules.named_parameters():
        values = parameter.detach().reshape(-1)
        sample = values[:: max(1, values.numel() // _SAMPLES)][:_SAMPLES].to("cpu", torch.float32).contiguous()
        digest.update(f"{name}{tuple(parameter.shape)}".encode())
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()


#: Module settings that do not change a stored vector's meaning: a text longer than the limit is cut, but a
#: collection may be read with another limit.
_NOT_SHAPING = frozenset({"max_seq_length"})


def modules_digest(modules: nn.Module) -> str:
    """6 hex digits of every module's type and settings (pooling modes, Dense activation, lower-casing, ...)."""
    shapes = [
        [type(module).__name__, {k: v for k, v in module.config().items() if k not in _NOT_SHAPING}]
        for module in cast(Iterable[EncoderModule], modules.children())
    ]
    return hashlib.blake2b(json.dumps(shapes, sort_keys=True).encode(), digest_size=3).hexdigest()


def encoder_identity(
    name: str, weights: str, document_prompt: str, modules: str, truncate_dim: int | None = None
) -> str:
    """``name@weights-modules``: 12 hex digits of the weights' digest and the prompt put before stored texts, then the
    modules' digest (identities recorded before it joined have the first part only; ``same_encoder`` reads both).
    Vectors cut to ``truncate_dim`` values (None: not cut) are ``name[:128]@...``, the cut in the fingerprint too."""
    what = f"{weights}\n{document_prompt}" + (f"\n{truncate_dim}" if truncate_dim is not None else "")
    fingerprint = hashlib.blake2b(what.encode(), digest_size=6).hexdigest()
    return f"{name}{f'[:{truncate_dim}]' if truncate_dim is not None else ''}@{fingerprint}-{modules}"


def model_name(model: str | os.PathLike[str]) -> str:
    """A model's short name: a folder's name, or a hub id's last part."""
    return os.path.basename(os.path.normpath(os.fspath(model))) or os.fspath(model)
