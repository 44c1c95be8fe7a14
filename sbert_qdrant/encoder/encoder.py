"""SentenceEncoder: Transformer -> Pooling -> [Dense] -> [Normalize], with batched inference."""

from __future__ import annotations

import functools
import inspect
import logging
import operator
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import InvalidArgumentError
from ..types import Precision
from .base import EncoderModule
from .batching import CPU_BATCH, DEFAULT_BATCH_TOKENS, Chunk, batch_cap, encode_pipelined
from .features import Features
from .feed import TokenFeed
from .folder import read_model_config, write_model_config
from .identity import check_truncate_dim, encoder_identity, model_name, modules_digest, weights_digest
from .int8 import Int8Plan, checked_calibration, exact_grade_int8
from .int8.calibration import exact_grade_ranges
from .int8.distilled import DistilledInt8
from .layers import Dense, Normalize, l2_normalize
from .loading import DEFAULT_MODEL, load_modules, resolve_model_folder, save_modules
from .packed import pack, packed_or_padded, packs
from .pooling import AttentionPooling, Pooling
from .runtime import checked_device, length_sorted_batches, run_batches, set_up
from .similarity import similarity, similarity_pairwise
from .texts import checked_texts, warn_truncated
from .transformer import TokenLimit, Transformer

logger = logging.getLogger(__name__)

#: Prompt names ``encode_document`` looks for, in sentence-transformers' order.
_DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")
_Encode = TypeVar("_Encode", bound=Callable[..., Any])


def _with_prompt(encode: _Encode, name: str, prompt_of: Callable[[Any], str | None], doc: str) -> _Encode:
    """``encode`` with a role's prompt (``prompt_of(encoder)``) unless the call names one (``prompt_name`` or
    ``prompt``): ``encode_query`` and ``encode_document``, written once with ``encode``'s signature."""
    signature = inspect.signature(encode)

    @functools.wraps(encode)
    def encode_as(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        encoder = bound.arguments["self"]
        if bound.arguments.get("prompt_name") is None and bound.arguments.get("prompt") is None:
            bound.arguments["prompt_name"] = prompt_of(encoder)
        return encoder.encode(*bound.args[1:], **bound.kwargs)

    encode_as.__doc__, encode_as.__name__ = doc, name
    encode_as.__qualname__ = encode.__qualname__.replace("encode", name)
    return cast(_Encode, encode_as)


class SentenceEncoder(nn.Module):
    """A Sentence-BERT encoder: one vector per text, comparable by cosine.

    precision: "auto" (``load``'s default) runs the fastest exact-grade precision of the device: fp16 on a CUDA GPU
    with tensor cores; on a CPU, bf16 where it has native bf16, else fp32, and static int8 only where the model's
    shipped int8 calibration passed the exact-grade rule on this CPU's int8 instructions (the default model's does
    not: docs/int8.md); "fp32", "bf16", "fp16" (CUDA/MPS), "int8" (CPU) as named. Modules you assemble yourself
    start in fp32, ready to train.
    prompts: prompt name -> text put in front of every text encoded with that name (e.g. ``{"query": "query: "}``).
    default_prompt_name: the prompt ``encode`` applies when given neither ``prompt`` nor ``prompt_name``.
    calibration_texts: with precision "int8", a few hundred of your own texts (the first 512 are used) to calibrate
    static int8 on; cached per model, so later loads need none. Without them int8 is static all the same: the
    cached calibration, else the one shipped for the model (the default model's), else a calibration on the first
    texts it encodes (fp32 until then). Where static int8 does not run, int8 is dynamic (the reason is logged).
    int8_distilled: weights distilled for static int8 and their ranges (``sbert-qdrant quantize``; ``load`` reads
    them from a folder that has them): precision "int8" runs them, fp32 and bf16 the original weights.
    truncate_dim: keep the first ``truncate_dim`` values of every vector (a Matryoshka model's smaller vectors), as
    sentence-transformers does; ``dimension`` and ``identity`` say so. Unlike sentence-transformers, a normalizing
    model's cut vectors are normalized again, so they keep unit length and dot product stays cosine.
    """

    def __init__(
        self,
        modules: Sequence[EncoderModule],
        device: str | torch.device | None = None,
        precision: Precision = "fp32",
        *,
        prompts: Mapping[str, str] | None = None,
        default_prompt_name: str | None = None,
        calibration_texts: Sequence[str] | None = None,
        truncate_dim: int | None = None,
        int8_distilled: DistilledInt8 | None = None,
    ) -> None:
        super().__init__()
        if not modules or not isinstance(modules[0], Transformer):
            raise InvalidArgumentError("an encoder's first module must be a Transformer.")
        self.prompts = _checked_prompts(prompts, default_prompt_name)
        self.default_prompt_name = default_prompt_name
        #: Other keys of the loaded config_sentence_transformers.json, written back by ``save``.
        self._model_config: dict[str, Any] = {}
        target = checked_device(device, precision)
        self.module_list = nn.ModuleList(modules)
        self.transformer.output_hidden_states = any(getattr(m, "needs_all_layers", False) for m in modules)
        #: The model's short name (``load`` sets it), the first half of ``identity``.
        self.model_name = "custom"
        self._weights = weights_digest(self.module_list)  # as fp32, before a cast or quantization
        texts = checked_calibration(
            calibration_texts, precision, "calibration_texts", checked_texts, "texts like those you will encode"
        )
        self.device = target
        self.precision, self._int8 = set_up(
            self,
            self.transformer.model,
            target,
            precision,
            lambda: (
                exact_grade_int8(self._weights) if int8_distilled is None else exact_grade_ranges(int8_distilled.ranges)
            ),
            lambda: Int8Plan(
                self.transformer.model,
                self._weights,
                texts,
                self._calibration_batches,
                self.transformer,
                None if int8_distilled is None else int8_distilled.ranges,
                None if int8_distilled is None else int8_distilled.weights_here(),
            ),
        )
        #: Whether ``precision`` was chosen by "auto".
        self.auto_precision = precision == "auto"
        #: Texts cut at ``max_seq_length`` over this encoder's lifetime (each ``encode`` also warns).
        self.truncated_count = 0
        self.truncate_dim = truncate_dim
        #: On a GPU: padded tokens per batch (texts per batch also at most ``batch_size``, where one is given).
        self.batch_tokens = DEFAULT_BATCH_TOKENS
        #: On a CUDA GPU in fp16 / bf16: BERT models run unpadded (packed texts, flash varlen attention) where torch
        #: offers it; False runs them padded (set by the encoder itself after a packed batch fails, with a warning).
        self.unpadded = True
        self.eval()

    @classmethod
    def load(
        cls,
        model: str | os.PathLike[str] | None = None,
        device: str | torch.device | None = None,
        precision: Precision = "auto",
        max_seq_length: int | None = None,
        trust_remote_code: bool = False,
        calibration_texts: Sequence[str] | None = None,
        truncate_dim: int | None = None,
    ) -> SentenceEncoder:
        """Load a folder, a hub id (``sentence-transformers/all-MiniLM-L6-v2``) or, with None, the default model."""
        checked_device(device, precision)
        check_truncate_dim(truncate_dim)
        checked_calibration(
            calibration_texts, precision, "calibration_texts", checked_texts, "texts like those you will encode"
        )
        folder = resolve_model_folder(model)
        modules = load_modules(folder, trust_remote_code=trust_remote_code)
        config = read_model_config(folder)
        prompts, default_prompt_name = config.pop("prompts", {}), config.pop("default_prompt_name", None)
        if max_seq_length is not None:  # before a calibration, which runs at this limit
            cast(Transformer, modules[0]).set_max_seq_length(max_seq_length)
        encoder = cls(
            modules,
            device=device,
            precision=precision,
            prompts=prompts,
            default_prompt_name=default_prompt_name,
            calibration_texts=calibration_texts,
            truncate_dim=truncate_dim,
            int8_distilled=DistilledInt8.read(folder),
        )
        encoder._model_config = config
        encoder.model_name = model_name(model if model is not None else DEFAULT_MODEL)
        return encoder

    def _calibration_batches(self, texts: Sequence[str]) -> Iterator[Features]:
        ids, _ = self.transformer.tokenize(list(texts))
        for index in length_sorted_batches([len(row) for row in ids], CPU_BATCH):
            yield self.transformer.collate([ids[i] for i in index], torch.device("cpu"))

    @property
    def int8_mode(self) -> Literal["static", "dynamic"] | None:
        """ "static" or "dynamic" at precision "int8" (static also while waiting for texts to calibrate on)."""
        return None if self._int8 is None else self._int8.mode

    @property
    def pipeline(self) -> nn.ModuleList:
        """Deprecated name of ``module_list`` (the modules, Transformer first)."""
        warnings.warn(
            "SentenceEncoder.pipeline is deprecated; use SentenceEncoder.module_list (the same modules).",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.module_list

    @property
    def transformer(self) -> Transformer:
        return cast(Transformer, self.module_list[0])  # checked in __init__

    max_seq_length = TokenLimit()

    @property
    def truncate_dim(self) -> int | None:
        """The length ``encode`` cuts vectors to (Matryoshka); None: the model's full ``output_dimension``."""
        return self._truncate_dim

    @truncate_dim.setter
    def truncate_dim(self, value: int | None) -> None:
        self._truncate_dim = check_truncate_dim(value, self.output_dimension)

    @property
    def output_dimension(self) -> int:
        """Length of the model's vectors before any ``truncate_dim`` cut."""
        size = self.transformer.dimension
        for module in self.module_list[1:]:
            if isinstance(module, (Pooling, Dense, AttentionPooling)):
                size = module.output_dimension
        return size

    @property
    def dimension(self) -> int:
        """Length of the vectors ``encode`` returns: ``truncate_dim`` where set, else ``output_dimension``."""
        return self.output_dimension if self._truncate_dim is None else self._truncate_dim

    @property
    def identity(self) -> str:
        """``name@fingerprint`` of what decides the stored vectors (weights, modules and their settings such as the
        pooling mode, document prompt, a ``truncate_dim`` cut, shown as ``name[:128]``), the same at any precision and
        device: a collection records it and refuses vectors or searches of another encoder."""
        weights = weights_digest(self.module_list) if self.precision == "fp32" else self._weights  # fp32: maybe trained
        cut = self.dimension if self.dimension < self.output_dimension else None
        return encoder_identity(self.model_name, weights, self.document_prompt, modules_digest(self.module_list), cut)

    @property
    def normalizes(self) -> bool:
        """Whether output vectors have unit length (then dot product equals cosine)."""
        return isinstance(self.module_list[-1], Normalize)

    def forward(self, features: Features) -> Features:
        """Run every module on a collated batch (used for training)."""
        for module in self.module_list:
            features = module(features)
        return features

    def tokenize(self, texts: Sequence[str]) -> Features:
        """Collate texts into model inputs on this encoder's device (for training)."""
        ids, _ = self.transformer.tokenize(checked_texts(texts))
        return self.transformer.collate(ids, self.device)

    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int | None = None,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to: Literal["numpy", "torch"] = "numpy",
        prompt_name: str | None = None,
        prompt: str | None = None,
        truncate_dim: int | None = None,
        **st_names: Any,
    ) -> np.ndarray | torch.Tensor:
        """Embed texts into a float32 array of shape ``(len(texts), dimension)``, in input order.

        batch_size: the most texts per batch; None: 32 on a CPU, and on a GPU as many as ``batch_tokens`` (padded
        tokens per batch) lets in.
        normalize: None keeps the model's own output (a normalizing model's vectors unit length, cut or not); True
        L2-normalises; False skips a final Normalize.
        show_progress_bar: None shows it when this module's logger is at INFO.
        prompt_name: one of ``prompts``, whose text goes in front of every text; None: ``default_prompt_name``.
        prompt: a prompt text of your own; it wins over ``prompt_name``.
        truncate_dim: this call's vectors cut to their first ``truncate_dim`` values (up to ``output_dimension``);
        None: the encoder's ``truncate_dim``.
        A single string gives a 1-D vector. sentence-transformers' names are taken with its meaning:
        ``normalize_embeddings=True`` (``normalize=True``; False keeps the model's output), ``convert_to_tensor=True``
        (``convert_to="torch"``), ``convert_to_numpy=True``; any other name is refused naming the fix.
        """
        normalize, convert_to = _sentence_transformers_names(normalize, convert_to, st_names)
        single = isinstance(texts, str)
        items = checked_texts([texts] if single else texts)
        cap = batch_cap(batch_size, self.device)
        if convert_to not in ("numpy", "torch"):
            raise InvalidArgumentError(f"convert_to={convert_to!r} must be 'numpy' or 'torch'.")
        prefix = self._resolve_prompt(prompt, prompt_name)
        width = self.dimension if truncate_dim is None else check_truncate_dim(truncate_dim, self.output_dimension)
        out = np.empty((len(items), width), dtype=np.float32)
        if items:
            with self._int8.first_texts([prefix + t for t in items]) if self._int8 else nullcontext():
                self._encode_into(out, items, cap, normalize, show_progress_bar, prefix)
        result = out[0] if single else out
        return torch.from_numpy(result) if convert_to == "torch" else result

    def _document_prompt_name(self) -> str | None:
        return next((name for name in _DOCUMENT_PROMPT_NAMES if name in self.prompts), None)

    def _query_prompt_name(self) -> str | None:
        return "query" if "query" in self.prompts else None

    encode_query = _with_prompt(
        encode,
        "encode_query",
        _query_prompt_name,
        '``encode`` for search queries: with the model\'s "query" prompt unless told otherwise.',
    )
    encode_document = _with_prompt(
        encode,
        "encode_document",
        _document_prompt_name,
        '``encode`` for searched documents: with the first of the model\'s "document", "passage", "corpus" prompts.',
    )

    @property
    def document_prompt(self) -> str:
        """The text ``encode_document`` puts in front of every text ("" for none): it counts towards the token limit."""
        return self._resolve_prompt(None, self._document_prompt_name())

    @property
    def document_token_limit(self) -> int:
        """Tokens of a text that ``encode_document`` reads whole: ``max_seq_length`` less the special tokens and
        the document prompt."""
        overhead = len(self.transformer.tokenizer(self.document_prompt + "x", verbose=False)["input_ids"]) - 1
        return self.max_seq_length - overhead

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans (start, end) of the tokens of ``text``, without special tokens."""
        encoded = self.transformer.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [(int(start), int(end)) for start, end in encoded["offset_mapping"]]

    def similarity(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """Every pair's cosine, shape (n, m), as ``SentenceTransformer.similarity`` (``similarity_fn_name`` cosine)."""
        return similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """Row i against row i, shape (n,), as ``SentenceTransformer.similarity_pairwise``."""
        return similarity_pairwise(embeddings1, embeddings2)

    def _resolve_prompt(self, prompt: str | None, prompt_name: str | None) -> str:
        """The text to put in front of every text ("" for none), as sentence-transformers resolves it."""
        if prompt is not None:
            if not isinstance(prompt, str):
                raise InvalidArgumentError(f"prompt={prompt!r} must be a str (or None).")
            if prompt_name is not None:
                logger.warning("both prompt and prompt_name=%r were given; using prompt.", prompt_name)
            return prompt
        name = prompt_name if prompt_name is not None else self.default_prompt_name
        if name is None:
            return ""
        if name not in self.prompts:
            argument = "prompt_name" if prompt_name is not None else "default_prompt_name"
            raise InvalidArgumentError(
                f"{argument}={name!r} is not one of this model's prompts {sorted(self.prompts)}; "
                "use one of those, add it to encoder.prompts, or pass prompt='...' instead."
            )
        return self.prompts[name]

    def _encode_into(
        self,
        out: np.ndarray,
        texts: list[str],
        batch_size: int | None,
        normalize: bool | None,
        show_progress_bar: bool | None,
        prompt: str,
    ) -> None:
        # As in sentence-transformers: the prompt is plain text in front, counted in max_seq_length.
        inputs = [prompt + text for text in texts] if prompt else texts
        prompt_length = torch.tensor([self.transformer.prompt_length(prompt)]) if prompt else None
        width = out.shape[1]
        cut = width < self.output_dimension
        pipeline = list(self.module_list)
        if self.normalizes and (normalize is False or cut):
            pipeline = pipeline[:-1]  # a cut vector is normalized after the cut, below
        unit = normalize is True or (cut and normalize is None and self.normalizes)
        if show_progress_bar is None:
            show_progress_bar = logger.isEnabledFor(logging.INFO)

        def run(features: Features) -> torch.Tensor:
            if prompt_length is not None:
                features["prompt_length"] = prompt_length
            for module in pipeline:
                features = module(features)
            vectors = features["sentence_embedding"].float()[:, :width]
            return l2_normalize(vectors) if unit else vectors

        transformer = self.transformer
        if self.device.type == "cpu":
            rows, truncated = transformer.token_rows(inputs)
            self._warn_truncated(truncated, len(texts))

            def run_cpu(index: np.ndarray) -> None:
                out[index] = run(transformer.collate_rows(rows, index, pin=False)).numpy()

            batches = length_sorted_batches(rows.lengths, batch_size or CPU_BATCH)
            run_batches(batches, run_cpu, self.device, show_progress_bar, "Encoding")
            return
        packed = self.unpadded and packs(
            transformer.model, self.device, transformer.model.dtype, transformer.output_hidden_states
        )
        pad_id = transformer.tokenizer.pad_token_id or 0

        def compute(features: Features) -> torch.Tensor:
            return packed_or_padded(run, features, pad_id, self._stop_packing)

        collate = pack if packed else transformer.collate_rows
        lengths = operator.attrgetter("lengths")
        feed = TokenFeed(inputs, transformer.token_rows, lengths, collate, pin=self.device.type == "cuda")
        with tqdm(total=len(texts), desc="Encoding", unit="text", disable=not show_progress_bar) as bar:

            def land(chunk: Chunk, index: np.ndarray, rows: np.ndarray) -> None:
                out[chunk.start + index] = rows
                bar.update(len(index))

            encode_pipelined(feed.chunks(), feed.collate, compute, land, self.device, self.batch_tokens, batch_size)
        self._warn_truncated(feed.truncated, len(texts))

    def _stop_packing(self, exc: Exception) -> None:
        """Run padded from now on, saying why once."""
        if self.unpadded:
            logger.warning(
                "unpadded (packed) attention failed on %s (%s: %s); this encoder runs padded from now on.",
                self.device,
                type(exc).__name__,
                exc,
            )
        self.unpadded = False

    def _warn_truncated(self, cut: int, count: int) -> None:
        warn_truncated(self, cut, count, "texts", "encoder", logger)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the sentence-transformers folder format (safetensors), loadable by both libraries."""
        if self.precision == "int8":
            chosen = " (chosen by precision='auto')" if self.auto_precision else ""
            raise InvalidArgumentError(
                f"an int8-quantized encoder{chosen} cannot be saved; load the model with precision='fp32' and save "
                "that."
            )
        prompts = _checked_prompts(self.prompts, self.default_prompt_name)
        folder = Path(path)
        save_modules(cast(list[EncoderModule], list(self.module_list)), folder)
        # A loaded model's own settings (similarity, version, ...) are kept; the rest is what this encoder does.
        own = {"model_type": "SentenceTransformer", "prompts": prompts, "default_prompt_name": self.default_prompt_name}
        write_model_config(folder, {"similarity_fn_name": "cosine"} | self._model_config | own)

    def __repr__(self) -> str:
        names = " -> ".join(type(m).__name__ for m in self.module_list)
        cut = f" (cut from {self.output_dimension})" if self.dimension < self.output_dimension else ""
        return (
            f"SentenceEncoder({names}, dimension={self.dimension}{cut}, max_seq_length={self.max_seq_length}, "
            f"device={self.device}, precision={self.precision!r}{' (auto)' if self.auto_precision else ''}"
            f"{f' ({self.int8_mode})' if self.int8_mode else ''})"
        )


def _checked_prompts(prompts: object, default_prompt_name: object) -> dict[str, str]:
    """A copy of ``prompts`` (name -> text, all str) in which ``default_prompt_name`` (unless None) is a name."""
    if prompts is None:
        prompts = {}
    if not isinstance(prompts, Mapping):
        raise InvalidArgumentError(f"prompts={prompts!r} must be a dict of prompt name -> prompt text.")
    for name, text in prompts.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise InvalidArgumentError(f"prompts[{name!r}]={text!r}: prompt names and texts must be str.")
    if default_prompt_name is not None and default_prompt_name not in prompts:
        raise InvalidArgumentError(
            f"default_prompt_name={default_prompt_name!r} is not one of the prompts {sorted(prompts)}; "
            "add it to prompts or pass None."
        )
    return dict(prompts)


def _sentence_transformers_names(
    normalize: bool | None, convert_to: str, given: dict[str, Any]
) -> tuple[bool | None, Literal["numpy", "torch"]]:
    """``normalize`` and ``convert_to`` with sentence-transformers' names of them folded in; others refused."""
    to = cast(Literal["numpy", "torch"], convert_to)
    for name, value in given.items():
        if name == "normalize_embeddings" and isinstance(value, bool):
            if normalize is not None:
                raise InvalidArgumentError("pass normalize= or normalize_embeddings=, not both.")
            normalize = True if value else None  # sentence-transformers' False: the model's own output
        elif name == "convert_to_tensor" and isinstance(value, bool):
            to = "torch" if value else to
        elif name == "convert_to_numpy" and value is True:
            continue
        elif name == "precision":
            raise InvalidArgumentError(
                f"encode(precision={value!r}) is sentence-transformers' output quantization; here precision= is how "
                "the model computes (SentenceEncoder.load(precision=...)). Quantize the vectors encode returns with "
                f"sbert_qdrant.quantize_embeddings(vectors, to={value!r})."
            )
        else:
            raise InvalidArgumentError(
                f"encode() has no argument {name}={value!r}; its arguments: batch_size, normalize "
                "(normalize_embeddings=True), show_progress_bar, convert_to='numpy' or 'torch' "
                "(convert_to_tensor=True), prompt_name, prompt."
            )
    return normalize, to
