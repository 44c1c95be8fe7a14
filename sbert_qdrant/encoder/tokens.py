"""Texts to token ids as arrays, each text tokenized once: the Rust tokenizer's batch call, the rows laid end to end
(``TokenRows``), and batches collated from them with array operations, no Python per text.

This module needs only ``numpy`` and ``tokenizers`` (no torch), so that the feed's worker processes
(``feed_pool.py``) start in moments; ``TokenizerSpec`` is what such a worker needs to tokenize as the encoder does.
"""

from __future__ import annotations

import itertools
import operator
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

#: A text longer than this many characters per allowed token is cut (at a space) before tokenizing: tokenizing costs
#: the whole text even when only its first tokens are kept. English WordPiece runs ~4-5 characters a token.
CHARACTERS_PER_TOKEN = 10


@dataclass(frozen=True)
class TokenRows:
    """Token ids of ``n`` texts end to end: text ``i`` is ``ids[starts[i]:starts[i + 1]]``."""

    ids: np.ndarray
    starts: np.ndarray

    @classmethod
    def from_lists(cls, rows: list[list[int]]) -> TokenRows:
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(starts[-1]))
        return cls(ids, starts)

    def __len__(self) -> int:
        return len(self.starts) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def tolist(self) -> list[list[int]]:
        return [row.tolist() for row in np.split(self.ids, self.starts[1:-1])] if len(self) else []

    def gather(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids of texts ``index`` end to end, in that order, and their lengths."""
        lengths = self.starts[index + 1] - self.starts[index]
        ends = np.cumsum(lengths)
        offsets = np.repeat(self.starts[index] - (ends - lengths), lengths)
        return self.ids[np.arange(int(ends[-1]) if len(ends) else 0) + offsets], lengths

    def padded(self, index: np.ndarray, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
        """``input_ids`` and ``attention_mask`` (int64, right-padded to the longest) of texts ``index``."""
        ids, lengths = self.gather(index)
        width = int(lengths.max())
        mask = np.arange(width)[None, :] < lengths[:, None]
        input_ids = np.full(mask.shape, pad_id, dtype=np.int64)
        input_ids[mask] = ids
        return input_ids, mask.astype(np.int64)


@dataclass(frozen=True)
class TokenizerSpec:
    """How an encoder tokenizes, as plain values a worker process can rebuild it from.

    trailing: special tokens the tokenizer adds after a text ([SEP]: 1), so that a text tokenized one token over the
    limit is cut to the limit exactly as a call at the limit cuts it; None where that was not verified (then the
    texts over the limit are tokenized again at the limit).
    """

    tokenizer_json: str
    limit: int
    lower: bool
    words_alone: bool
    trailing: int | None

    def build(self) -> Tokenizer:
        """The Rust tokenizer, set to cut one token over the limit and never to pad."""
        tokenizer = Tokenizer.from_str(self.tokenizer_json)
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.limit + 1)
        return tokenizer


#: Rust tokenizers built per spec, idle: a thread takes one and gives it back (building one takes ~25 ms).
_idle: dict[TokenizerSpec, queue.SimpleQueue[Tokenizer]] = {}
_idle_lock = threading.Lock()


@contextmanager
def rust_tokenizer(spec: TokenizerSpec) -> Iterator[Tokenizer]:
    """A tokenizer built from ``spec`` for this thread's use alone while inside (built once, then reused)."""
    with _idle_lock:
        idle = _idle.setdefault(spec, queue.SimpleQueue())
    try:
        tokenizer = idle.get_nowait()
    except queue.Empty:
        tokenizer = spec.build()
    try:
        yield tokenizer
    finally:
        idle.put(tokenizer)


def spec_of(backend: Tokenizer, limit: int, lower: bool) -> TokenizerSpec:
    """The spec of a fast tokenizer's backend at ``limit`` tokens (the cut rule checked on a text over the limit)."""
    words_alone = type(backend.pre_tokenizer).__name__ == "BertPreTokenizer"
    spec = TokenizerSpec(backend.to_str(), limit, lower, words_alone, None)
    probe = spec.build()
    text = "x"
    content = probe.encode(text, add_special_tokens=False).ids
    full = probe.encode(text).ids
    if not content or content[0] not in full:
        return spec
    lead = full.index(content[0])
    trailing = len(full) - lead - len(content)
    long_text = " ".join(["word", "token", "piece"] * limit)
    probe.enable_truncation(max_length=limit)
    expected = probe.encode(long_text).ids
    candidate = TokenizerSpec(spec.tokenizer_json, limit, lower, words_alone, trailing)
    got, _ = token_rows(candidate.build(), candidate, [long_text])
    return candidate if got.ids.tolist() == expected else spec


def token_rows(tokenizer: Tokenizer, spec: TokenizerSpec, texts: list[str]) -> tuple[TokenRows, int]:
    """Token ids per text (special tokens included, cut at ``spec.limit``) and how many were cut; ``tokenizer`` is
    ``spec.build()``.

    With a WordPiece (BERT) tokenizer a very long text is first cut at a space after ``CHARACTERS_PER_TOKEN``
    characters per allowed token: its words are split alone, so the cut text's tokens are the whole text's first
    ones; a cut text that falls short of the limit is tokenized whole again, so the ids are always the same."""
    limit = spec.limit
    whole = [t.lower() for t in texts] if spec.lower else texts
    inputs, shortened = _cut_by_characters(whole, limit) if spec.words_alone else (whole, [])
    rows = _ids(tokenizer, inputs)
    short = [i for i in shortened if len(rows[i]) <= limit]
    for i, row in zip(short, _ids(tokenizer, [whole[i] for i in short]), strict=True):
        rows[i] = row
    over = [i for i, row in enumerate(rows) if len(row) > limit]
    if spec.trailing is None and over:
        tokenizer.enable_truncation(max_length=limit)
        try:
            again = _ids(tokenizer, [inputs[i] for i in over])
        finally:
            tokenizer.enable_truncation(max_length=limit + 1)
        for i, row in zip(over, again, strict=True):
            rows[i] = row
        return TokenRows.from_lists(rows), len(over)
    tokens = TokenRows.from_lists(rows)
    if over:  # one token over: drop the last text token before the trailing special ones
        drop = tokens.starts[np.asarray(over)] + limit - (spec.trailing or 0)
        keep = np.ones(len(tokens.ids), dtype=bool)
        keep[drop] = False
        lengths = tokens.lengths
        lengths[over] -= 1
        starts = np.zeros_like(tokens.starts)
        np.cumsum(lengths, out=starts[1:])
        tokens = TokenRows(tokens.ids[keep], starts)
    return tokens, len(over)


_IDS = operator.attrgetter("ids")


def _ids(tokenizer: Tokenizer, texts: list[str]) -> list[Any]:
    if not texts:
        return []
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)  # no character offsets where offered
    return list(map(_IDS, encode(texts)))


def _cut_by_characters(texts: list[str], limit: int) -> tuple[list[str], list[int]]:
    """``texts`` with the very long ones cut at a space, and which were cut."""
    most = (limit + 1) * CHARACTERS_PER_TOKEN
    long = [i for i, text in enumerate(texts) if len(text) > most]
    if not long:
        return texts, []
    out, shortened = list(texts), []
    for i in long:
        end = texts[i].rfind(" ", most // 2, most)
        if end > 0:
            out[i] = texts[i][:end]
            shortened.append(i)
    return out, shortened
