"""The engine-free half of a text collection, shared by the sync and async flavours: settings, checks, results.

Held by each collection as a private object (composition): nothing here is public API.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from qdrant_client import models

from ._filters import engine_filter
from .dedup import DEFAULT_DUPLICATE_THRESHOLD, Calibration, mine_pairs
from .encoder import SentenceEncoder
from .errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    InvalidArgumentError,
    InvalidInputError,
    PartialWriteError,
)
from .records import (
    KEY_KEY,
    Hit,
    Key,
    PreparedPoint,
    StoredText,
    check_ids,
    check_text,
    point_id,
    split_payload,
    text_id,
)
from .store.base import (
    DISTANCES,
    CollectionSpec,
    PayloadSelector,
    Quantization,
    ScoredRecord,
    StoredRecord,
    VectorSpec,
)

logger = logging.getLogger("sbert_qdrant.collection")

OnConflict = Literal["overwrite", "skip"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
_METADATA_KEY = "sbert_qdrant"


@dataclass(frozen=True)
class DuplicatePair:
    """Two stored texts (by their ids) and their cosine similarity."""

    score: float
    id_a: Key
    text_a: str | None
    id_b: Key
    text_b: str | None


class CollectionCore:
    """Configuration and the engine-free parts of a text collection."""

    def __init__(
        self,
        collection_name: str,
        encoder: SentenceEncoder,
        *,
        vector_name: str,
        distance: str,
        on_disk: bool,
        hnsw: models.HnswConfigDiff | None,
        quantization: Quantization | None,
        shard_number: int | None,
        replication_factor: int | None,
        payload_indexes: Mapping[str, models.PayloadSchemaType] | None,
        recreate: bool,
        encode_batch_size: int,
        show_progress_bar: bool | None,
    ) -> None:
        if not isinstance(collection_name, str) or not _NAME.fullmatch(collection_name):
            raise InvalidArgumentError(
                f"collection_name={collection_name!r} is not valid: use 1-255 letters, digits, '_', '-' or '.', "
                "starting with a letter or digit."
            )
        if not isinstance(encoder, SentenceEncoder):
            raise InvalidArgumentError(f"encoder must be a SentenceEncoder, not {type(encoder).__name__}.")
        if distance not in DISTANCES:
            raise InvalidArgumentError(f"distance={distance!r} must be one of {DISTANCES}.")
        if quantization not in (None, "int8", "binary"):
            raise InvalidArgumentError(f"quantization={quantization!r} must be None, 'int8' or 'binary'.")
        if isinstance(encode_batch_size, bool) or not isinstance(encode_batch_size, int) or encode_batch_size < 1:
            raise InvalidArgumentError(f"encode_batch_size={encode_batch_size!r} must be a positive integer.")
        self.collection_name = collection_name
        self.encoder = encoder
        self.vector_name = vector_name
        self.distance = distance
        self.on_disk = on_disk
        self.hnsw = hnsw
        self.quantization: Quantization | None = quantization
        self.shard_number = shard_number
        self.replication_factor = replication_factor
        self.payload_indexes = dict(payload_indexes or {})
        self.recreate = recreate
        self.encode_batch_size = encode_batch_size
        self.show_progress_bar = show_progress_bar
        self.calibrated: float | None = None

    def describe(self, flavour: str, store: object) -> str:
        """The collection's repr."""
        return (
            f"{flavour}({self.collection_name!r}, dimension={self.encoder.dimension}, "
            f"distance={self.distance!r}, store={type(store).__name__})"
        )

    # -- the collection's shape ------------------------------------------------------------------------------------

    def spec(self) -> CollectionSpec:
        return CollectionSpec(
            name=self.collection_name,
            vector_name=self.vector_name,
            vector=VectorSpec(self.encoder.dimension, self.distance),
            on_disk=self.on_disk,
            hnsw=self.hnsw,
            quantization=self.quantization,
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
            metadata={_METADATA_KEY: {"dimension": self.encoder.dimension, "normalized": self.encoder.normalizes}},
        )

    def require_creatable(self, create: bool) -> None:
        if not create:
            raise CollectionNotFoundError(
                f"collection {self.collection_name!r} does not exist yet; upsert_texts() creates it."
            )

    def check_existing(self, existing: dict[str, VectorSpec]) -> None:
        """Refuse an existing collection whose vectors do not fit this encoder (never recreate it silently)."""
        name = self.collection_name
        found = existing.get(self.vector_name)
        if found is None:
            raise CollectionMismatchError(
                f"collection {name!r} has no vector named {self.vector_name!r} (it has {sorted(existing)}); "
                f"pass vector_name= one of those, or recreate=True to replace the collection."
            )
        wanted = VectorSpec(self.encoder.dimension, self.distance)
        if found != wanted:
            raise CollectionMismatchError(
                f"collection {name!r} stores {found.size}-dim {found.distance} vectors under {self.vector_name!r}, "
                f"but this encoder makes {wanted.size}-dim {wanted.distance} ones; use the model the collection "
                "was built with, another collection_name, or recreate=True to replace it (deletes its points)."
            )

    # -- argument checks -------------------------------------------------------------------------------------------

    @staticmethod
    def check_upsert_args(batch_size: int | None, on_conflict: str, default: int) -> int:
        if on_conflict not in ("overwrite", "skip"):
            raise InvalidArgumentError(f"on_conflict={on_conflict!r} must be 'overwrite' or 'skip'.")
        if batch_size is None:
            return default
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size={batch_size!r} must be a positive integer.")
        return batch_size

    def check_search_args(
        self, queries: Sequence[str], limit: int, query_filter: Any, score_threshold: float | None
    ) -> tuple[list[str], models.Filter | None]:
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise InvalidInputError(f"queries must be a list of str, not {type(queries).__name__}; wrap it: [query].")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgumentError(f"limit={limit!r} must be a positive integer.")
        if score_threshold is not None:
            low, high = {"cosine": (-1.0, 1.0), "euclid": (0.0, np.inf), "manhattan": (0.0, np.inf)}.get(
                self.distance, (-np.inf, np.inf)
            )
            if not isinstance(score_threshold, (int, float)) or not low <= score_threshold <= high:
                raise InvalidArgumentError(
                    f"score_threshold={score_threshold!r} is outside the {self.distance} score range [{low}, {high}]."
                )
        texts = [check_text(q, f"queries[{i}]", "pass words to search for") for i, q in enumerate(queries)]
        return texts, engine_filter(query_filter)

    @staticmethod
    def delete_selector(ids: Sequence[Key] | None, query_filter: Any) -> tuple[list[str] | None, models.Filter | None]:
        """(point ids, filter): exactly one of them chooses what to delete."""
        if (ids is None) == (query_filter is None):
            raise InvalidArgumentError("pass ids= (the ids upsert_texts returned) or query_filter=, exactly one.")
        if ids is None:
            return None, engine_filter(query_filter)
        return CollectionCore.point_ids(ids), None

    @staticmethod
    def point_ids(ids: Sequence[Key]) -> list[str]:
        """The engine's point ids of the caller's ids, in order."""
        return [point_id(key) for key in check_ids(ids)]

    @staticmethod
    def payload_selector(with_payload: bool) -> PayloadSelector:
        """What to fetch with hits: everything, or only the caller's id (hits always carry it)."""
        return True if with_payload else [KEY_KEY]

    # -- encoding and results --------------------------------------------------------------------------------------

    def progress(self, show: bool | None) -> bool:
        if show is None:
            show = self.show_progress_bar
        return logger.isEnabledFor(logging.INFO) if show is None else show

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.encoder.encode(texts, batch_size=self.encode_batch_size, show_progress_bar=False))

    @staticmethod
    def hits(rows: list[ScoredRecord]) -> list[Hit]:
        out = []
        for row in rows:
            key, text, fields = split_payload(row.id, row.payload)
            out.append(Hit(key, row.score, text, fields, row.id))
        return out

    @staticmethod
    def stored_texts(order: list[str], found: list[StoredRecord]) -> list[StoredText]:
        """The records found, in the order asked (by point id); missing ones left out."""
        by_id = {r.id: r for r in found}
        out = []
        for point in dict.fromkeys(order):
            record = by_id.get(point)
            if record is not None:
                key, text, fields = split_payload(point, record.payload)
                out.append(StoredText(key, text, fields, record.vector, point))
        return out

    def partial_write_error(self, exc: Exception, seen: list[PreparedPoint], stored: list[str]) -> Exception:
        """The error to raise when an upsert stops (``stored``: point ids known to be stored); the cause itself if
        nothing was stored yet."""
        if not stored:
            return exc
        done = set(stored)
        unique = list({p.point_id: p for p in seen}.values())
        return PartialWriteError(
            f"upsert into {self.collection_name!r} stopped after storing {len(done)} points "
            f"({type(exc).__name__}: {exc}). Re-run the same upsert: ids are deterministic, so stored points are "
            "overwritten (or skipped with on_conflict='skip'), never duplicated.",
            written_ids=[p.id for p in unique if p.point_id in done],
            unwritten_ids=[p.id for p in unique if p.point_id not in done],
        )

    # -- duplicates ------------------------------------------------------------------------------------------------

    def resolve_threshold(self, stored: float | None) -> float:
        if self.calibrated is not None:
            return self.calibrated
        return DEFAULT_DUPLICATE_THRESHOLD if stored is None else stored

    @staticmethod
    def threshold_from(metadata: Mapping[str, Any]) -> float | None:
        value = (metadata.get(_METADATA_KEY) or {}).get("duplicate_threshold")
        return None if value is None else float(value)

    @staticmethod
    def calibration_metadata(calibration: Calibration, current: Mapping[str, Any]) -> dict[str, Any]:
        """The collection's sbert-qdrant metadata with this calibration merged in."""
        ours = dict(current.get(_METADATA_KEY) or {})
        ours.update(duplicate_threshold=calibration.threshold, calibration=vars(calibration))
        return {_METADATA_KEY: ours}

    @staticmethod
    def split_pairs(labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> tuple[list[str], list[str], list[int]]:
        left, right, labels = [], [], []
        for i, pair in enumerate(labelled_pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 3:
                raise InvalidInputError(
                    f"labelled_pairs[{i}] must be (text_a, text_b, is_duplicate), got {pair!r:.80}."
                )
            a, b, label = pair
            left.append(check_text(a, f"labelled_pairs[{i}][0]", "drop the pair"))
            right.append(check_text(b, f"labelled_pairs[{i}][1]", "drop the pair"))
            if label not in (0, 1):  # True/False included
                raise InvalidInputError(f"labelled_pairs[{i}] has label {label!r}; use 1/True or 0/False.")
            labels.append(int(label))
        return left, right, labels

    def pair_scores(self, left: list[str], right: list[str]) -> np.ndarray:
        a = self.encode(left)
        b = self.encode(right)
        a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return (a * b).sum(axis=1)

    @staticmethod
    def without_self(texts: list[str], found: list[list[Hit]], limit: int) -> list[list[Hit]]:
        """Leave out the record stored from the very same text without an id of its own."""
        own = [text_id(text) for text in texts]
        return [[h for h in hits if h.point_id != point][:limit] for point, hits in zip(own, found, strict=True)]

    @staticmethod
    def pairs_from(
        records: list[StoredRecord], threshold: float, top_k: int, limit: int | None, chunk_size: int
    ) -> list[DuplicatePair]:
        """The most similar pairs among stored records (read with their vectors), best first."""
        records = [r for r in records if r.vector is not None]  # a point without our vector has nothing to compare
        if not records:
            return []
        ids, texts = [], []
        for record in records:
            key, text, _ = split_payload(record.id, record.payload)
            ids.append(key)
            texts.append(text)
        vectors = np.stack([r.vector for r in records])  # type: ignore[misc]
        pairs = mine_pairs(vectors, threshold, top_k, chunk_size)
        if limit is not None:
            pairs = pairs[:limit]
        return [DuplicatePair(score, ids[i], texts[i], ids[j], texts[j]) for i, j, score in pairs]
