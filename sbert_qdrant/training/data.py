"""Training examples and their readers: labelled pairs, triplets and (anchor, positive) pairs from data files.

Files are read by :mod:`sbert_qdrant.files` (JSONL, CSV, TSV without quoting, TXT; optionally gzipped). Every
reader maps named columns to an example's texts and, optionally, a label column to its label. A row that cannot
be read is reported with its file and line: by default as a :class:`DataFormatError`, with ``errors="warn"`` as
one warning per row (then skipped). Nothing is dropped silently.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import DataFormatError, InvalidArgumentError
from ..files import read_rows
from ..types import LabelKind

logger = logging.getLogger(__name__)

#: What an example's label holds: a class index, a similarity score in 0..1, or 0/1. Objectives declare theirs.
#: The three NLI classes in the order sentence-transformers' NLI examples use.
NLI_LABELS: tuple[str, ...] = ("contradiction", "entailment", "neutral")
_BINARY = {"0": 0, "1": 1, "false": 0, "true": 1, "no": 0, "yes": 1}


@dataclass(frozen=True)
class Example:
    """One training or evaluation item: two or more texts and an optional label (class index, score or 0/1)."""

    texts: tuple[str, ...]
    label: float | int | None = None


def _text(row: Mapping[str, Any], column: str) -> str:
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"column {column!r} is {'missing' if value is None else repr(value)[:60]}, not a text")
    return value


def _label(raw: Any, kind: LabelKind, label_map: Mapping[str, int] | None, max_score: float) -> float | int:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise ValueError("the label is empty")
    if label_map is not None:
        key = str(raw).strip()
        if key not in label_map:
            raise ValueError(f"label {key!r} is not in the label map {sorted(label_map)}; add it or fix the row")
        return label_map[key]
    if kind == "class":
        if isinstance(raw, int) or (isinstance(raw, str) and raw.strip().isdigit()):
            return int(raw)
        raise ValueError(f"class label {raw!r} is not an integer; pass a label_map naming every class")
    if kind == "binary":
        key = str(raw).strip().lower()
        if key not in _BINARY:
            raise ValueError(f"binary label {raw!r} is not 0/1 (or true/false, yes/no); pass a label_map")
        return _BINARY[key]
    try:
        score = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"score {raw!r} is not a number") from None
    if not math.isfinite(score) or not 0.0 <= score <= max_score:
        raise ValueError(f"score {score} is outside 0..max_score={max_score}; set max_score to the scale's top")
    return score / max_score


def read_examples(
    path: str | os.PathLike[str],
    text_columns: Sequence[str],
    label_column: str | None = None,
    label_kind: LabelKind = "class",
    label_map: Mapping[str, int] | None = None,
    max_score: float = 1.0,
    file_format: str | None = None,
    errors: Literal["raise", "warn"] = "raise",
    limit: int | None = None,
) -> list[Example]:
    """Read examples: the texts of ``text_columns`` and, if given, the label in ``label_column``.

    label_kind: "class" (an integer, or a name through ``label_map``), "score" (a number in 0..max_score,
    divided by ``max_score`` to 0..1) or "binary" (0/1, true/false, yes/no, or through ``label_map``).
    errors: "raise" stops at the first bad row; "warn" logs each bad row (file:line: why) and skips it.
    """
    if not text_columns:
        raise InvalidArgumentError("text_columns is empty; name the columns holding the texts.")
    if label_kind not in ("class", "score", "binary"):
        raise InvalidArgumentError(f"label_kind={label_kind!r} is not 'class', 'score' or 'binary'.")
    if errors not in ("raise", "warn"):
        raise InvalidArgumentError(f"errors={errors!r} must be 'raise' or 'warn'.")
    if max_score <= 0:
        raise InvalidArgumentError(f"max_score={max_score!r} must be positive.")
    examples: list[Example] = []
    skipped = 0
    wanted = [*text_columns, *([label_column] if label_column else [])]
    fix = "pass the right names (text_columns=..., label_column=...)"
    for number, row in read_rows(path, file_format, columns=wanted, fix=fix):
        try:
            texts = tuple(_text(row, c) for c in text_columns)
            label = _label(row.get(label_column), label_kind, label_map, max_score) if label_column else None
        except ValueError as exc:
            message = f"{os.fspath(path)}:{number}: {exc}."
            if errors == "raise":
                raise DataFormatError(message + " Fix the row, or read with errors='warn' to skip bad rows.") from None
            logger.warning("skipped %s", message)
            skipped += 1
            continue
        examples.append(Example(texts, label))
        if limit is not None and len(examples) >= limit:
            break
    if skipped:
        logger.warning("%s: skipped %d malformed rows, kept %d.", os.fspath(path), skipped, len(examples))
    if not examples:
        raise DataFormatError(f"{os.fspath(path)} holds no usable rows.")
    return examples


def read_nli(
    path: str | os.PathLike[str],
    text_columns: Sequence[str] = ("premise", "hypothesis"),
    label_column: str = "label",
    labels: Sequence[str] = NLI_LABELS,
    **options: Any,
) -> list[Example]:
    """NLI pairs with their class index in ``labels`` (contradiction, entailment, neutral by default)."""
    return read_examples(
        path, text_columns, label_column, "class", {name: i for i, name in enumerate(labels)}, **options
    )


def read_scored_pairs(
    path: str | os.PathLike[str],
    text_columns: Sequence[str] = ("sentence1", "sentence2"),
    label_column: str = "score",
    max_score: float = 5.0,
    **options: Any,
) -> list[Example]:
    """Pairs with a similarity score, scaled from 0..max_score (STS-B: 5) to 0..1."""
    return read_examples(path, text_columns, label_column, "score", max_score=max_score, **options)


def read_binary_pairs(
    path: str | os.PathLike[str],
    text_columns: Sequence[str] = ("question1", "question2"),
    label_column: str = "is_duplicate",
    **options: Any,
) -> list[Example]:
    """Pairs labelled 1 (duplicate / similar) or 0, as in Quora Question Pairs."""
    return read_examples(path, text_columns, label_column, "binary", **options)


def read_texts(
    path: str | os.PathLike[str], text_columns: Sequence[str] = ("anchor", "positive", "negative"), **options: Any
) -> list[Example]:
    """Unlabelled tuples: triplets (anchor, positive, negative) or (anchor, positive[, hard negatives]) pairs."""
    return read_examples(path, text_columns, **options)
