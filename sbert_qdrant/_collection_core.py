"""The engine-free half of a text collection, shared by the sync and async flavours: settings, checks, results.

Held by each collection as a private object (composition): nothing here is public API.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

import numpy as np
from qdrant_client import models

from ._filters import engine_filter
from .dedup import DEFAULT_DUPLICATE_THRESHOLD, Calibration, mine_pairs
from .documents import DocumentHit
from .encoder import Bm25, CrossEncoder, SentenceEncoder
from .errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    InvalidArgumentError,
    InvalidInputError,
    PartialWriteError,
    UnsupportedError,
)
from .records import (
    KEY_KEY,
    TEXT_KEY,
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
    Diversified,
    ExistingCollection,
    Fused,
    Fusion,
    Nearest,
    PayloadSelector,
    PointVectors,
    Quantization,
    ScoredRecord,
    SearchQuery,
    StoredRecord,
    VectorSpec,
)

logger = logging.getLogger("sbert_qdrant.collection")
T = TypeVar("T")

OnConflict = Literal["overwrite", "skip"]
SearchMode = Literal["dense", "sparse", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("dense", "sparse", "hybrid")
FUSIONS: tuple[Fusion, ...] = ("rrf", "dbsf")
SPARSE_NAME = "bm25"
#: Reciprocal rank fusion's k: Qdrant's default, and the best of 2, 10 and 60 on BEIR SciFact's train split.
RRF_K = 2
#: Candidates each source of a hybrid search (and MMR) draws at least, whatever the limit.
MIN_CANDIDATES = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
_METADATA_KEY = "sbert_qdrant"


@dataclass(frozen=True)
class SearchPlan:
    """How to turn query texts into engine searches; ``symmetric`` encodes them as stored texts (duplicates)."""

    mode: SearchMode = "dense"
    fusion: Fusion = "dbsf"
    weights: tuple[float, float] | None = None
    diversity: float | None = None
    candidates: int = MIN_CANDIDATES
    symmetric: bool = False


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
        sparse: Bm25 | Literal["bm25"] | None = "bm25",
        text_field: str = TEXT_KEY,
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
        if not (sparse is None or sparse == "bm25" or isinstance(sparse, Bm25)):
            raise InvalidArgumentError(f"sparse={sparse!r} must be 'bm25', a Bm25(...) configuration, or None.")
        if sparse is not None and vector_name == SPARSE_NAME:
            raise InvalidArgumentError(f"vector_name={vector_name!r} is the sparse vector's name; choose another.")
        if not isinstance(text_field, str) or not text_field or text_field == KEY_KEY:
            raise InvalidArgumentError(
                f"text_field={text_field!r} must name the payload field holding the text, e.g. 'page_content'."
            )
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
        #: Payload field of the text: ours (``"text"``), or another tool's in a collection it wrote (read-only).
        self.text_field = text_field
        self.calibrated: float | None = None
        #: BM25 for a collection this creates; ``bm25_explicit``: the caller chose the settings.
        self.bm25: Bm25 | None = Bm25() if sparse == "bm25" else sparse
        self.bm25_explicit = isinstance(sparse, Bm25)
        #: BM25 of the collection as it is (None until checked or created, and for a dense-only collection).
        self.active_bm25: Bm25 | None = None

    def describe(self, flavour: str, store: object) -> str:
        """The collection's repr."""
        return (
            f"{flavour}({self.collection_name!r}, dimension={self.encoder.dimension}, "
            f"distance={self.distance!r}, sparse={SPARSE_NAME if self.bm25 else None!r}, "
            f"store={type(store).__name__})"
        )

    # -- the collection's shape ------------------------------------------------------------------------------------

    def spec(self) -> CollectionSpec:
        ours: dict[str, Any] = {"dimension": self.encoder.dimension, "normalized": self.encoder.normalizes}
        if self.bm25 is not None:
            ours["bm25"] = self.bm25.to_dict()
        return CollectionSpec(
            name=self.collection_name,
            vector_name=self.vector_name,
            vector=VectorSpec(self.encoder.dimension, self.distance),
            on_disk=self.on_disk,
            hnsw=self.hnsw,
            quantization=self.quantization,
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
            sparse_name=SPARSE_NAME if self.bm25 else None,
            metadata={_METADATA_KEY: ours},
        )

    def created(self) -> None:
        """The collection was created from ``spec()``."""
        self.active_bm25 = self.bm25

    def require_creatable(self, create: bool) -> None:
        if not create:
            raise CollectionNotFoundError(
                f"collection {self.collection_name!r} does not exist yet; upsert_texts() creates it."
            )

    def check_existing(self, existing: ExistingCollection) -> None:
        """Refuse an existing collection whose vectors do not fit this encoder (never recreate it silently); take
        its BM25 settings when sbert-qdrant wrote a sparse vector into it."""
        name = self.collection_name
        found = existing.vectors.get(self.vector_name)
        if found is None:
            raise CollectionMismatchError(
                f"collection {name!r} has no vector named {self.vector_name!r} (it has {sorted(existing.vectors)}); "
                f"pass vector_name= one of those, or recreate=True to replace the collection."
            )
        wanted = VectorSpec(self.encoder.dimension, self.distance)
        if found != wanted:
            raise CollectionMismatchError(
                f"collection {name!r} stores {found.size}-dim {found.distance} vectors under {self.vector_name!r}, "
                f"but this encoder makes {wanted.size}-dim {wanted.distance} ones; use the model the collection "
                "was built with, another collection_name, or recreate=True to replace it (deletes its points)."
            )
        stored = (existing.metadata.get(_METADATA_KEY) or {}).get("bm25")
        if SPARSE_NAME not in existing.sparse_vectors or stored is None:
            return  # dense only: searches in sparse or hybrid mode say how to add BM25
        active = Bm25.from_dict(stored)
        if self.bm25_explicit and self.bm25 != active:
            raise CollectionMismatchError(
                f"collection {name!r} was indexed with {active!r}, not {self.bm25!r}; queries must be tokenized "
                "like the stored texts: leave sparse= at its default to use the collection's settings, or re-index "
                "into another collection_name."
            )
        self.active_bm25 = active

    # -- argument checks -------------------------------------------------------------------------------------------

    def check_upsert_args(self, batch_size: int | None, on_conflict: str, default: int) -> int:
        if self.text_field != TEXT_KEY:
            raise UnsupportedError(
                f"collection {self.collection_name!r} is opened with text_field={self.text_field!r} to read a "
                "collection another tool wrote; write to it with that tool, or copy its texts into a collection "
                "of sbert-qdrant's own (default text_field)."
            )
        if on_conflict not in ("overwrite", "skip"):
            raise InvalidArgumentError(f"on_conflict={on_conflict!r} must be 'overwrite' or 'skip'.")
        if batch_size is None:
            return default
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size={batch_size!r} must be a positive integer.")
        return batch_size

    def check_search_args(
        self,
        queries: Sequence[str],
        limit: int,
        query_filter: Any,
        score_threshold: float | None,
        plan: SearchPlan = SearchPlan(),
    ) -> tuple[list[str], models.Filter | None]:
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise InvalidInputError(f"queries must be a list of str, not {type(queries).__name__}; wrap it: [query].")
        _check_limit(limit)
        if score_threshold is not None and plan.mode != "dense":
            if not isinstance(score_threshold, (int, float)) or not np.isfinite(score_threshold):
                raise InvalidArgumentError(f"score_threshold={score_threshold!r} must be a finite number.")
        elif score_threshold is not None:
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
    def search_plan(
        mode: str,
        fusion: str,
        weights: Sequence[float] | None,
        diversity: float | None,
        candidates: int | None,
        limit: int,
    ) -> SearchPlan:
        """Check the search mode arguments (before anything is encoded or asked)."""
        _check_limit(limit)
        if mode not in SEARCH_MODES:
            raise InvalidArgumentError(f"mode={mode!r} must be one of {SEARCH_MODES}.")
        if fusion not in FUSIONS:
            raise InvalidArgumentError(f"fusion={fusion!r} must be one of {FUSIONS}.")
        pair: tuple[float, float] | None = None
        if weights is not None:
            if mode != "hybrid" or fusion != "rrf":
                raise InvalidArgumentError(
                    f"weights={weights!r} apply to mode='hybrid' with fusion='rrf' only (got mode={mode!r}, "
                    f"fusion={fusion!r}); drop weights= or use those."
                )
            values = list(weights) if isinstance(weights, Sequence) and not isinstance(weights, str) else []
            if (
                len(values) != 2
                or not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in values)
                or not all(np.isfinite(w) and w >= 0 for w in values)
                or sum(values) <= 0
            ):
                raise InvalidArgumentError(
                    f"weights={weights!r} must be two non-negative numbers (dense, sparse), not both 0, "
                    "e.g. (1.0, 2.0)."
                )
            pair = (float(values[0]), float(values[1]))
        if diversity is not None and (
            isinstance(diversity, bool) or not isinstance(diversity, (int, float)) or not 0.0 <= diversity <= 1.0
        ):
            raise InvalidArgumentError(
                f"diversity={diversity!r} must be between 0 (relevance only) and 1 (diversity only), or None."
            )
        if candidates is None:
            candidates = max(limit, MIN_CANDIDATES)
        elif isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < limit:
            raise InvalidArgumentError(f"candidates={candidates!r} must be an integer >= limit ({limit}).")
        return SearchPlan(mode, fusion, pair, None if diversity is None else float(diversity), candidates)

    def require_sparse(self, plan: SearchPlan) -> None:
        """Refuse a sparse or hybrid search of a collection without BM25 vectors, naming the fix."""
        if plan.mode != "dense" and self.active_bm25 is None:
            raise CollectionMismatchError(
                f"collection {self.collection_name!r} has no BM25 vectors written by sbert-qdrant, so "
                f"mode={plan.mode!r} cannot search it: use mode='dense', or re-index its texts into a new collection "
                "(TextCollection(new_name, sparse='bm25').upsert_texts(...)); an existing collection is never "
                "recreated silently."
            )

    def search_queries(self, texts: list[str], plan: SearchPlan) -> list[SearchQuery]:
        """Encode query texts and build one engine search each (blocking: run off the event loop)."""
        self.require_sparse(plan)
        dense: list[list[float]] = []
        if plan.mode != "sparse" or plan.diversity is not None:
            dense = (self.encode_documents(texts) if plan.symmetric else self.encode_queries(texts)).tolist()
        lexical = [self.active_bm25.embed_query(t) for t in texts] if self.active_bm25 and plan.mode != "dense" else []
        searches: list[SearchQuery] = []
        for i in range(len(texts)):
            base: Nearest | Fused
            if plan.mode == "dense":
                base = Nearest(self.vector_name, dense[i])
            elif plan.mode == "sparse":
                base = Nearest(SPARSE_NAME, lexical[i])
            else:
                sources = (Nearest(self.vector_name, dense[i]), Nearest(SPARSE_NAME, lexical[i]))
                base = Fused(sources, plan.fusion, plan.candidates, plan.weights, RRF_K)
            if plan.diversity is None:
                searches.append(base)
            else:
                source = None if plan.mode == "dense" else base
                searches.append(Diversified(self.vector_name, dense[i], plan.diversity, plan.candidates, source))
        return searches

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

    def payload_selector(self, with_payload: bool, rerank: CrossEncoder | None = None) -> PayloadSelector:
        """What to fetch with hits: everything, or only the caller's id (hits always carry it), and the text when a
        cross-encoder is to read it."""
        if with_payload:
            return True
        return [KEY_KEY, self.text_field] if rerank is not None else [KEY_KEY]

    # -- re-ranking ------------------------------------------------------------------------------------------------

    @staticmethod
    def rerank_depth(rerank: object, rerank_candidates: int, limit: int) -> int:
        """How many hits to retrieve: ``limit``, or ``rerank_candidates`` (at least ``limit``) to re-rank."""
        _check_limit(limit)
        if rerank is None:
            return limit
        if not isinstance(rerank, CrossEncoder) or rerank.num_labels != 1:
            raise InvalidArgumentError(
                f"rerank= must be a CrossEncoder with one output (a relevance score), not {rerank!r:.80}; load one "
                "with CrossEncoder.load(folder) or train one (sbert-qdrant train --objective cross-encoder-binary)."
            )
        if isinstance(rerank_candidates, bool) or not isinstance(rerank_candidates, int) or rerank_candidates < 1:
            raise InvalidArgumentError(f"rerank_candidates={rerank_candidates!r} must be a positive integer.")
        return max(limit, rerank_candidates)

    def cross_scores(self, cross: CrossEncoder, pairs: list[tuple[str, str]]) -> list[float]:
        """Cross-encoder scores of (query, text) pairs (blocking: run off the event loop)."""
        if not pairs:
            return []
        return [float(s) for s in np.asarray(cross.predict(pairs, batch_size=self.encode_batch_size)).ravel()]

    def reranked(self, queries: list[str], found: list[list[Hit]], cross: CrossEncoder, limit: int) -> list[list[Hit]]:
        """Each query's hits re-scored by the cross-encoder, best ``limit`` first."""
        pairs = [(q, h.text or "") for q, hits in zip(queries, found, strict=True) for h in hits]
        scores = iter(self.cross_scores(cross, pairs))
        out = []
        for hits in found:
            rescored = [replace(h, score=next(scores), retrieval_score=h.score) for h in hits]
            out.append(sorted(rescored, key=lambda h: -h.score)[:limit])
        return out

    def reranked_documents(
        self, query: str, hits: list[DocumentHit], cross: CrossEncoder, limit: int, scoring: str
    ) -> list[DocumentHit]:
        """Documents re-scored by the cross-encoder over their listed chunks, best ``limit`` first."""
        scores = iter(self.cross_scores(cross, [(query, c.text) for h in hits for c in h.chunks]))
        out = []
        for hit in hits:
            chunks = [replace(c, score=next(scores), retrieval_score=c.score) for c in hit.chunks]
            chunks.sort(key=lambda c: -c.score)
            score = chunks[0].score if scoring == "max" else sum(c.score for c in chunks)
            out.append(replace(hit, score=score, chunks=chunks))
        return sorted(out, key=lambda h: -h.score)[:limit]

    # -- documents -------------------------------------------------------------------------------------------------

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the encoder's tokens of ``text`` (no special tokens)."""
        encoded = self.encoder.transformer.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        return [(int(start), int(end)) for start, end in encoded["offset_mapping"]]

    def chunk_budget(self, chunk_tokens: int | None) -> int:
        """Tokens per chunk: at most what the encoder reads whole, after its special tokens and document prompt."""
        tokenizer = self.encoder.transformer.tokenizer
        overhead = len(tokenizer(self.encoder.document_prompt + "x", verbose=False)["input_ids"]) - 1
        room = self.encoder.max_seq_length - overhead
        if chunk_tokens is None:
            return room
        if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or not 8 <= chunk_tokens <= room:
            raise InvalidArgumentError(
                f"chunk_tokens={chunk_tokens!r} must be an integer from 8 to {room} (the encoder's max_seq_length "
                f"{self.encoder.max_seq_length} less its special tokens and document prompt), or None for {room}."
            )
        return chunk_tokens

    # -- encoding and results --------------------------------------------------------------------------------------

    def progress(self, show: bool | None) -> bool:
        if show is None:
            show = self.show_progress_bar
        return logger.isEnabledFor(logging.INFO) if show is None else show

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        """Dense vectors of texts as stored (the model's document prompt, if it has one)."""
        return np.asarray(
            self.encoder.encode_document(texts, batch_size=self.encode_batch_size, show_progress_bar=False)
        )

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Dense vectors of search queries (the model's query prompt, if it has one)."""
        return np.asarray(self.encoder.encode_query(texts, batch_size=self.encode_batch_size, show_progress_bar=False))

    def embed_documents(self, texts: list[str]) -> PointVectors:
        """Everything stored for texts: the dense vectors and, in a collection with BM25, the term weights."""
        dense = self.encode_documents(texts)
        if self.active_bm25 is None:
            return PointVectors(self.vector_name, dense)
        return PointVectors(self.vector_name, dense, SPARSE_NAME, self.active_bm25.embed_documents(texts))

    def hits(self, rows: list[ScoredRecord]) -> list[Hit]:
        """Hits in the engine's order; points with equal scores (common after rank fusion) in point-id order, which
        engines do not fix."""
        out = []
        for row in tie_ordered(rows, _id):
            key, text, fields = split_payload(row.id, row.payload, self.text_field)
            out.append(Hit(key, row.score, text, fields, row.id))
        return out

    def stored_texts(self, order: list[str], found: list[StoredRecord]) -> list[StoredText]:
        """The records found, in the order asked (by point id); missing ones left out."""
        by_id = {r.id: r for r in found}
        out = []
        for point in dict.fromkeys(order):
            record = by_id.get(point)
            if record is not None:
                key, text, fields = split_payload(point, record.payload, self.text_field)
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
        a = self.encode_documents(left)
        b = self.encode_documents(right)
        a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return (a * b).sum(axis=1)

    @staticmethod
    def without_self(texts: list[str], found: list[list[Hit]], limit: int) -> list[list[Hit]]:
        """Leave out the record stored from the very same text without an id of its own."""
        own = [text_id(text) for text in texts]
        return [[h for h in hits if h.point_id != point][:limit] for point, hits in zip(own, found, strict=True)]

    def pairs_from(
        self, records: list[StoredRecord], threshold: float, top_k: int, limit: int | None, chunk_size: int
    ) -> list[DuplicatePair]:
        """The most similar pairs among stored records (read with their vectors), best first."""
        records = [r for r in records if r.vector is not None]  # a point without our vector has nothing to compare
        if not records:
            return []
        ids, texts = [], []
        for record in records:
            key, text, _ = split_payload(record.id, record.payload, self.text_field)
            ids.append(key)
            texts.append(text)
        vectors = np.stack([r.vector for r in records])  # type: ignore[misc]
        pairs = mine_pairs(vectors, threshold, top_k, chunk_size)
        if limit is not None:
            pairs = pairs[:limit]
        return [DuplicatePair(score, ids[i], texts[i], ids[j], texts[j]) for i, j, score in pairs]


def _id(row: ScoredRecord) -> str:
    return row.id


def _score(item: Any) -> float:
    return float(item.score)


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgumentError(f"limit={limit!r} must be a positive integer.")


def tie_ordered(items: list[T], key: Callable[[T], Any], score: Callable[[T], float] = _score) -> list[T]:
    """Items in the engine's order, those with equal scores in ``key`` order (engines do not fix that order)."""
    return [item for _, tied in itertools.groupby(items, key=score) for item in sorted(tied, key=key)]
