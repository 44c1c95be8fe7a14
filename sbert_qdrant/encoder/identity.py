"""An encoder's identity: its model's name and a fingerprint of what decides its vectors (weights, modules, document
prompt), so that a collection tells vectors of its own encoder from another model's.

The weights are read as fp32, before a model is cast or quantized: the same weights give the same identity at any
precision, on any device, after a save and reload; training changes it, and so does a ``truncate_dim`` cut (its
vectors are another size).
"""

from __future__ import annotations

import hashlib
import os

import torch
from torch import nn

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


def encoder_identity(name: str, weights: str, document_prompt: str, truncate_dim: int | None = None) -> str:
    """``name@fingerprint``: 12 hex digits of the weights' digest and the prompt put before stored texts; vectors cut
    to ``truncate_dim`` values (None: not cut) are ``name[:128]@fingerprint``, the cut in the fingerprint too."""
    what = f"{weights}\n{document_prompt}" + (f"\n{truncate_dim}" if truncate_dim is not None else "")
    fingerprint = hashlib.blake2b(what.encode(), digest_size=6).hexdigest()
    return f"{name}{f'[:{truncate_dim}]' if truncate_dim is not None else ''}@{fingerprint}"


def model_name(model: str | os.PathLike[str]) -> str:
    """A model's short name: a folder's name, or a hub id's last part."""
    return os.path.basename(os.path.normpath(os.fspath(model))) or os.fspath(model)
