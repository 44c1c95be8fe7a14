"""What a collection stores for texts and asks with queries: the encoder's dense vectors and, in a collection with
BM25, the term weights (blocking work: the async collection runs it off the event loop)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..encoder import Bm25
from ..store.base import PointVectors
from .schema import CollectionConfig

logger = logging.getLogger("sbert_qdrant.collection")

#: Texts encoded at a time within a write's batch, so that its progress bar moves while a large batch is encoded
#: (on a GPU ``encode_batch_size`` x 4, a whole write batch with our encoder: one call keeps the device busy). Each
#: call ends with cores idle while its last batches finish: 2,000 texts upserted on 2 CPU cores ran at 0.87x
#: ``encode()`` alone in slices of 256, 0.94x in slices of 1,024 (a bar step every few seconds there).
PROGRESS_SLICE = 1024
#: Characters of text a slice holds at most (a slice of ``PROGRESS_SLICE`` short texts holds ~60,000), so that long
#: texts move the bar as often: 1,024 chunks of SciFact abstracts took ~90 s to encode on 2 CPU cores, so a log line
#: came every 70-90 s; in slices of 64 KB one comes every 6-12 s (300 abstracts: 6.04 documents/s, 6.19 by count).
SLICE_CHARS = 64 * 1024
#: Texts per encoder batch by default: on a CPU sentence-transformers' 32; on a GPU, for an encoder that cuts its
#: batches by a token budget (``SentenceEncoder.batch_tokens``), as many as the budget lets in (a cap it never
#: reaches: every text has two tokens or more), for any other encoder ``GPU_BATCH``.
CPU_BATCH, GPU_BATCH = 32, 1024


def on_accelerator(encoder: object) -> bool:
    """Whether ``encoder`` runs on a GPU (its ``device``, a torch.device, read without importing torch)."""
    return str(getattr(encoder, "device", "cpu")) != "cpu"


def default_batch_size(encoder: object) -> int:
    """The encode batch size of a collection given none (see ``CPU_BATCH``, ``GPU_BATCH``)."""
    if not on_accelerator(encoder):
        return CPU_BATCH
    budget = getattr(encoder, "batch_tokens", None)
    return max(GPU_BATCH, budget // 2) if isinstance(budget, int) else GPU_BATCH


def slices(texts: list[str], most: int, chars: int) -> Iterator[slice]:
    """Consecutive slices of ``texts``, each of at most ``most`` texts and ``chars`` characters (one text at least)."""
    start = 0
    while start < len(texts):
        end, held = start + 1, len(texts[start])
        while end < len(texts) and end - start < most and held + len(texts[end]) <= chars:
            held += len(texts[end])
            end += 1
        yield slice(start, end)
        start = end


#: Bytes of token vectors (float32) one write batch may hold at most, counted at each token slot's token limit: a
#: raw 384-dim slot at 256 tokens is 393 KB a text, so a batch of the store's 4,096 texts held 1.6 GB (12 GB of
#: RSS once converted for the engine) where this cap writes 170 at a time.
MULTIVECTOR_BATCH_BYTES = 64 * 2**20
#: The token limit assumed for a token encoder that states none.
_TOKENS_UNSTATED = 512


def bounded_batch(settings: CollectionConfig, batch: int) -> int:
    """``batch`` records (texts, chunks) per write, lowered where the collection's multivector slots would hold more
    than ``MULTIVECTOR_BATCH_BYTES`` of token vectors at their encoders' token limits (never below 1)."""
    per_text = sum(_token_limit(encoder) * encoder.dimension * 4 for encoder in settings.token_encoders.values())
    if per_text == 0:
        return batch
    return max(1, min(batch, MULTIVECTOR_BATCH_BYTES // per_text))


def _token_limit(encoder: object) -> int:
    """A token encoder's token limit: its own ``max_seq_length`` or its transformer's (MultiVectorEncoder)."""
    for owner in (encoder, getattr(encoder, "transformer", None)):
        limit = getattr(owner, "max_seq_length", None)
        if isinstance(limit, int) and limit > 0:
            return limit
    return _TOKENS_UNSTATED


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
    ``progress(done, total)`` is called after every slice of texts encoded (``PROGRESS_SLICE``, more on a GPU)."""
    encoded = [name for name in settings.encoders if given is None or name != settings.vector_name]
    sparse = settings.layout.sparse if bm25 is not None else None
    # With the encoder on a GPU the CPU is free meanwhile: BM25's term weights are counted beside the encoding.
    with ThreadPoolExecutor(1, thread_name_prefix="sbert-qdrant-bm25") as aside:
        beside = bm25 is not None and sparse is not None and on_accelerator(settings.encoder)
        weights = aside.submit(bm25.embed_documents, texts) if bm25 is not None and beside else None
        dense = _dense(settings, texts, encoded, given, progress)
        tokens = {
            name: [np.asarray(m, dtype=np.float32) for m in encoder.encode_document(texts, settings.encode_batch_size)]
            for name, encoder in settings.token_encoders.items()
        }
        lexical = {}
        if bm25 is not None and sparse is not None:
            lexical[sparse.name] = weights.result() if weights is not None else bm25.embed_documents(texts)
    return PointVectors(dense, lexical, tokens)


def _dense(
    settings: CollectionConfig,
    texts: list[str],
    encoded: list[str],
    given: list[np.ndarray] | None,
    progress: Callable[[int, int], None] | None,
) -> dict[str, np.ndarray]:
    total, done = len(texts) * len(encoded), 0
    dense = {settings.vector_name: np.stack(given)} if given is not None else {}
    most = max(PROGRESS_SLICE, 4 * settings.encode_batch_size)
    for name in encoded:
        parts = []
        for part in slices(texts, most, SLICE_CHARS * most // PROGRESS_SLICE):
            parts.append(encode_documents(settings, texts[part], name))
            done += len(parts[-1])
            if progress is not None:
                progress(done, total)
        dense[name] = np.concatenate(parts)
    for slot in settings.layout.slots:
        if slot.prefix_of is not None:  # a first stage: the first values of its full slot's vectors
            dense[slot.name] = np.ascontiguousarray(dense[slot.prefix_of][:, : slot.size])
    return dense
