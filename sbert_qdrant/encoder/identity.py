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
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

import numpy as np

from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from torch import nn

    from .base import EncoderModule

#: Values sampled per parameter tensor (evenly spaced): fine-tuning moves all of them.
_SAMPLES = 512

_Values = TypeVar("_Values")


def sampled(values: _Values) -> _Values:
    """Every n-th value of a 1-D array (NumPy or torch), at most ``_SAMPLES`` of them: what the digest reads."""
    flat = cast(Any, values)
    return cast(_Values, flat[:: max(1, int(flat.shape[0]) // _SAMPLES)][:_SAMPLES])


def parameters_digest(
    module_types: Iterable[str], parameters: Iterable[tuple[str, tuple[int, ...], np.ndarray]]
) -> str:
    """A digest of the modules' types and of each parameter's name, shape and ``sampled`` values as float32, in the
    order torch's ``named_parameters`` gives them."""
    digest = hashlib.blake2b(digest_size=16)
    for name in module_types:
        digest.update(name.encode())
    for name, shape, sample in parameters:
        digest.update(f"{name}{shape}".encode())
        digest.update(np.ascontiguousarray(sample, dtype=np.float32).tobytes())
    return digest.hexdigest()


def weights_digest(modules: nn.Module) -> str:
    """``parameters_digest`` of a torch module's children and parameters."""
    import torch

    return parameters_digest(
        (type(module).__name__ for module in modules.children()),
        (
            (name, tuple(p.shape), sampled(p.detach().reshape(-1)).to("cpu", torch.float32).contiguous().numpy())
            for name, p in modules.named_parameters()
        ),
    )


#: Module settings that do not change a stored vector's meaning: a text longer than the limit is cut, but a
#: collection may be read with another limit.
_NOT_SHAPING = frozenset({"max_seq_length"})


def configs_digest(modules: Iterable[tuple[str, dict[str, Any]]]) -> str:
    """6 hex digits of every module's (type name, settings): pooling modes, Dense activation, lower-casing, ..."""
    shapes = [[kind, {k: v for k, v in config.items() if k not in _NOT_SHAPING}] for kind, config in modules]
    return hashlib.blake2b(json.dumps(shapes, sort_keys=True).encode(), digest_size=3).hexdigest()


def modules_digest(modules: nn.Module) -> str:
    """``configs_digest`` of a torch pipeline's modules."""
    children = cast("Iterable[EncoderModule]", modules.children())
    return configs_digest((type(module).__name__, module.config()) for module in children)


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


@overload
def check_truncate_dim(value: None, dimension: int | None = None) -> None: ...
@overload
def check_truncate_dim(value: int, dimension: int | None = None) -> int: ...
def check_truncate_dim(value: int | None, dimension: int | None = None) -> int | None:
    """``value`` when None or an int from 1 to ``dimension`` (the model's, when known), else an error naming it: the
    cut that an identity names."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= (dimension or value):
        bound = "the model's dimension" if dimension is None else f"{dimension} (the model's dimension)"
        raise InvalidArgumentError(
            f"truncate_dim={value!r} must be the length to cut vectors to, an int from 1 to {bound}, or None for "
            "full-length vectors."
        )
    return value
