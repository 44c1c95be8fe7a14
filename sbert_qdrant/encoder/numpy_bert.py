"""NumpyEncoder: a sentence-transformers BERT model (Transformer -> Pooling -> [Normalize]) run in fp32 on NumPy,
importing neither torch nor transformers: the weights read by ``safetensors.numpy``, the tokenizer by ``tokenizers``.

It gives the vectors of ``SentenceEncoder`` at precision "fp32" (within float rounding) and the same ``identity``,
so a collection takes either; it is made for a few short texts at a time (an agent's query, a note), one text per
forward pass. A folder it cannot run (another architecture, a Dense module, trainable pooling, weights other than
fp32/fp16) is refused with an ``UnsupportedError`` naming why, so that callers load ``SentenceEncoder`` instead.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError, UnsupportedError
from ..types import DEFAULT_MODEL
from .folder import pooling_config, pooling_settings, read_json, read_model_config, token_limit, transformer_settings
from .identity import check_truncate_dim, configs_digest, encoder_identity, model_name, parameters_digest, sampled
from .loading import module_entries, resolve_model_folder

logger = logging.getLogger(__name__)

_EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings")
#: One BERT layer's parameters, in the order torch registers them (which the identity's digest follows).
_LAYER = tuple(
    f"{part}.{kind}"
    for part in (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
        "intermediate.dense",
        "output.dense",
        "output.LayerNorm",
    )
    for kind in ("weight", "bias")
)
#: The prompts ``encode_document`` looks for, in sentence-transformers' order (as ``SentenceEncoder``).
_DOCUMENT_PROMPTS = ("document", "passage", "corpus")
_WEIGHT_TYPES = (np.float32, np.float16)


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU with erf (BERT's "gelu"); erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7)."""
    z = np.abs(x) * np.float32(1 / math.sqrt(2.0))
    t = 1 / (1 + np.float32(0.3275911) * z)
    poly = np.float32(1.061405429) * t - np.float32(1.453152027)
    for a in (1.421413741, -0.284496736, 0.254829592):
        poly *= t
        poly += np.float32(a)
    poly *= t
    erf = 1 - poly * np.exp(-z * z)  # erf(|x| / sqrt 2)
    return 0.5 * x * (1 + np.copysign(erf, x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": _gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": lambda x: np.maximum(x, 0),
}


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + eps) * weight + bias


def _pool(mode: str, tokens: np.ndarray) -> np.ndarray:
    """One text's token vectors (tokens, dim), no padding, pooled as ``Pooling`` pools them."""
    if mode == "cls":
        return tokens[0]
    if mode == "max":
        return tokens.max(axis=0)
    if mode == "last_token":
        return tokens[-1]
    if mode == "weighted_mean":
        weights = np.arange(1, len(tokens) + 1, dtype=np.float32)
        return (tokens * weights[:, None]).sum(axis=0) / weights.sum()
    summed = tokens.sum(axis=0)
    return summed / (math.sqrt(len(tokens)) if mode == "mean_sqrt_len" else len(tokens))


class NumpyEncoder:
    """A BERT sentence encoder on NumPy, fp32: ``encode_query`` / ``encode_document`` as ``SentenceEncoder``'s (the
    model's prompts applied the same way), ``dimension``, ``normalizes``, ``identity``, and the tokenizer's
    ``document_token_limit`` / ``token_spans``. Load it with ``NumpyEncoder.load`` (or ``EncoderSpec.load_numpy``)."""

    def __init__(self, folder: Path, name: str, truncate_dim: int | None = None) -> None:
        entries = module_entries(folder) or [("Transformer", folder), ("Pooling", folder)]  # no modules.json: mean
        kinds = [kind for kind, _ in entries]
        if kinds[1:2] != ["Pooling"] or kinds[2:] not in ([], ["Normalize"]):
            raise UnsupportedError(
                f"{folder}: modules {kinds}; NumpyEncoder runs Transformer -> Pooling -> [Normalize] only: load it "
                "with SentenceEncoder."
            )
        transformer = entries[0][1]
        config = read_json(transformer / "config.json")
        self._check_architecture(transformer, config)
        self._config = config
        sbert = transformer_settings(transformer)
        tokenizer_config = transformer / "tokenizer_config.json"
        tokenizer_limit = read_json(tokenizer_config).get("model_max_length") if tokenizer_config.is_file() else None
        positions = config.get("max_position_embeddings")
        self.max_seq_length = token_limit(sbert, tokenizer_limit, positions)
        self.do_lower_case = bool(sbert.get("do_lower_case", False))
        hidden = int(config["hidden_size"])
        if len(entries) > 1 and entries[1][1] != folder:
            self._pooling = pooling_settings(read_json(entries[1][1] / "config.json"))
        else:
            self._pooling = (hidden, ["mean"], True)
        self.normalizes = kinds[-1] == "Normalize"
        self.model_name = name
        model_config = read_model_config(folder)
        prompts: dict[str, str] = model_config.get("prompts", {})
        default = model_config.get("default_prompt_name")
        if prompts and not self._pooling[2]:
            raise UnsupportedError(
                f"{folder}: its Pooling leaves the prompt out (include_prompt=false), which NumpyEncoder does not "
                "do: load it with SentenceEncoder."
            )
        fallback = prompts.get(default, "") if default is not None else ""
        self.query_prompt = prompts.get("query", fallback)
        self.document_prompt = next((prompts[n] for n in _DOCUMENT_PROMPTS if n in prompts), fallback)
        self._types = ["Transformer", "Pooling", *(["Normalize"] if self.normalizes else [])]
        self._weights = self._read_weights(transformer, int(config["num_hidden_layers"]))
        self._tokenizer = self._read_tokenizer(transformer)
        self._specials = int(self._tokenizer.num_special_tokens_to_add(False))
        self.output_dimension = hidden * len(self._pooling[1])
        self.truncate_dim = check_truncate_dim(truncate_dim, self.output_dimension)

    @classmethod
    def load(cls, model: str | os.PathLike[str] | None = None, truncate_dim: int | None = None) -> NumpyEncoder:
        """A folder, a hub id in the local cache or an installed model package, or (None) the default model, named
        as ``SentenceEncoder.load`` names it."""
        check_truncate_dim(truncate_dim)
        folder = resolve_model_folder(model)
        return cls(folder, model_name(model if model is not None else DEFAULT_MODEL), truncate_dim)

    @staticmethod
    def _check_architecture(folder: Path, config: dict[str, Any]) -> None:
        problems = []
        if config.get("model_type") != "bert":
            problems.append(f"model_type {config.get('model_type')!r} (BERT only)")
        if config.get("position_embedding_type", "absolute") != "absolute":
            problems.append(f"position_embedding_type {config.get('position_embedding_type')!r}")
        if config.get("hidden_act") not in _ACTIVATIONS:
            problems.append(f"hidden_act {config.get('hidden_act')!r} (one of {sorted(_ACTIVATIONS)})")
        if config.get("is_decoder") or config.get("add_cross_attention"):
            problems.append("a decoder")
        if not (folder / "tokenizer.json").is_file():
            problems.append("no tokenizer.json (a fast tokenizer's file)")
        if problems:
            raise UnsupportedError(
                f"{folder}: NumpyEncoder cannot run this model ({'; '.join(problems)}); load it with SentenceEncoder."
            )

    def _read_weights(self, folder: Path, layers: int) -> dict[str, np.ndarray]:
        """The BertModel's parameters by name (torch's order), float32, from ``model.safetensors``."""
        from safetensors.numpy import load_file

        path = folder / "model.safetensors"
        if not path.is_file():
            raise UnsupportedError(f"{path} is missing (sharded or pickled weights); load it with SentenceEncoder.")
        try:
            stored = load_file(str(path))
        except (OSError, ValueError, TypeError) as exc:  # bf16 has no NumPy type, among others
            raise UnsupportedError(f"{path}: NumPy cannot read it ({exc}); load it with SentenceEncoder.") from exc
        names = [f"embeddings.{e}.weight" for e in _EMBEDDINGS] + ["embeddings.LayerNorm.weight"]
        names += ["embeddings.LayerNorm.bias"]
        names += [f"encoder.layer.{i}.{p}" for i in range(layers) for p in _LAYER]
        names += ["pooler.dense.weight", "pooler.dense.bias"]
        weights = {}
        for name in names:
            value = stored.get(name, stored.get(f"bert.{name}"))
            if value is None or value.dtype.type not in _WEIGHT_TYPES:
                found = "missing" if value is None else f"{value.dtype}"
                raise UnsupportedError(
                    f"{path}: {name} is {found} (NumpyEncoder reads a BertModel's fp32 or fp16 weights, pooler "
                    "included); load it with SentenceEncoder."
                )
            weights[name] = value.astype(np.float32, copy=False)
        return weights

    @staticmethod
    def _read_tokenizer(folder: Path) -> Any:
        """The folder's ``tokenizer.json``, without the padding and truncation it may carry (``_token_ids`` cuts)."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return tokenizer

    @property
    def dimension(self) -> int:
        """Length of the vectors: ``truncate_dim`` where set, else ``output_dimension``."""
        return self.output_dimension if self.truncate_dim is None else self.truncate_dim

    @property
    def identity(self) -> str:
        """``SentenceEncoder.identity`` of the same model: the same digest of the same weights and module settings."""
        parameters = (
            (f"0.model.{name}", tuple(value.shape), sampled(value.reshape(-1))) for name, value in self._weights.items()
        )
        modules = [
            ("Transformer", {"do_lower_case": self.do_lower_case}),
            ("Pooling", pooling_config(*self._pooling)),
            *([("Normalize", {})] if self.normalizes else []),
        ]
        cut = self.dimension if self.dimension < self.output_dimension else None
        weights = parameters_digest(self._types, parameters)
        return encoder_identity(self.model_name, weights, self.document_prompt, configs_digest(modules), cut)

    @property
    def document_token_limit(self) -> int:
        """Tokens of a text that ``encode_document`` reads whole (``max_seq_length`` less special tokens and prompt)."""
        return self.max_seq_length - (len(self._tokenizer.encode(self.document_prompt + "x").ids) - 1)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans (start, end) of the tokens of ``text``, without special tokens."""
        return [(int(s), int(e)) for s, e in self._tokenizer.encode(text, add_special_tokens=False).offsets]

    def encode_query(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> np.ndarray:
        """Vectors of search queries, shape (len(texts), dimension), with the model's "query" prompt."""
        return self._encode(texts, self.query_prompt)

    def encode_document(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> np.ndarray:
        """Vectors of texts as stored, with the model's document prompt."""
        return self._encode(texts, self.document_prompt)

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts must be a sequence of str; pass [text] for one text.")
        items = [prompt + t for t in texts]
        if self.do_lower_case:
            items = [t.lower() for t in items]
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        rows, cut = self._token_ids(items)
        if cut:
            logger.warning(
                "%d of %d texts were longer than max_seq_length=%d tokens and were truncated.",
                cut,
                len(items),
                self.max_seq_length,
            )
        for row, ids in enumerate(rows):
            tokens = self._forward(ids)
            vector = np.concatenate([_pool(mode, tokens) for mode in self._pooling[1]])[: self.dimension]
            if self.normalizes:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
            out[row] = vector
        return out

    def _token_ids(self, texts: list[str]) -> tuple[list[np.ndarray], int]:
        """Each text's token ids, special tokens included, cut at ``max_seq_length`` as transformers cuts (its
        first tokens kept), and how many were cut."""
        limit = self.max_seq_length - self._specials
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []
        cut = 0
        for encoding in encodings:
            if len(encoding.ids) > limit:
                encoding.truncate(limit)
                cut += 1
        rows = [np.asarray(self._tokenizer.post_process(e).ids, dtype=np.int64) for e in encodings]
        return rows, cut

    def _forward(self, ids: np.ndarray) -> np.ndarray:
        """BertModel's last hidden state for one text's token ids (no padding, so no attention mask)."""
        w, config = self._weights, self._config
        eps = float(config.get("layer_norm_eps", 1e-12))
        heads = int(config["num_attention_heads"])
        act = _ACTIVATIONS[config["hidden_act"]]
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        length, hidden = x.shape
        size = hidden // heads
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def linear(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return h @ w[f"{p}{name}.weight"].T + w[f"{p}{name}.bias"]

            q, k, v = (
                linear(x, f"attention.self.{n}").reshape(length, heads, size).transpose(1, 0, 2)
                for n in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            context = (scores / scores.sum(axis=-1, keepdims=True)) @ v
            attended = linear(context.transpose(1, 0, 2).reshape(length, hidden), "attention.output.dense")
            x = _layer_norm(
                attended + x, w[f"{p}attention.output.LayerNorm.weight"], w[f"{p}attention.output.LayerNorm.bias"], eps
            )
            inner = act(linear(x, "intermediate.dense"))
            x = _layer_norm(
                linear(inner, "output.dense") + x, w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"], eps
            )
        return x

    def __repr__(self) -> str:
        return (
            f"NumpyEncoder({' -> '.join(self._types)}, {self.model_name}, dimension={self.dimension}, "
            f"max_seq_length={self.max_seq_length})"
        )
