"""The collection's own encoder as plain values: the spec every actor loads (the collection's model, precision,
``truncate_dim`` and text length unless the call names others; other settings refused as another encoder is), and
``Written``, what a write task opens the collection with (the encoder's identity, size and, for documents, its token
limit and tokenizer, loaded in the task): no model crosses to a worker."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, NoReturn

from ...encoder import EncoderSpec, LoadOptions
from ...errors import CollectionMismatchError, UnsupportedError
from ...protocols import TextEncoder, identity_of


def actor_spec(encoder: TextEncoder, model: str | os.PathLike[str] | None, load: LoadOptions) -> EncoderSpec:
    """What every actor loads: ``model`` and the ``load`` options given, the rest the collection's own encoder's
    (``EncoderSpec.of_encoder``; the settings' where it cannot tell, e.g. an encoder not loaded from a folder). A
    precision or ``truncate_dim`` other than the collection encoder's is refused: its vectors would not be the ones
    ``upsert_texts`` stores."""
    own = EncoderSpec.of_encoder(encoder)
    if own is None:
        return EncoderSpec.of(model=model, **load)
    precision, cut = load.get("precision"), load.get("truncate_dim")
    resolved = getattr(encoder, "precision", own.precision)
    if precision is not None and precision not in (own.precision, resolved):
        _refuse(
            "precision",
            precision,
            f"precision={own.precision!r}" + (f" ({resolved})" if own.precision == "auto" else ""),
        )
    if cut is not None and cut != own.truncate_dim:
        _refuse("truncate_dim", cut, f"truncate_dim={own.truncate_dim!r}")
    given = EncoderSpec.of(model=model, device=load.get("device"))  # the device: the call's, else the settings'
    return dataclasses.replace(own, model=own.model if model is None else given.model, device=given.device)


def _refuse(name: str, value: object, own: str) -> NoReturn:
    raise CollectionMismatchError(
        f"{name}={value!r} is not the collection's encoder's ({own}): its vectors would differ from those the "
        f"collection stores itself. Leave {name}= out (the actors load the collection's own settings), or open the "
        f"collection with an encoder loaded at {name}={value!r}."
    )


def text_length(encoder: TextEncoder) -> dict[str, int]:
    """The collection encoder's text length (``max_seq_length``) for the actors to load with, where it has one."""
    length = getattr(encoder, "max_seq_length", None)
    return {"max_seq_length": length} if isinstance(length, int) else {}


class Written:
    """The collection's encoder in a write task: its identity, size and whether it normalizes (the collection checks
    the actors' vectors against them); for documents, its token limit, and its tokenizer loaded from ``spec`` on
    first use (on NumPy, no torch, where the model runs there). It encodes nothing: the actors did."""

    def __init__(self, encoder: TextEncoder, spec: EncoderSpec) -> None:
        identity = identity_of(encoder)
        if identity is None:
            raise UnsupportedError(
                f"url= needs an encoder with an identity (encoder.identity), not {type(encoder).__name__}: the write "
                "tasks check the actors' vectors against it; write through this process (url=None)."
            )
        self.identity = identity
        self.dimension = encoder.dimension
        self.normalizes = encoder.normalizes
        self.token_limit: int | None = getattr(encoder, "document_token_limit", None)
        self.spec = dataclasses.replace(spec, device="cpu", precision="fp32")
        self._tokens: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}

    @property
    def document_token_limit(self) -> int:
        if self.token_limit is None:
            raise UnsupportedError("the collection's encoder has no tokenizer (document_token_limit): index texts.")
        return self.token_limit

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        if self._tokens is None:
            try:
                self._tokens = self.spec.load_numpy()
            except UnsupportedError:  # a model NumPy does not run: torch, fp32
                self._tokens = self.spec.load()
        spans: list[tuple[int, int]] = self._tokens.token_spans(text)
        return spans

    def encode_document(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> NoReturn:
        self._refuse()

    def encode_query(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> NoReturn:
        self._refuse()

    def _refuse(self) -> NoReturn:
        raise UnsupportedError(f"a write task stores vectors the actors made ({self.identity}); it encodes none.")
