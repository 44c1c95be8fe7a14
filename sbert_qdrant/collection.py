"""TextCollection: texts in, Qdrant points out; text queries in, typed hits out."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models
from tqdm.auto import tqdm

from ._collection_core import CollectionCore, DuplicatePair, OnConflict
from .dedup import Calibration, best_f1_threshold
from .encoder import SentenceEncoder
from .records import Hit, Key, PreparedPoint, StoredText, UpsertResult, prepared_chunks
from .settings import Settings
from .store import RetryPolicy, VectorStore
from .store.base import Distance, Quantization
from .store.factory import open_store

logger = logging.getLogger(__name__)

__all__ = ["DuplicatePair", "TextCollection"]


class TextCollection(CollectionCore):
    """A Qdrant collection of texts embedded by a SentenceEncoder.

    Engine: ``location=`` (embedded Qdrant Edge on disk), ``url=``/``api_key=`` (a Qdrant server or Qdrant Cloud),
    or ``client=`` (any QdrantClient, ``":memory:"`` included). With none, ``QDRANT_URL`` if set, else
    ``SBERT_QDRANT_LOCATION`` (default ``./sbert_qdrant_data``). The collection is created on the first write with
    the encoder's size and cosine distance; an existing one is checked, never recreated unless ``recreate=True``.
    """

    def __init__(
        self,
        collection_name: str,
        encoder: SentenceEncoder | None = None,
        *,
        location: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: QdrantClient | None = None,
        vector_name: str = "text",
        distance: Distance = "cosine",
        on_disk: bool = False,
        hnsw: models.HnswConfigDiff | None = None,
        quantization: Quantization | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        payload_indexes: Mapping[str, models.PayloadSchemaType] | None = None,
        recreate: bool = False,
        retry: RetryPolicy | None = None,
        encode_batch_size: int = 32,
        show_progress_bar: bool | None = None,
        settings: Settings | None = None,
    ) -> None:
        settings = settings or Settings()
        super().__init__(
            collection_name,
            encoder or SentenceEncoder.load(settings.model, device=settings.device, precision=settings.precision),  # type: ignore[arg-type]
            vector_name=vector_name,
            distance=distance,
            on_disk=on_disk,
            hnsw=hnsw,
            quantization=quantization,
            shard_number=shard_number,
            replication_factor=replication_factor,
            payload_indexes=payload_indexes,
            recreate=recreate,
            encode_batch_size=encode_batch_size,
            show_progress_bar=show_progress_bar,
        )
        self.store: VectorStore = open_store(location, url, api_key, client, settings, retry)
        self._ready = False
        self._ready_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def _ensure(self, create: bool) -> None:
        """Check (and on a write, create) the collection once per instance."""
        with self._ready_lock:
            if not self._ready:
                self._prepare(create)

    def _prepare(self, create: bool) -> None:
        if self.recreate and create:
            self.store.drop(self.collection_name)
            self.recreate = False
        existing = self.store.describe(self.collection_name)
        if existing is None:
            self.require_creatable(create)
            self.store.create(self.spec())
            for field_name, schema in self.payload_indexes.items():
                self.store.create_payload_index(self.collection_name, field_name, schema)
        else:
            self.check_existing(existing)
        self._ready = True

    def exists(self) -> bool:
        return self.store.describe(self.collection_name) is not None

    def create_payload_index(self, field_name: str, schema: models.PayloadSchemaType) -> None:
        """Index a payload field so that filters on it stay fast (creates the collection if needed)."""
        self._ensure(create=True)
        self.store.create_payload_index(self.collection_name, field_name, schema)

    def optimize(self) -> None:
        """After a bulk load: Edge builds its HNSW index now; a server is waited on until green."""
        self._ensure(create=False)
        self.store.optimize(self.collection_name)

    def delete_collection(self) -> None:
        """Drop the collection and everything in it."""
        self.store.drop(self.collection_name)
        self._ready = False

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> TextCollection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ----------------------------------------------------------------------------------------------------

    def upsert_texts(
        self,
        texts: Iterable[Any],
        ids: Sequence[Key] | None = None,
        payloads: Sequence[Mapping[str, Any] | None] | None = None,
        batch_size: int | None = None,
        wait: bool = True,
        on_conflict: OnConflict = "overwrite",
        show_progress_bar: bool | None = None,
    ) -> UpsertResult:
        """Embed and store texts; returns one point id per record (UUIDv5 of its key, else of its text).

        ``texts`` is a list of str (with optional ``ids`` and ``payloads`` lists) or an iterable of records
        (``TextRecord``, ``{"text", "payload", "id"}`` dicts, or str), streamed in batches. Re-running writes the
        same points again (``on_conflict="overwrite"``) or leaves stored ids alone without encoding them
        (``"skip"``). Batch k+1 is encoded while batch k is written; at most two batches of vectors are held.
        """
        batch = self.check_upsert_args(batch_size, on_conflict, self.store.upsert_batch)
        chunks = prepared_chunks(texts, ids, payloads, batch)
        first = next(chunks, None)  # a list input is fully checked here, before anything is written
        result = UpsertResult()
        if first is None:
            return result
        self._ensure(create=True)
        stored: list[str] = []  # ids known to be stored: written by this call or already there
        show = self.progress(show_progress_bar)
        with ThreadPoolExecutor(max_workers=1) as writer, tqdm(desc="Upserting", unit="text", disable=not show) as bar:
            pending: tuple[Future[None], list[str]] | None = None
            try:
                for chunk_ids, points in _prepend(first, chunks):
                    result.extend(chunk_ids)
                    todo = self._to_write(points, on_conflict)
                    vectors = self.encode([p.text for p in todo]) if todo else None
                    _finish(pending, result, stored)
                    pending = None
                    if todo and vectors is not None:
                        pending = (writer.submit(self._write, todo, vectors, wait), [p.id for p in todo])
                    written_now = {p.id for p in todo}
                    stored.extend(i for i in chunk_ids if i not in written_now)
                    result.skipped += len(chunk_ids) - len(todo)
                    bar.update(len(chunk_ids))
                _finish(pending, result, stored)
            except Exception as exc:
                with contextlib.suppress(Exception):  # a write still in flight: count it if it lands
                    _finish(pending, result, stored)
                raise self.partial_write_error(exc, list(result), stored) from exc
        return result

    def _to_write(self, points: list[PreparedPoint], on_conflict: OnConflict) -> list[PreparedPoint]:
        if on_conflict == "overwrite" or not points:
            return points
        stored = self.store.existing_ids(self.collection_name, [p.id for p in points])
        return [p for p in points if p.id not in stored]

    def _write(self, points: list[PreparedPoint], vectors: np.ndarray, wait: bool) -> None:
        self.store.upsert(
            self.collection_name, self.vector_name, [p.id for p in points], vectors, [p.payload for p in points], wait
        )

    def delete_texts(
        self,
        ids: Sequence[str] | None = None,
        *,
        keys: Sequence[Key] | None = None,
        query_filter: models.Filter | None = None,
        wait: bool = True,
    ) -> None:
        """Delete by point ids (as ``upsert_texts`` returned them), by your keys, or by a filter."""
        point_ids, query_filter = self.delete_selector(ids, keys, query_filter)
        self._ensure(create=False)
        self.store.delete(self.collection_name, point_ids, query_filter, wait)

    # -- reads -----------------------------------------------------------------------------------------------------

    def count(self, query_filter: models.Filter | None = None) -> int:
        self._ensure(create=False)
        return self.store.count(self.collection_name, query_filter)

    def get(
        self, ids: Sequence[str] | None = None, *, keys: Sequence[Key] | None = None, with_vectors: bool = False
    ) -> list[StoredText]:
        """Stored texts by point id or by your key, in the order asked; missing ones are left out."""
        point_ids = self.lookup_ids(ids, keys)
        self._ensure(create=False)
        found = self.store.retrieve(self.collection_name, self.vector_name, point_ids, with_vectors)
        return self.stored_texts(point_ids, found)

    def search_text(
        self,
        query: str,
        limit: int = 10,
        query_filter: models.Filter | None = None,
        score_threshold: float | None = None,
        with_payload: bool = True,
    ) -> list[Hit]:
        """The ``limit`` stored texts nearest to ``query``, best first."""
        return self.search_texts([query], limit, query_filter, score_threshold, with_payload)[0]

    def search_texts(
        self,
        queries: Sequence[str],
        limit: int = 10,
        query_filter: models.Filter | None = None,
        score_threshold: float | None = None,
        with_payload: bool = True,
    ) -> list[list[Hit]]:
        """``search_text`` for many queries: one encode, one batched query."""
        texts = self.check_search_args(queries, limit, score_threshold)
        self._ensure(create=False)
        if not texts:
            return []
        vectors = self.encode(texts)
        found = self.store.query(
            self.collection_name, self.vector_name, vectors, limit, query_filter, score_threshold, with_payload
        )
        return [self.hits(rows) for rows in found]

    # -- duplicates ------------------------------------------------------------------------------------------------

    def find_duplicates(
        self, text_or_texts: str | Sequence[str], threshold: float | None = None, limit: int = 10
    ) -> list[Hit] | list[list[Hit]]:
        """Stored texts at or above the duplicate threshold (given, else calibrated, else the default).

        The record stored from the very same text (same id) is not its own duplicate and is left out.
        """
        single = isinstance(text_or_texts, str)
        texts: list[str] = [text_or_texts] if isinstance(text_or_texts, str) else list(text_or_texts)
        cut = threshold if threshold is not None else self.resolve_threshold(self._stored_threshold())
        found = self.search_texts(texts, limit + 1, score_threshold=cut)
        results = self.without_self(texts, found, limit)
        return results[0] if single else results

    def calibrate_threshold(self, labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> Calibration:
        """Best-F1 cosine threshold on (text, text, is_duplicate) pairs, stored with the collection."""
        left, right, labels = self.split_pairs(labelled_pairs)
        scores = self.pair_scores(left, right)
        calibration = best_f1_threshold(scores, labels)
        self._ensure(create=True)
        current = self.store.metadata(self.collection_name)
        self.store.update_metadata(self.collection_name, self.calibration_metadata(calibration, current))
        self._calibrated = calibration.threshold
        return calibration

    def _stored_threshold(self) -> float | None:
        self._ensure(create=False)
        return self.threshold_from(self.store.metadata(self.collection_name))

    def mine_duplicates(
        self, threshold: float | None = None, top_k: int = 5, limit: int | None = None, chunk_size: int = 2048
    ) -> list[DuplicatePair]:
        """The most similar pairs of stored texts (paraphrase mining), best first, each text's ``top_k`` best."""
        cut = threshold if threshold is not None else self.resolve_threshold(self._stored_threshold())
        self._ensure(create=False)
        ids, texts, rows = [], [], []
        for page in self.store.scroll(self.collection_name, self.vector_name, True, 1024):
            for record in page:
                ids.append(record.id)
                texts.append(self.text_of(record.payload))
                rows.append(record.vector)
        return self.pairs_from(ids, texts, rows, cut, top_k, limit, chunk_size)


def _prepend(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _finish(pending: tuple[Future[None], list[str]] | None, result: UpsertResult, stored: list[str]) -> None:
    """Wait for the write in flight; count its points as stored once it has landed."""
    if pending is None:
        return
    future, ids = pending
    future.result()
    result.written += len(ids)
    stored.extend(ids)
