"""What both encoders take in and say about it: texts checked once, and the warning for inputs cut at the token
limit."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidInputError
from ..protocols import truncated_tally


def checked_texts(texts: object) -> list[str]:
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


def warn_truncated(owner: Any, cut: int, count: int, inputs: str, what: str, logger: logging.Logger) -> None:
    """Count ``cut`` of ``count`` inputs cut at ``owner.max_seq_length`` and warn on ``logger``, unless one request
    encodes in several calls (a collection's write sets ``truncated_tally``): then its caller warns once."""
    if not cut:
        return
    owner.truncated_count += cut
    tally = truncated_tally.get()
    if tally is not None:
        tally[0] += cut
        return
    logger.warning(
        "%d of %d %s were longer than max_seq_length=%d tokens and were truncated (%d so far on this %s).",
        cut,
        count,
        inputs,
        owner.max_seq_length,
        owner.truncated_count,
        what,
    )
