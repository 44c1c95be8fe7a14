"""The encoder an integration wraps: one given by the caller, or the configured one loaded as collections load it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..encoder import EncoderSpec, LoadOptions, SentenceEncoder
from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from typing_extensions import Unpack


def given_or_loaded(
    encoder: SentenceEncoder | None,
    model: str | os.PathLike[str] | SentenceEncoder | None,
    **load: Unpack[LoadOptions],
) -> tuple[SentenceEncoder, str | None]:
    """``encoder`` as given, else the configured encoder (``EncoderSpec.of``: ``model`` and each load option where
    given, else ``SBERT_QDRANT_MODEL`` / ``_DEVICE`` / ``_PRECISION`` / ...); with the model loaded (None: given, or
    the default model). A SentenceEncoder passed as ``model`` (first, positionally, as ``HuggingFaceEmbeddings``-style
    code does) is the encoder."""
    if isinstance(model, SentenceEncoder):
        if encoder is not None:
            raise InvalidArgumentError(
                f"an encoder is given twice (first as {model!r:.60}, then as encoder=); pass one of them."
            )
        encoder, model = model, None
    if encoder is not None:
        named = {"model": model, **load}
        given = sorted(name for name, value in named.items() if value is not None)
        if given:
            raise InvalidArgumentError(
                f"pass encoder= or the load options to load one ({', '.join(f'{n}=' for n in given)}), not both."
            )
        if not isinstance(encoder, SentenceEncoder):
            raise InvalidArgumentError(f"encoder must be a SentenceEncoder, not {type(encoder).__name__}.")
        return encoder, None
    spec = EncoderSpec.of(model=model, **load)
    return spec.load(), spec.model
