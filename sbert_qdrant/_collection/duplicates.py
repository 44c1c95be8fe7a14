"""Duplicates in a collection: labelled pairs to calibrate on, a query's own record left out of its duplicates, and
the most similar pairs among stored texts (``dedup.py`` does the vector work)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..dedup import mine_pairs
from ..errors import InvalidInputError
from ..records import Hit, Key, check_text, text_id
from ..store.base import StoredRecord
from .schema import CollectionConfig
from .vectors import encode_documents


@dataclass(frozen=True)
class DuplicatePair:
    """Two stored texts (by their ids) and their cosine similarity."""

    score: float
    id_a: Key
    text_a: str | None
    id_b: Key
    text_b: str | None


def split_pairs(labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> tuple[list[str], list[str], list[int]]:
    """(left texts, right texts, 0/1 labels) of labelled pairs, each checked."""
    left, right, labels = [], [], []
    for i, pair in enumerate(labelled_pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 3:
            raise InvalidInputError(f"labelled_pairs[{i}] must be (text_a, text_b, is_duplicate), got {pair!r:.80}.")
        a, b, label = pair
        left.append(check_text(a, f"labelled_pairs[{i}][0]", "drop the pair"))
        right.append(check_text(b, f"labelled_pairs[{i}][1]", "drop the pair"))
        if label not in (0, 1):  # True/False included
            raise InvalidInputError(f"labelled_pairs[{i}] has label {label!r}; use 1/True or 0/False.")
        labels.append(int(label))
    return left, right, labels


def pair_scores(settings: CollectionConfig, left: list[str], right: list[str]) -> np.ndarray:
    """Cosine similarity of each (left, right) pair, as stored texts (blocking)."""
    a = encode_documents(settings, left)
    b = encode_documents(settings, right)
    a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(axis=1)


def without_self(texts: list[str], found: list[list[Hit]], limit: int) -> list[list[Hit]]:
    """Leave out the record stored from the very same text without an id of its own."""
    own = [text_id(text) for text in texts]
    return [[h for h in hits if h.point_id != point][:limit] for point, hits in zip(own, found, strict=True)]


def most_similar_pairs(
    settings: CollectionConfig,
    records: list[StoredRecord],
    threshold: float,
    top_k: int,
    limit: int | None,
    block_size: int,
) -> list[DuplicatePair]:
    """The most similar pairs among stored texts (read with their vectors), best first (blocking)."""
    records = [r for r in records if r.vector is not None]  # a point without our vector has nothing to compare
    if not records:
        return []
    ids, texts = [], []
    for record in records:
        key, text, _ = settings.layout.split(record.id, record.payload)
        ids.append(key)
        texts.append(text)
    vectors = np.stack([r.vector for r in records])  # type: ignore[misc]
    pairs = mine_pairs(vectors, threshold, top_k, block_size)
    if limit is not None:
        pairs = pairs[:limit]
    return [DuplicatePair(score, ids[i], texts[i], ids[j], texts[j]) for i, j, score in pairs]
