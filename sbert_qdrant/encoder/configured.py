"""The configured default encoder: its load options as one value, ``EncoderSpec``, read from the settings
(``SBERT_QDRANT_MODEL``, ``_DEVICE``, ``_PRECISION``, ``_TRUNCATE_DIM``) in this one place, and ``load_encoder``, the
door that collections, the CLI, the MCP server, LangChain, LlamaIndex and the Ray actors all load through.

A new load option is a field of ``EncoderSpec`` and a key of ``LoadOptions`` here, the ``Settings`` field of the same
name, the CLI's flag (``cli/_load.py``) and the option itself in ``SentenceEncoder.load``; everything between
carries the spec whole.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import InvalidArgumentError, UnsupportedError
from ..settings import Settings
from ..types import Precision
from .identity import check_truncate_dim

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .encoder import SentenceEncoder
    from .numpy_bert import NumpyEncoder


class LoadOptions(TypedDict, total=False):
    """The load options a caller may name beside ``model`` (each left out or None: the settings')."""

    device: str | None
    precision: Precision | None
    truncate_dim: int | None


@dataclasses.dataclass(frozen=True)
class EncoderSpec:
    """What ``SentenceEncoder.load`` is given for the configured encoder: plain values, frozen, so that it pickles to
    Ray's actors and every process loads the same model, named the same (half of the encoder's identity).

    model: a folder or hub id as a str (None: the default model); device: None for the best available; precision:
    as ``SentenceEncoder.load``; truncate_dim: vectors cut to their first ``truncate_dim`` values (Matryoshka).
    ``EncoderSpec.of`` reads each field left out from the settings; ``EncoderSpec(...)`` is exactly what it names.
    """

    model: str | None = None
    device: str | None = None
    precision: Precision = "auto"
    truncate_dim: int | None = None

    def __post_init__(self) -> None:
        if self.model is not None and not isinstance(self.model, str):
            raise InvalidArgumentError(f"model={self.model!r} must be a str (a folder or hub id); use EncoderSpec.of.")
        check_truncate_dim(self.truncate_dim)  # its upper bound, the model's dimension, is checked at load

    @classmethod
    def of(
        cls,
        settings: Settings | None = None,
        *,
        model: str | os.PathLike[str] | None = None,
        **options: Unpack[LoadOptions],
    ) -> EncoderSpec:
        """The spec with ``model`` and each option given (not None), else the settings' (None: ``Settings()``, read
        from the environment). A model path is named as a str, the same in every process."""
        unknown = sorted(set(options) - set(LoadOptions.__annotations__))
        if unknown:
            raise InvalidArgumentError(f"unknown load option(s) {unknown}; the options are {cls.names()}.")
        settings = settings if settings is not None else Settings()
        given: dict[str, Any] = {"model": None if model is None else os.fspath(model), **options}
        return cls(
            **{name: given[name] if given.get(name) is not None else getattr(settings, name) for name in cls.names()}
        )

    @classmethod
    def of_encoder(cls, encoder: object) -> EncoderSpec | None:
        """The spec that loads ``encoder`` again as it is (its model folder, precision, "auto" where it chose it,
        ``truncate_dim``; the device left to the loading process), or None for an encoder not loaded from a folder of
        the sentence-transformers format (its identity still tells it apart)."""
        folder = _model_folder(encoder)
        precision = getattr(encoder, "precision", None)
        if folder is None or precision is None:
            return None
        from .loading import resolve_model_folder

        default = folder == resolve_model_folder(None).resolve()
        auto = bool(getattr(encoder, "auto_precision", False))
        return cls(
            model=None if default else str(folder),
            precision="auto" if auto else precision,
            truncate_dim=getattr(encoder, "truncate_dim", None),
        )

    @classmethod
    def names(cls) -> list[str]:
        """The fields, in order: each is a ``Settings`` field and a ``SentenceEncoder.load`` argument of that name."""
        return [spec_field.name for spec_field in dataclasses.fields(cls)]

    def load(self, **options: Any) -> SentenceEncoder:
        """``SentenceEncoder.load`` with this spec; ``options`` are its other arguments (``max_seq_length``, ...)."""
        from .encoder import SentenceEncoder

        return SentenceEncoder.load(**dataclasses.asdict(self), **options)

    def load_numpy(self) -> NumpyEncoder:
        """The same model run on NumPy (``NumpyEncoder``: no torch imported, fp32 on the CPU, the identity
        ``load`` gives), or an ``UnsupportedError`` naming why not: a device other than the CPU, a precision other
        than "fp32" or "auto" (read as fp32), or a model folder it cannot run."""
        from .numpy_bert import NumpyEncoder

        if self.device not in (None, "cpu"):
            raise UnsupportedError(f"device={self.device!r}: NumpyEncoder runs on the CPU; load the model with load().")
        if self.precision not in ("auto", "fp32"):
            raise UnsupportedError(
                f"precision={self.precision!r}: NumpyEncoder computes in fp32; load the model with load()."
            )
        return NumpyEncoder.load(self.model, truncate_dim=self.truncate_dim)


def _model_folder(encoder: object) -> Path | None:
    """The sentence-transformers folder a torch encoder was loaded from (its transformer's ``name_or_path``, or the
    folder above it where the transformer is a module of its own), or None."""
    transformer = getattr(encoder, "transformer", None)
    named = getattr(getattr(getattr(transformer, "model", None), "config", None), "name_or_path", None)
    if not isinstance(named, str) or not named:
        return None
    folder = Path(named).resolve()
    for candidate in (folder, folder.parent):
        if (candidate / "modules.json").is_file():
            return candidate
    return None


def load_encoder(
    settings: Settings | None = None,
    *,
    model: str | os.PathLike[str] | None = None,
    device: str | None = None,
    precision: Precision | None = None,
    truncate_dim: int | None = None,
    **options: Any,
) -> SentenceEncoder:
    """The configured default encoder: ``model``, ``device``, ``precision`` and ``truncate_dim`` where given, else
    ``settings``' (None: ``Settings()``, from ``SBERT_QDRANT_MODEL`` / ``_DEVICE`` / ``_PRECISION`` /
    ``_TRUNCATE_DIM``), else the default model on the best device at "auto" precision, full-length vectors.
    ``options`` go to ``SentenceEncoder.load`` (``max_seq_length``, ...)."""
    spec = EncoderSpec.of(settings, model=model, device=device, precision=precision, truncate_dim=truncate_dim)
    return spec.load(**options)
