"""The host side of encoding on an accelerator: inputs tokenized chunk by chunk (``batching.chunk_spans``: a small
first chunk, then larger), on several threads at once, in order, a bounded number of chunks ahead.

The threads scale with cores because the Rust tokenizer's batch call runs outside the GIL; what holds the GIL per
text is only the ids' conversion to arrays (``tokens.token_rows``). Batches are collated from a chunk's arrays
without Python per text (``tokens.TokenRows``).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

import numpy as np

from .batching import Chunk, chunk_spans
from .features import Features

I = TypeVar("I")  # noqa: E741  # an input: a text, a pair
T = TypeVar("T")  # a chunk's tokens: TokenRows, or a list of rows

#: Most tokenizing threads (beyond this a feed outruns any model we run).
MOST_THREADS = 8


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


class TokenFeed(Generic[I, T]):
    """``inputs`` tokenized for ``pipeline.encode_pipelined``: ``chunks()`` in input order, ``collate(chunk,
    index)`` for a batch of a chunk; ``truncated`` counts the inputs cut at the token limit.

    tokenize: inputs -> (their tokens, how many were cut); lengths: tokens -> token counts; collate_host: (tokens,
    chunk positions, pin) -> host features (pinned where ``pin``); threads: chunks tokenized at once (None: one per
    usable core, up to ``MOST_THREADS``).
    """

    def __init__(
        self,
        inputs: list[I],
        tokenize: Callable[[list[I]], tuple[T, int]],
        lengths: Callable[[T], np.ndarray],
        collate_host: Callable[[T, np.ndarray, bool], Features],
        pin: bool,
        threads: int | None = None,
    ) -> None:
        self.inputs, self.tokenize, self.lengths, self.collate_host, self.pin = (
            inputs,
            tokenize,
            lengths,
            collate_host,
            pin,
        )
        self.threads = max(1, min(MOST_THREADS, usable_cores()) if threads is None else threads)
        self.truncated = 0

    def _tokenized(self, span: range) -> tuple[T, int]:
        return self.tokenize(self.inputs[span.start : span.stop])

    def chunks(self) -> Iterator[Chunk]:
        """The inputs' chunks in order, tokenized up to twice as many chunks ahead as threads."""
        spans = chunk_spans(len(self.inputs))
        if self.threads == 1 or len(spans) == 1:
            for span in spans:
                yield self._chunk(span, *self._tokenized(span))
            return
        with ThreadPoolExecutor(self.threads, thread_name_prefix="sbert-qdrant-tokenize") as pool:
            ahead: deque[tuple[range, Future[tuple[T, int]]]] = deque()
            try:
                for span in spans:
                    ahead.append((span, pool.submit(self._tokenized, span)))
                    if len(ahead) > 2 * self.threads:
                        done, future = ahead.popleft()
                        yield self._chunk(done, *future.result())
                while ahead:
                    done, future = ahead.popleft()
                    yield self._chunk(done, *future.result())
            finally:
                for _, future in ahead:
                    future.cancel()

    def _chunk(self, span: range, tokens: T, cut: int) -> Chunk:
        self.truncated += cut
        return Chunk(span.start, tokens, self.lengths(tokens))

    def collate(self, chunk: Chunk, index: np.ndarray) -> Features:
        return self.collate_host(chunk.tokens, index, self.pin)


def row_lengths(rows: Sequence[Sized]) -> np.ndarray:
    """Token counts of token rows kept one object per input (lists of ids, pairs)."""
    return np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
