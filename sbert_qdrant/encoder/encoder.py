"""SentenceEncoder: Transformer -> Pooling -> [Dense] -> [Normalize], with batched inference."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, cast

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import InvalidArgumentError, InvalidInputError
from .base import EncoderModule, Features
from .layers import Dense, Normalize, l2_normalize
from .loading import load_modules, resolve_model_folder, save_modules
from .pooling import AttentionPooling, Pooling
from .runtime import Precision, apply_precision, check_precision, length_sorted_batches, resolve_device
from .transformer import Transformer

logger = logging.getLogger(__name__)


class SentenceEncoder(nn.Module):
    """A Sentence-BERT encoder: one vector per text, comparable by cosine."""

    def __init__(
        self,
        modules: Sequence[EncoderModule],
        device: str | torch.device | None = None,
        precision: Precision = "fp32",
    ) -> None:
        super().__init__()
        if not modules or not isinstance(modules[0], Transformer):
            raise InvalidArgumentError("an encoder's first module must be a Transformer.")
        target = resolve_device(device)
        check_precision(precision, target)
        self.pipeline = nn.ModuleList(modules)
        self.transformer.output_hidden_states = any(getattr(m, "needs_all_layers", False) for m in modules)
        self.to(target)
        apply_precision(self.transformer.model, precision)
        self.device = target
        self.precision: Precision = precision
        #: Texts cut at ``max_seq_length`` over this encoder's lifetime (each ``encode`` also warns).
        self.truncated_count = 0
        self.eval()

    @classmethod
    def load(
        cls,
        model: str | os.PathLike[str] | None = None,
        device: str | torch.device | None = None,
        precision: Precision = "fp32",
        max_seq_length: int | None = None,
        trust_remote_code: bool = False,
    ) -> SentenceEncoder:
        """Load a folder, a hub id (``sentence-transformers/all-MiniLM-L6-v2``) or, with None, the default model."""
        check_precision(precision, resolve_device(device))
        modules = load_modules(resolve_model_folder(model), trust_remote_code=trust_remote_code)
        encoder = cls(modules, device=device, precision=precision)
        if max_seq_length is not None:
            encoder.max_seq_length = max_seq_length
        return encoder

    @property
    def transformer(self) -> Transformer:
        return cast(Transformer, self.pipeline[0])  # checked in __init__

    @property
    def max_seq_length(self) -> int:
        return self.transformer.max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self.transformer.set_max_seq_length(value)

    @property
    def dimension(self) -> int:
        """Length of the vectors ``encode`` returns."""
        size = self.transformer.dimension
        for module in self.pipeline[1:]:
            if isinstance(module, (Pooling, Dense, AttentionPooling)):
                size = module.output_dimension
        return size

    @property
    def normalizes(self) -> bool:
        """Whether output vectors have unit length (then dot product equals cosine)."""
        return isinstance(self.pipeline[-1], Normalize)

    def forward(self, features: Features) -> Features:
        """Run every module on a collated batch (used for training)."""
        for module in self.pipeline:
            features = module(features)
        return features

    def tokenize(self, texts: Sequence[str]) -> Features:
        """Collate texts into model inputs on this encoder's device (for training)."""
        ids, _ = self.transformer.tokenize(_checked_texts(texts))
        return self.transformer.collate(ids, self.device)

    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to: Literal["numpy", "torch"] = "numpy",
    ) -> np.ndarray | torch.Tensor:
        """Embed texts into a float32 array of shape ``(len(texts), dimension)``, in input order.

        normalize: None keeps the model's own output; True L2-normalises; False skips a final Normalize.
        show_progress_bar: None shows it when this module's logger is at INFO.
        A single string gives a 1-D vector.
        """
        single = isinstance(texts, str)
        items = _checked_texts([texts] if single else texts)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size={batch_size!r} must be a positive integer.")
        if convert_to not in ("numpy", "torch"):
            raise InvalidArgumentError(f"convert_to={convert_to!r} must be 'numpy' or 'torch'.")
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        if items:
            self._encode_into(out, items, batch_size, normalize, show_progress_bar)
        result = out[0] if single else out
        return torch.from_numpy(result) if convert_to == "torch" else result

    def _encode_into(
        self,
        out: np.ndarray,
        texts: list[str],
        batch_size: int,
        normalize: bool | None,
        show_progress_bar: bool | None,
    ) -> None:
        ids, cut = self.transformer.tokenize(texts)
        if cut:
            self.truncated_count += cut
            logger.warning(
                "%d of %d texts were longer than max_seq_length=%d tokens and were truncated "
                "(%d so far on this encoder).",
                cut,
                len(texts),
                self.max_seq_length,
                self.truncated_count,
            )
        pipeline = list(self.pipeline)
        if normalize is False and self.normalizes:
            pipeline = pipeline[:-1]
        if show_progress_bar is None:
            show_progress_bar = logger.isEnabledFor(logging.INFO)
        batches = length_sorted_batches([len(row) for row in ids], batch_size)
        with torch.inference_mode():
            for index in tqdm(batches, desc="Encoding", unit="batch", disable=not show_progress_bar):
                features = self.transformer.collate([ids[i] for i in index], self.device)
                for module in pipeline:
                    features = module(features)
                vectors = features["sentence_embedding"].float()
                if normalize:
                    vectors = l2_normalize(vectors)
                out[index] = vectors.cpu().numpy()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the sentence-transformers folder format (safetensors), loadable by both libraries."""
        if self.precision == "int8":
            raise InvalidArgumentError(
                "an int8-quantized encoder cannot be saved; load the model with precision='fp32' and save that."
            )
        save_modules(cast(list[EncoderModule], list(self.pipeline)), Path(path))

    def __repr__(self) -> str:
        names = " -> ".join(type(m).__name__ for m in self.pipeline)
        return (
            f"SentenceEncoder({names}, dimension={self.dimension}, max_seq_length={self.max_seq_length}, "
            f"device={self.device}, precision={self.precision!r})"
        )


def _checked_texts(texts: object) -> list[str]:
    """A list of str, or an error naming the first bad item and its index."""
    if texts is None or isinstance(texts, (bytes, dict)) or not isinstance(texts, Sequence):
        raise InvalidInputError(f"texts must be a str or a sequence of str, not {type(texts).__name__}.")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(
                f"texts[{i}] is {type(text).__name__} ({text!r:.60}), not str; pass text, e.g. str(value)."
            )
    return items
