"""The encoder an integration wraps: one given by the caller, or a model loaded the way collections load it."""

from __future__ import annotations

import os

from ..encoder import SentenceEncoder
from ..encoder.runtime import Precision
from ..errors import InvalidArgumentError
from ..settings import Settings


def given_or_loaded(
    model: str | os.PathLike[str] | None, encoder: SentenceEncoder | None, device: str | None, precision: Precision
) -> tuple[SentenceEncoder, str | os.PathLike[str] | None]:
    """``encoder`` as given, else ``model`` (None: ``SBERT_QDRANT_MODEL``, else the default model) loaded on
    ``device`` (None: ``SBERT_QDRANT_DEVICE``) at ``precision``; with the model loaded (None: given, or default)."""
    if encoder is not None and model is not None:
        raise InvalidArgumentError(f"pass model= ({model!r}) or encoder=, not both.")
    if encoder is not None:
        if not isinstance(encoder, SentenceEncoder):
            raise InvalidArgumentError(f"encoder must be a SentenceEncoder, not {type(encoder).__name__}.")
        return encoder, None
    settings = Settings()
    model = model if model is not None else settings.model
    return SentenceEncoder.load(model, device=device or settings.device, precision=precision), model
