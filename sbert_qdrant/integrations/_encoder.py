"""The encoder an integration wraps: one given by the caller, or the configured one loaded as collections load it."""

from __future__ import annotations

import os

from ..encoder import SentenceEncoder, encoder_choice, load_encoder
from ..errors import InvalidArgumentError
from ..types import Precision


def given_or_loaded(
    model: str | os.PathLike[str] | None,
    encoder: SentenceEncoder | None,
    device: str | None,
    precision: Precision | None,
) -> tuple[SentenceEncoder, str | None]:
    """``encoder`` as given, else the configured encoder (``load_encoder``: each of ``model``, ``device`` and
    ``precision`` where given, else ``SBERT_QDRANT_MODEL`` / ``_DEVICE`` / ``_PRECISION``); with the model loaded
    (None: given, or the default model)."""
    if encoder is not None and model is not None:
        raise InvalidArgumentError(f"pass model= ({model!r}) or encoder=, not both.")
    if encoder is not None:
        if not isinstance(encoder, SentenceEncoder):
            raise InvalidArgumentError(f"encoder must be a SentenceEncoder, not {type(encoder).__name__}.")
        return encoder, None
    choice = encoder_choice(model=model, device=device, precision=precision)
    return load_encoder(**choice), choice["model"]
