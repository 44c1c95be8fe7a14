"""What the encoding pipeline's worker does for texts: tokenize a chunk (one tokenizer call), collate a batch on
the host, padded or packed, in pinned memory for a GPU."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .base import Features
from .packed import pack


class TokenFeed:
    """The host side of encoding ``inputs``: ``lengths`` and ``collate`` as ``pipeline.encode_pipelined`` calls
    them (on its worker thread), ``truncated`` counting the texts cut at the token limit.

    tokenize: texts -> (token ids, how many were cut); collate_host: (rows, pin) -> padded host features.
    """

    def __init__(
        self,
        inputs: list[str],
        tokenize: Callable[[list[str]], tuple[list[list[int]], int]],
        collate_host: Callable[[list[list[int]], bool], Features],
        *,
        packed: bool,
        pin: bool,
    ) -> None:
        self.inputs, self.tokenize, self.collate_host = inputs, tokenize, collate_host
        self.packed, self.pin = packed, pin
        self.ids: list[list[int]] = [[] for _ in inputs]
        self.truncated = 0

    def lengths(self, span: range) -> list[int]:
        ids, cut = self.tokenize(self.inputs[span.start : span.stop])
        self.ids[span.start : span.stop] = ids
        self.truncated += cut
        return [len(row) for row in ids]

    def collate(self, index: np.ndarray) -> Features:
        rows = [self.ids[i] for i in index]
        return pack(rows, self.pin) if self.packed else self.collate_host(rows, self.pin)
