"""What a collection stores for texts and asks with queries: the encoder's dense vectors and, in a collection with
BM25, the term weights (blocking work: the async collection runs it off the event loop)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..encoder import Bm25
from ..store.base import PointVectors
from .schema import CollectionConfig

logger = logging.getLogger("sbert_qdrant.collection")

#: Texts encoded at a time within a write's batch, so that its progress bar moves while a large batch is encoded.
PROGRESS_SLICE = 256
#: Chunks in a documents load's first write: the bar's first move comes after these are encoded.
FIRST_GROUP = 32


def show_progress(settings: CollectionConfig, show: bool | None) -> bool:
    """Whether to show a progress bar: as asked, else as the collection was opened, else when logging at INFO."""
    if show is None:
        show = settings.show_progress_bar
    return logger.isEnabledFor(logging.INFO) if show is None else show


def encode_documents(settings: CollectionConfig, texts: list[str], using: str | None = None) -> np.ndarray:
    """Dense vectors of texts as stored in slot ``using`` (None: the primary), with its model's document prompt."""
    _, encoder = settings.encoder_of(using)
    vectors = encoder.encode_document(texts, batch_size=settings.encode_batch_size, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def encode_queries(settings: CollectionConfig, texts: list[str], using: str | None = None) -> np.ndarray:
    """Dense vectors of search queries for slot ``using`` (None: the primary), with its model's query prompt."""
    _, encoder = settings.encoder_of(using)
    vectors = encoder.encode_query(texts, batch_size=settings.encode_batch_size, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def point_vectors(
    settings: CollectionConfig,
    bm25: Bm25 | None,
    texts: list[str],
    given: list[np.ndarray] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PointVectors:
    """Everything stored for texts, slot by slot: each dense slot's vectors (the primary's encoded here unless
    ``given``, checked, from elsewhere; a first stage cut from its full slot's), each multivector slot's token
    vectors and, with BM25, the term weights.
    ``progress(done, total)`` is called after every ``PROGRESS_SLICE`` texts encoded."""
    encoded = [name for name in settings.encoders if given is None or name != settings.vector_name]
    total, done = len(texts) * len(encoded), 0
    dense = {settings.vector_name: np.stack(given)} if given is not None else {}
    for name in encoded:
        parts = []
        for start in range(0, len(texts), PROGRESS_SLICE):
            parts.append(encode_documents(settings, texts[start : start + PROGRESS_SLICE], name))
            done += len(parts[-1])
            if progress is not None:
                progress(done, total)
        dense[name] = np.concatenate(parts)
    for slot in settings.layout.slots:
        if slot.prefix_of is not None:  # a first stage: the first values of its full slot's vectors
            dense[slot.name] = np.ascontiguousarray(dense[slot.prefix_of][:, : slot.size])
    multi = {
        name: [np.asarray(m, dtype=np.float32) for m in encoder.encode_document(texts, settings.encode_batch_size)]
        for name, encoder in settings.token_encoders.items()
    }
    sparse = settings.layout.sparse
    lexical = {sparse.name: bm25.embed_documents(texts)} if bm25 is not None and sparse is not None else {}
    return PointVectors(dense, lexical, multi)
