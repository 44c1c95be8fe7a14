"""The transformer module: tokenizer + Hugging Face model -> token vectors."""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, overload

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as transformers_logging

from ..errors import InvalidArgumentError, ModelLoadError
from .base import EncoderModule
from .batching import host_tensor
from .features import Features
from .folder import SBERT_CONFIG_FILE, token_limit, transformer_settings
from .packed import packed_tokens, reference_attention, varlen_attention
from .tokens import TokenizerSpec, TokenRows, rust_tokenizer, spec_of, token_rows

logger = logging.getLogger(__name__)


TqdmHook = Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]


class _QuietBars:
    """Holds transformers' tqdm hook while any load or save runs, and gives the one it found back after the last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._previous: TqdmHook | None = None

    def _silent(self, factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        kwargs = {**kwargs, "disable": True}
        return self._previous(factory, args, kwargs) if self._previous is not None else factory(*args, **kwargs)

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._previous = transformers_logging.set_tqdm_hook(self._silent)
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    transformers_logging.set_tqdm_hook(self._previous)
                    self._previous = None


_quiet_bars = _QuietBars()


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' own progress bars ("Loading weights", "Writing model shards") off inside, unless this package's
    logger is at INFO (as ``show_progress_bar=None`` reads it): a load takes moments, and its bar would land between a
    command's own lines. Downloads from the hub keep their bars."""
    if logger.isEnabledFor(logging.INFO):
        yield
        return
    with _quiet_bars():
        yield


class Transformer(EncoderModule):
    """Runs a Hugging Face encoder; outputs ``token_embeddings`` (and ``all_layer_embeddings`` on request)."""

    module_type: ClassVar[str] = "sentence_transformers.models.Transformer"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_seq_length: int | None = None,
        do_lower_case: bool = False,
    ) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.do_lower_case = do_lower_case
        self.output_hidden_states = False
        self.position_limit = int(getattr(model.config, "max_position_embeddings", 0) or 10**9)
        self.max_seq_length = self._checked_length(max_seq_length or min(self.position_limit, 512))
        self._spec: TokenizerSpec | None = None

    def _checked_length(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= self.position_limit:
            raise InvalidArgumentError(
                f"max_seq_length={value!r} must be an integer in 2..{self.position_limit} "
                "(the model's max_position_embeddings)."
            )
        return value

    def set_max_seq_length(self, value: int) -> None:
        """Change the token limit; longer texts are truncated (and counted)."""
        self.max_seq_length = self._checked_length(value)

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    def tokenize(self, texts: list[str]) -> tuple[list[list[int]], int]:
        """Token ids per text (special tokens included, cut at ``max_seq_length``) and how many were cut."""
        rows, cut = self.token_rows(texts)
        return rows.tolist(), cut

    def token_rows(self, texts: list[str]) -> tuple[TokenRows, int]:
        """``tokenize`` as ``TokenRows``: each text tokenized once, by the Rust tokenizer's batch call where the
        tokenizer is a fast one (``tokens.token_rows``)."""
        spec = self.token_spec()
        if spec is None:
            return self._slow_rows(texts)
        with rust_tokenizer(spec) as tokenizer:
            return token_rows(tokenizer, spec, texts)

    def token_spec(self) -> TokenizerSpec | None:
        """How this module tokenizes, for a worker process (None: not a fast tokenizer)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:
            return None
        if self._spec is None or self._spec.limit != self.max_seq_length:
            self._spec = spec_of(backend, self.max_seq_length, self.do_lower_case)
        return self._spec

    def _slow_rows(self, texts: list[str]) -> tuple[TokenRows, int]:
        """``token_rows`` with a Python tokenizer: one call one token over the limit, the cut ones again at it."""
        limit = self.max_seq_length
        whole = [t.lower() for t in texts] if self.do_lower_case else list(texts)
        rows = self._ids(whole, limit + 1)
        cut = [i for i, row in enumerate(rows) if len(row) > limit]
        for i, row in zip(cut, self._ids([whole[i] for i in cut], limit), strict=True):
            rows[i] = row
        return TokenRows.from_lists(rows), len(cut)

    def _ids(self, texts: list[str], limit: int) -> list[list[int]]:
        if not texts:
            return []
        encoded = self.tokenizer(
            texts, truncation=True, max_length=limit, return_attention_mask=False, return_token_type_ids=False
        )
        return list(encoded["input_ids"])

    def prompt_length(self, prompt: str) -> int:
        """How many leading tokens ``prompt`` takes before a text: its tokens without a trailing special token."""
        ids = self.tokenize([prompt])[0][0]
        return len(ids) - 1 if ids and ids[-1] in self.tokenizer.all_special_ids else len(ids)

    def collate(self, rows: list[list[int]], device: torch.device) -> Features:
        """Right-pad token id rows into ``input_ids`` and ``attention_mask`` tensors on ``device``."""
        return {name: value.to(device) for name, value in self.collate_host(rows, pin=False).items()}

    def collate_host(self, rows: list[list[int]], pin: bool) -> Features:
        """``collate`` on the host, in pinned memory where ``pin`` (for non-blocking copies to a GPU)."""
        return self.collate_rows(TokenRows.from_lists(rows), np.arange(len(rows)), pin)

    def collate_rows(self, rows: TokenRows, index: np.ndarray, pin: bool) -> Features:
        """Texts ``index`` of ``rows`` right-padded into ``input_ids`` and ``attention_mask`` host tensors."""
        input_ids, mask = rows.padded(index, self.tokenizer.pad_token_id or 0)
        return {"input_ids": host_tensor(input_ids, pin), "attention_mask": host_tensor(mask, pin)}

    def forward(self, features: Features) -> Features:
        if "cu_seqlens" in features:  # a packed batch (packed.pack): unpadded attention
            attention = varlen_attention if features["input_ids"].is_cuda else reference_attention
            features["token_embeddings"] = packed_tokens(self.model, features, attention)
            return features
        out = self.model(
            input_ids=features["input_ids"],
            attention_mask=self._attention_mask(features["attention_mask"]),
            output_hidden_states=self.output_hidden_states,
            return_dict=True,
        )
        features["token_embeddings"] = out.last_hidden_state
        if self.output_hidden_states:
            features["all_layer_embeddings"] = out.hidden_states
        return features

    def _attention_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The padding mask as the model's attention takes it. Where the model builds its mask with transformers'
        ``masking_utils`` (which reads a 2-D mask's ``.all()`` as a Python bool: a device sync per forward), a
        (batch, 1, 1, length) mask it passes on as it is: boolean for SDPA, additive for eager attention."""
        implementation = getattr(self.model.config, "_attn_implementation", None)
        if implementation not in ("sdpa", "eager") or not _builds_masks(type(self.model).__module__):
            return mask
        keys = mask[:, None, None, :].bool()
        if implementation == "sdpa":
            return keys
        return (~keys).to(self.model.dtype) * torch.finfo(self.model.dtype).min

    def config(self) -> dict[str, Any]:
        return {"max_seq_length": self.max_seq_length, "do_lower_case": self.do_lower_case}

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        with quiet_transformers():
            self.model.save_pretrained(str(folder), safe_serialization=True)
            self.tokenizer.save_pretrained(str(folder))
        (folder / SBERT_CONFIG_FILE).write_text(json.dumps(self.config(), indent=2) + "\n")

    @classmethod
    def load(cls, folder: Path, trust_remote_code: bool = False) -> Transformer:
        require_safetensors(folder)
        sbert_config = transformer_settings(folder)
        try:
            with quiet_transformers():
                tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
                model = AutoModel.from_pretrained(
                    str(folder), trust_remote_code=trust_remote_code, use_safetensors=True
                )
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"cannot load the transformer in {folder}: {exc}") from exc
        positions = getattr(model.config, "max_position_embeddings", None)
        max_seq_length = token_limit(sbert_config, tokenizer.model_max_length, positions)
        return cls(
            model.eval(),
            tokenizer,
            max_seq_length=max_seq_length,
            do_lower_case=bool(sbert_config.get("do_lower_case", False)),
        )


@functools.cache
def _builds_masks(module: str) -> bool:
    """Whether a model class's ``module`` makes its attention mask with ``create_bidirectional_mask`` (which passes
    a prepared 4-D mask through unchanged)."""
    return hasattr(sys.modules.get(module), "create_bidirectional_mask")


def require_safetensors(folder: Path) -> None:
    """Refuse a model folder without safetensors weights (pickle weights are never loaded)."""
    if not any(folder.glob("*.safetensors")):
        pickled = sorted(p.name for p in folder.glob("*.bin"))
        found = f"only pickle weights {pickled}" if pickled else "no weights"
        raise ModelLoadError(
            f"{folder} holds {found}; sbert-qdrant loads safetensors only. Convert the checkpoint with "
            "`transformers` (save_pretrained(..., safe_serialization=True)) from a source you trust."
        )


class TokenLimit:
    """``max_seq_length`` of an object holding a ``transformer``: read from it and set on it (read on the class, the
    descriptor itself, as a property is)."""

    @overload
    def __get__(self, owner: None, kind: type | None = None) -> TokenLimit: ...

    @overload
    def __get__(self, owner: object, kind: type | None = None) -> int: ...

    def __get__(self, owner: Any, kind: type | None = None) -> int | TokenLimit:
        return self if owner is None else int(owner.transformer.max_seq_length)

    def __set__(self, owner: Any, value: int) -> None:
        owner.transformer.set_max_seq_length(value)
