"""CrossEncoder: a transformer reading both texts of a pair at once (``[CLS] a [SEP] b [SEP]``) into a score."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import InvalidArgumentError, InvalidInputError
from ..types import Precision
from .batching import CPU_BATCH, DEFAULT_BATCH_TOKENS, Chunk, batch_cap, encode_pipelined, host_tensor
from .cross_loading import (
    RERANK_EXACT_GRADE_LOSS,
    Activation,
    default_activation,
    new_classifier,
    ranges_file,
    read_cross_encoder,
    transformer_folder,
    write_cross_encoder,
)
from .cross_scoring import (
    ACTIVATION_FUNCTIONS,
    checked_activation,
    checked_pairs,
    cpu_batch_rows,
    first_token_only,
    scoring,
)
from .features import Features
from .feed import TokenFeed, row_lengths
from .identity import weights_digest
from .int8 import Int8Plan, checked_calibration
from .int8.calibration import ActivationRanges, int8_isa
from .loading import resolve_model_folder
from .runtime import checked_device, length_sorted_batches, resolve_device, run_batches, set_up
from .texts import checked_texts, warn_truncated
from .transformer import TokenLimit, Transformer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _PairRow:
    """A pair's token ids and segment ids (None where the model takes none)."""

    ids: list[int]
    types: list[int] | None

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class RankedText:
    """One text of :meth:`CrossEncoder.rank`: its position in the input, its score and the text."""

    index: int
    score: float
    text: str


class CrossEncoder(nn.Module):
    """A cross-encoder: one score (or ``num_labels`` class logits) per text pair, both texts read together.

    More accurate than comparing two SentenceEncoder vectors, but one transformer pass per *pair*: use it to re-rank
    the few best hits of a bi-encoder search, not to search. ``activation`` turns logits into scores in ``predict``;
    None picks sentence-transformers' default (sigmoid for one label, the raw logits for several). ``precision`` as in
    :class:`SentenceEncoder`: "auto" is ``load``'s default; a new cross-encoder starts in fp32, ready to train.
    """

    def __init__(
        self,
        transformer: Transformer,
        device: str | torch.device | None = None,
        precision: Precision = "fp32",
        activation: Activation | None = None,
        calibration_pairs: Sequence[tuple[str, str]] | None = None,
        int8_ranges: ActivationRanges | None = None,
    ) -> None:
        super().__init__()
        if not type(transformer.model).__name__.endswith("ForSequenceClassification"):
            raise InvalidArgumentError(
                f"a cross-encoder needs a *ForSequenceClassification model, not {type(transformer.model).__name__}; "
                "start one with CrossEncoder.from_transformer(...)."
            )
        target = checked_device(device, precision)
        self.transformer = transformer
        self.activation = checked_activation(activation or default_activation(self.num_labels))
        #: Other keys of the loaded config_sentence_transformers.json, written back by ``save``.
        self._model_config: dict[str, Any] = {}
        pairs = checked_calibration(
            calibration_pairs, precision, "calibration_pairs", checked_pairs, "pairs like those you will score"
        )
        #: Certified int8 ranges and the weights digest they belong to: written by ``save`` while they still match.
        self._certified: tuple[str, ActivationRanges] | None = None
        if int8_ranges is not None:
            self._certified = (weights_digest(transformer), int8_ranges)
        self.device = target  # int8 runs on a CPU only: calibration runs where the weights were loaded
        self.precision, self._int8 = set_up(
            self,
            transformer.model,
            target,
            precision,
            # static int8 only with ranges certified for these weights on this CPU's ISA (certify_int8)
            lambda: int8_ranges is not None and int8_ranges.exact_grade(int8_isa(), RERANK_EXACT_GRADE_LOSS),
            lambda: Int8Plan(
                transformer.model,
                weights_digest(transformer),
                pairs,
                self._calibration_batches,
                self.forward,
                int8_ranges,
            ),
        )
        #: Whether ``precision`` was chosen by "auto".
        self.auto_precision = precision == "auto"
        #: Pairs cut at ``max_seq_length`` over this cross-encoder's lifetime (each ``predict`` also warns).
        self.truncated_count = 0
        #: The head as ``from_transformer`` made it (None: loaded, so trained by whoever saved it).
        self._fresh_head: list[torch.Tensor] | None = None
        self.eval()

    @property
    def int8_mode(self) -> Literal["static", "dynamic"] | None:
        """ "static" or "dynamic" at precision "int8" (static also while waiting for pairs to calibrate on)."""
        return None if self._int8 is None else self._int8.mode

    @property
    def int8_ranges(self) -> ActivationRanges | None:
        """The activation ranges static int8 runs with (None: not static int8, or not calibrated yet)."""
        return None if self._int8 is None else self._int8.ranges

    def keep_int8_ranges(self, ranges: ActivationRanges) -> None:
        """Keep int8 ranges certified for the current weights (``certify_int8``), for ``save`` to write."""
        self._certified = (weights_digest(self.transformer), ranges)

    @classmethod
    def load(
        cls,
        model: str | os.PathLike[str],
        device: str | torch.device | None = None,
        precision: Precision = "auto",
        max_seq_length: int | None = None,
        trust_remote_code: bool = False,
        calibration_pairs: Sequence[tuple[str, str]] | None = None,
    ) -> CrossEncoder:
        """Load a cross-encoder folder or hub id (a bare name is looked up under ``cross-encoder/``).

        calibration_pairs: with precision "int8", a few hundred (query, text) pairs of your own to calibrate static
        int8 on, as ``SentenceEncoder``'s ``calibration_texts`` (cached per model; see ``int8_mode``)."""
        if model is None:
            raise InvalidArgumentError(
                "CrossEncoder.load needs a folder or hub id; no cross-encoder ships with sbert-qdrant. Train one "
                "from the default model: CrossEncoder.from_transformer() and the cross-encoder objectives."
            )
        checked_device(device, precision)
        checked_calibration(
            calibration_pairs, precision, "calibration_pairs", checked_pairs, "pairs like those you will score"
        )
        name = os.fspath(model)
        if "/" not in name and os.sep not in name and not Path(name).expanduser().is_dir():
            name = f"cross-encoder/{name}"
        folder = resolve_model_folder(name)
        transformer, activation, model_config = read_cross_encoder(folder, trust_remote_code=trust_remote_code)
        if max_seq_length is not None:
            transformer.set_max_seq_length(max_seq_length)
        certified = None
        if any(folder.glob("int8_ranges-*.safetensors")):  # hashing the weights only where a folder has some
            certified = ActivationRanges.read(ranges_file(folder, weights_digest(transformer)))
        cross_encoder = cls(
            transformer,
            device=device,
            precision=precision,
            activation=activation,
            calibration_pairs=calibration_pairs,
            int8_ranges=certified,
        )
        cross_encoder._model_config = model_config
        return cross_encoder

    @classmethod
    def from_transformer(
        cls,
        model: str | os.PathLike[str] | None = None,
        num_labels: int = 1,
        device: str | torch.device | None = None,
        max_seq_length: int | None = None,
        seed: int = 0,
        trust_remote_code: bool = False,
    ) -> CrossEncoder:
        """A new, untrained cross-encoder: the transformer of ``model`` (None: the default model) under a fresh head.

        model: any transformer folder or hub id, e.g. a sentence-transformers model (its Transformer module is used).
        num_labels: 1 for a score (duplicate / relevant / similar); more for classes (e.g. 3 for NLI).
        seed: the head's initial weights depend on it alone.
        """
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise InvalidArgumentError(f"num_labels={num_labels!r} must be a positive integer (1 for a score).")
        target = resolve_device(device)
        base = Transformer.load(transformer_folder(resolve_model_folder(model)), trust_remote_code=trust_remote_code)
        transformer = new_classifier(base, num_labels, seed)
        if max_seq_length is not None:
            transformer.set_max_seq_length(max_seq_length)
        cross = cls(transformer, device=target)
        cross._fresh_head = [p.detach().cpu().clone() for p in cross._head()]
        return cross

    @property
    def head_trained(self) -> bool:
        """False while the classification head is still the random one ``from_transformer`` made (its scores are
        noise: a re-ranker that has not been trained)."""
        fresh = self._fresh_head
        return fresh is None or any(
            not torch.equal(a, b.detach().cpu()) for a, b in zip(fresh, self._head(), strict=True)
        )

    def _head(self) -> list[torch.Tensor]:
        """The classification head's parameters (the model's last weight and bias)."""
        return [p.data for p in self.transformer.model.parameters()][-2:]

    @property
    def num_labels(self) -> int:
        """Logits per pair: 1 for a score model."""
        return int(self.transformer.model.config.num_labels or 1)

    #: Tokens of a whole pair, special tokens included; longer pairs lose tokens from their longer text.
    max_seq_length = TokenLimit()

    @property
    def activation(self) -> Activation:
        """What ``predict`` applies to the logits by default: "sigmoid", "identity", "softmax" or "tanh"."""
        return self._activation

    @activation.setter
    def activation(self, value: Activation) -> None:
        self._activation = checked_activation(value)

    def pair_token_ids(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[list[int]], list[list[int]] | None, int]:
        """Token ids of each pair (cut at ``max_seq_length``), their segment ids (None when the model takes none)
        and how many pairs were cut."""
        transformer = self.transformer
        first = [a.lower() if transformer.do_lower_case else a for a, _ in pairs]
        second = [b.lower() if transformer.do_lower_case else b for _, b in pairs]
        with_types = "token_type_ids" in transformer.tokenizer.model_input_names

        def tokenize(a: list[str], b: list[str], limit: int) -> Any:
            return transformer.tokenizer(
                a,
                b,
                truncation="longest_first",
                max_length=limit,
                return_attention_mask=False,
                return_token_type_ids=with_types,
            )

        limit = self.max_seq_length
        if getattr(transformer.tokenizer, "is_fast", False):
            # One pass: a fast tokenizer keeps what truncation dropped (``overflowing``), which tells the cut pairs.
            encoded = tokenize(first, second, limit)
            rows: list[list[int]] = encoded["input_ids"]
            encodings = encoded.encodings
            if encodings is not None and len(encodings) == len(rows):
                cut_count = sum(1 for encoding in encodings if encoding.overflowing)
                return rows, encoded["token_type_ids"] if with_types else None, cut_count
        # One token over the limit tells a cut pair from one that is exactly `limit` long.
        encoded = tokenize(first, second, limit + 1)
        ids: list[list[int]] = encoded["input_ids"]
        types: list[list[int]] | None = encoded["token_type_ids"] if with_types else None
        cut = [i for i, row in enumerate(ids) if len(row) > limit]
        if cut:
            again = tokenize([first[i] for i in cut], [second[i] for i in cut], limit)
            for n, i in enumerate(cut):
                ids[i] = again["input_ids"][n]
                if types is not None:
                    types[i] = again["token_type_ids"][n]
        return ids, types, len(cut)

    def collate(self, ids: list[list[int]], types: list[list[int]] | None) -> Features:
        """Right-pad pairs' token (and segment) ids into model inputs on this cross-encoder's device."""
        return {name: value.to(self.device) for name, value in self.collate_host(ids, types, pin=False).items()}

    def collate_host(self, ids: list[list[int]], types: list[list[int]] | None, pin: bool) -> Features:
        """``collate`` on the host, in pinned memory where ``pin``."""
        features = self.transformer.collate_host(ids, pin)
        if types is not None:
            padded = np.zeros(features["input_ids"].shape, dtype=np.int64)
            for i, row in enumerate(types):
                padded[i, : len(row)] = row
            features["token_type_ids"] = host_tensor(padded, pin)
        return features

    def _calibration_batches(self, pairs: list[tuple[str, str]]) -> Iterator[Features]:
        ids, types, _ = self.pair_token_ids(pairs)
        for index in length_sorted_batches([len(row) for row in ids], 32):
            yield self.collate([ids[i] for i in index], None if types is None else [types[i] for i in index])

    def tokenize(self, pairs: Sequence[tuple[str, str]]) -> Features:
        """Collate pairs into model inputs on this cross-encoder's device (for training)."""
        ids, types, _ = self.pair_token_ids(checked_pairs(pairs))
        return self.collate(ids, types)

    def forward(self, features: Features) -> torch.Tensor:
        """Logits ``(batch, num_labels)`` of a collated batch (used for training)."""
        return self.transformer.model(**features, return_dict=True).logits

    def predict(
        self,
        pairs: Sequence[tuple[str, str]],
        batch_size: int | None = None,
        activation: Activation | None = None,
        show_progress_bar: bool | None = None,
        convert_to: Literal["numpy", "torch"] = "numpy",
    ) -> np.ndarray | torch.Tensor:
        """Score text pairs, in input order: float32 of shape ``(n,)``, or ``(n, num_labels)`` for several labels.

        pairs: a sequence of ``(text_a, text_b)``; a single pair is ``[(a, b)]``.
        batch_size: the most pairs per batch; None: 32 on a CPU, on a GPU as many as the token budget lets in.
        activation: applied to the logits; None: this model's ``activation``.
        show_progress_bar: None shows it when this module's logger is at INFO.
        """
        items = checked_pairs(pairs)
        cap = batch_cap(batch_size, self.device)
        if convert_to not in ("numpy", "torch"):
            raise InvalidArgumentError(f"convert_to={convert_to!r} must be 'numpy' or 'torch'.")
        apply = ACTIVATION_FUNCTIONS[checked_activation(activation or self.activation)]
        out = np.empty((len(items), self.num_labels), dtype=np.float32)
        if items:
            with self._int8.first_texts(items) if self._int8 else nullcontext():
                self._predict_into(out, items, cap, apply, show_progress_bar)
        result = out[:, 0] if self.num_labels == 1 else out
        return torch.from_numpy(result) if convert_to == "torch" else result

    def _predict_into(
        self,
        out: np.ndarray,
        pairs: list[tuple[str, str]],
        batch_size: int | None,
        apply: Any,
        show_progress_bar: bool | None,
    ) -> None:
        if show_progress_bar is None:
            show_progress_bar = logger.isEnabledFor(logging.INFO)

        first_token_only(self.transformer.model)

        def compute(features: Features) -> torch.Tensor:
            with scoring():
                return apply(self(features).float())

        if self.device.type == "cpu":
            ids, types, cut = self.pair_token_ids(pairs)
            self._warn_truncated(cut, len(pairs))

            def run(index: np.ndarray) -> None:
                rows = [ids[i] for i in index]
                out[index] = compute(self.collate(rows, None if types is None else [types[i] for i in index])).numpy()

            rows_per_batch = cpu_batch_rows(len(pairs), batch_size or CPU_BATCH)
            batches = length_sorted_batches([len(row) for row in ids], rows_per_batch)
            run_batches(batches, run, self.device, show_progress_bar, "Scoring")
            return
        feed: TokenFeed[tuple[str, str], list[_PairRow]] = TokenFeed(
            pairs, self._pair_rows, row_lengths, self._collate_rows, self.device.type == "cuda"
        )
        with tqdm(total=len(pairs), desc="Scoring", unit="pair", disable=not show_progress_bar) as bar:

            def land(chunk: Chunk, index: np.ndarray, scores: np.ndarray) -> None:
                out[chunk.start + index] = scores
                bar.update(len(index))

            encode_pipelined(feed.chunks(), feed.collate, compute, land, self.device, DEFAULT_BATCH_TOKENS, batch_size)
        self._warn_truncated(feed.truncated, len(pairs))

    def _pair_rows(self, pairs: list[tuple[str, str]]) -> tuple[list[_PairRow], int]:
        ids, types, cut = self.pair_token_ids(pairs)
        return [_PairRow(row, None if types is None else types[i]) for i, row in enumerate(ids)], cut

    def _collate_rows(self, rows: list[_PairRow], index: np.ndarray, pin: bool) -> Features:
        batch = [rows[i] for i in index]
        types = None if batch[0].types is None else [cast(list[int], row.types) for row in batch]
        return self.collate_host([row.ids for row in batch], types, pin)

    def _warn_truncated(self, cut: int, count: int) -> None:
        warn_truncated(self, cut, count, "pairs", "cross-encoder", logger)

    def rank(
        self,
        query: str,
        texts: Sequence[str],
        top_k: int | None = None,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
    ) -> list[RankedText]:
        """Score ``(query, text)`` for every text; the best ``top_k`` (None: all), best first, ties in input order.

        Each distinct text is scored once and identical texts share that score, so they tie exactly (a batch's rows
        may round differently on some CPUs) and keep their input order.
        """
        if not isinstance(query, str):
            raise InvalidInputError(f"query is {type(query).__name__} ({query!r:.60}), not str.")
        items = checked_texts(texts)
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise InvalidArgumentError(f"top_k={top_k!r} must be a positive integer or None (all texts).")
        if self.num_labels != 1:
            raise InvalidArgumentError(
                f"rank needs a score model (num_labels=1), not {self.num_labels} labels; use predict for classes."
            )
        slots: dict[str, int] = {}
        slot_of = np.fromiter((slots.setdefault(text, len(slots)) for text in items), dtype=np.int64, count=len(items))
        distinct = np.asarray(
            self.predict([(query, text) for text in slots], batch_size, show_progress_bar=show_progress_bar)
        )
        scores = distinct[slot_of]
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [RankedText(int(i), float(scores[i]), items[i]) for i in order]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the sentence-transformers CrossEncoder folder format (safetensors), loadable by both libraries."""
        if self.precision == "int8":
            raise InvalidArgumentError(
                "an int8-quantized cross-encoder cannot be saved; load it with precision='fp32' and save that."
            )
        write_cross_encoder(Path(path), self.transformer, self.activation, self._model_config)
        if self._certified is not None and self._certified[0] == weights_digest(self.transformer):
            self._certified[1].save(ranges_file(Path(path), self._certified[0]))  # trained since: stale, not written

    def __repr__(self) -> str:
        return (
            f"CrossEncoder({type(self.transformer.model).__name__}, num_labels={self.num_labels}, "
            f"activation={self.activation!r}, max_seq_length={self.max_seq_length}, device={self.device}, "
            f"precision={self.precision!r}{' (auto)' if self.auto_precision else ''}"
            f"{f' ({self.int8_mode})' if self.int8_mode else ''})"
        )
