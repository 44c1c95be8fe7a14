"""What the encoding pipeline's worker does for its inputs: tokenize a chunk (one tokenizer call), collate a batch
on the host (padded or packed), in pinned memory for a GPU."""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Generic, TypeVar

import numpy as np

from .base import Features

I = TypeVar("I")  # noqa: E741  # an input: a text, a pair
R = TypeVar("R", bound=Sized)  # its tokens: ids, or ids with segment ids


class TokenFeed(Generic[I, R]):
    """The host side of encoding ``inputs``: ``lengths`` and ``collate`` as ``pipeline.encode_pipelined`` calls
    them (on its worker thread), ``truncated`` counting the inputs cut at the token limit.

    tokenize: inputs -> (their token rows, how many were cut); collate_host: (rows, pin) -> host features.
    """

    def __init__(
        self,
        inputs: list[I],
        tokenize: Callable[[list[I]], tuple[list[R], int]],
        collate_host: Callable[[list[R], bool], Features],
        pin: bool,
    ) -> None:
        self.inputs, self.tokenize, self.collate_host, self.pin = inputs, tokenize, collate_host, pin
        self.rows: list[R | None] = [None] * len(inputs)
        self.truncated = 0

    def lengths(self, span: range) -> list[int]:
        rows, cut = self.tokenize(self.inputs[span.start : span.stop])
        self.rows[span.start : span.stop] = rows
        self.truncated += cut
        return [len(row) for row in rows]

    def collate(self, index: np.ndarray) -> Features:
        return self.collate_host([self.row(i) for i in index], self.pin)

    def row(self, i: int) -> R:
        """Input ``i``'s tokens (once its chunk is tokenized)."""
        row = self.rows[i]
        if row is None:
            raise IndexError(f"input {i} is not tokenized yet")
        return row
