"""The configured default encoder: the one place that reads ``SBERT_QDRANT_MODEL``, ``SBERT_QDRANT_DEVICE`` and
``SBERT_QDRANT_PRECISION`` to load a SentenceEncoder (collections, the CLI, the MCP server, LangChain, LlamaIndex
and the Ray actors all load through here)."""

from __future__ import annotations

import os
from typing import Any, TypedDict

from ..settings import Settings
from ..types import Precision
from .encoder import SentenceEncoder


class EncoderChoice(TypedDict):
    """What ``SentenceEncoder.load`` is given for the configured encoder: plain values, so they pickle (Ray)."""

    model: str | None
    device: str | None
    precision: Precision


def encoder_choice(
    settings: Settings | None = None,
    *,
    model: str | os.PathLike[str] | None = None,
    device: str | None = None,
    precision: Precision | None = None,
) -> EncoderChoice:
    """The model, device and precision to load: each argument given (not None), else the settings' (None: read
    from the environment). A model path is named as a str, the same in every process (half of the identity)."""
    settings = settings if settings is not None else Settings()
    chosen = model if model is not None else settings.model
    return EncoderChoice(
        model=os.fspath(chosen) if chosen is not None else None,
        device=device if device is not None else settings.device,
        precision=precision if precision is not None else settings.precision,
    )


def load_encoder(
    settings: Settings | None = None,
    *,
    model: str | os.PathLike[str] | None = None,
    device: str | None = None,
    precision: Precision | None = None,
    **options: Any,
) -> SentenceEncoder:
    """The configured default encoder: ``model``, ``device`` and ``precision`` where given, else ``settings``'
    (None: ``Settings()``, from ``SBERT_QDRANT_MODEL`` / ``_DEVICE`` / ``_PRECISION``), else the default model on
    the best device at "auto" precision. ``options`` go to ``SentenceEncoder.load`` (``max_seq_length``, ...)."""
    choice = encoder_choice(settings, model=model, device=device, precision=precision)
    return SentenceEncoder.load(**choice, **options)
