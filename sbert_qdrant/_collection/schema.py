"""A collection's settings (frozen, checked once) and its shape in the engine: the spec to create, the checks of an
existing collection, and what sbert-qdrant keeps in the collection's metadata."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qdrant_client import models

from ..dedup import DEFAULT_DUPLICATE_THRESHOLD, Calibration
from ..documents import CHUNK_FIELD
from ..encoder import Bm25
from ..errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    InvalidArgumentError,
    UnsupportedError,
)
from ..protocols import DocumentEncoder, TextEncoder, identity_of, same_encoder
from ..records import KEY_KEY, TEXT_KEY, VectorShape, check_writable
from ..store.base import CollectionSpec, ExistingCollection, VectorSpec
from ..types import DISTANCES, ON_CONFLICTS, QUANTIZATIONS, Distance, Quantization

SPARSE_NAME = "bm25"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


def valid_name(value: object) -> bool:
    """Whether a collection (or alias) name is one Qdrant accepts: 1-255 letters, digits, '_', '-' or '."."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


_METADATA_KEY = "sbert_qdrant"


@dataclass(frozen=True)
class CollectionSettings:
    """Everything a collection was opened with, checked: see ``AsyncTextCollection`` for each argument."""

    collection_name: str
    encoder: TextEncoder
    vector_name: str = "text"
    distance: Distance = "cosine"
    on_disk: bool = False
    hnsw: models.HnswConfigDiff | None = None
    quantization: Quantization | None = None
    shard_number: int | None = None
    replication_factor: int | None = None
    payload_indexes: Mapping[str, models.PayloadSchemaType] = field(default_factory=dict)
    encode_batch_size: int = 32
    show_progress_bar: bool | None = None
    #: BM25 for a collection this creates (None: dense only).
    bm25: Bm25 | None = None
    #: Whether the caller chose the BM25 settings (an existing collection's must then match).
    bm25_explicit: bool = False
    #: Payload field of the text: ours (``"text"``), or another tool's in a collection it wrote (read-only).
    text_field: str = TEXT_KEY

    @classmethod
    def checked(cls, collection_name: str, encoder: object, *, sparse: object, **options: Any) -> CollectionSettings:
        """The settings, each argument checked (before anything is written)."""
        if not valid_name(collection_name):
            raise InvalidArgumentError(
                f"collection_name={collection_name!r} is not valid: use 1-255 letters, digits, '_', '-' or '.', "
                "starting with a letter or digit."
            )
        if not isinstance(encoder, TextEncoder):
            raise InvalidArgumentError(
                f"encoder must be a SentenceEncoder or have what a collection uses (dimension, normalizes, "
                f"encode_document, encode_query: sbert_qdrant.protocols.TextEncoder), not {type(encoder).__name__}."
            )
        distance, quantization = options.get("distance", "cosine"), options.get("quantization")
        batch, text_field = options.get("encode_batch_size", 32), options.get("text_field", TEXT_KEY)
        vector_name = options.get("vector_name", "text")
        if distance not in DISTANCES:
            raise InvalidArgumentError(f"distance={distance!r} must be one of {DISTANCES}.")
        if quantization is not None and quantization not in QUANTIZATIONS:
            raise InvalidArgumentError(f"quantization={quantization!r} must be None or one of {QUANTIZATIONS}.")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidArgumentError(f"encode_batch_size={batch!r} must be a positive integer.")
        if not (sparse is None or sparse == "bm25" or isinstance(sparse, Bm25)):
            raise InvalidArgumentError(f"sparse={sparse!r} must be 'bm25', a Bm25(...) configuration, or None.")
        if sparse is not None and vector_name == SPARSE_NAME:
            raise InvalidArgumentError(f"vector_name={vector_name!r} is the sparse vector's name; choose another.")
        if not isinstance(text_field, str) or not text_field or text_field == KEY_KEY:
            raise InvalidArgumentError(
                f"text_field={text_field!r} must name the payload field holding the text, e.g. 'page_content'."
            )
        options["payload_indexes"] = dict(options.get("payload_indexes") or {})
        bm25 = Bm25() if sparse == "bm25" else sparse
        return cls(collection_name, encoder, bm25=bm25, bm25_explicit=isinstance(sparse, Bm25), **options)  # type: ignore[arg-type]

    def describe(self, flavour: str, store: object) -> str:
        """The collection's repr."""
        return (
            f"{flavour}({self.collection_name!r}, dimension={self.encoder.dimension}, "
            f"distance={self.distance!r}, sparse={SPARSE_NAME if self.bm25 else None!r}, "
            f"store={type(store).__name__})"
        )

    def spec(self) -> CollectionSpec:
        """The collection to create."""
        ours: dict[str, Any] = {"dimension": self.encoder.dimension, "normalized": self.encoder.normalizes}
        if identity_of(self.encoder) is not None:
            ours["encoder"] = identity_of(self.encoder)
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

    def payload_indexes_to_create(self) -> dict[str, models.PayloadSchemaType]:
        """The caller's payload indexes, and the one that tells chunks from texts (every text read filters on it)."""
        return {CHUNK_FIELD: models.PayloadSchemaType.INTEGER, **self.payload_indexes}

    def missing(self) -> CollectionNotFoundError:
        return CollectionNotFoundError(
            f"collection {self.collection_name!r} does not exist yet; upsert_texts() creates it."
        )

    def check_write(self, batch_size: int | None, on_conflict: str, default: int) -> int:
        """The batch size of a write, once its arguments and the collection's writability are checked."""
        self.require_writable()
        if on_conflict not in ON_CONFLICTS:
            raise InvalidArgumentError(f"on_conflict={on_conflict!r} must be one of {ON_CONFLICTS}.")
        if batch_size is None:
            return default
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size={batch_size!r} must be a positive integer.")
        return batch_size

    def require_writable(self) -> None:
        check_writable(self.collection_name, self.text_field)

    def document_encoder(self) -> DocumentEncoder:
        """The encoder, when it can cut documents into chunks (it has a tokenizer)."""
        if not isinstance(self.encoder, DocumentEncoder):
            raise UnsupportedError(
                f"{self.encoder!r} has no tokenizer (document_token_limit, token_spans), so it cannot cut documents "
                "into chunks; use upsert_texts (one vector per text) or a SentenceEncoder for documents."
            )
        return self.encoder

    def existing_bm25(self, existing: ExistingCollection) -> Bm25 | None:
        """Check an existing collection against these settings (never recreate it silently); its BM25 settings
        when sbert-qdrant wrote a sparse vector into it, else None (dense only)."""
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
        self.check_encoder(ours(existing.metadata).get("encoder"))
        stored = ours(existing.metadata).get("bm25")
        if SPARSE_NAME not in existing.sparse_vectors or stored is None:
            return None  # dense only: searches in sparse or hybrid mode say how to add BM25
        active = Bm25.from_dict(stored)
        if self.bm25_explicit and self.bm25 != active:
            raise CollectionMismatchError(
                f"collection {name!r} was indexed with {active!r}, not {self.bm25!r}; queries must be tokenized "
                "like the stored texts: leave sparse= at its default to use the collection's settings, or re-index "
                "into another collection_name."
            )
        return active

    def given_vectors(self, vectors_from: str | None, vectors: object, rows: bool = False) -> VectorShape | None:
        """The shape vectors encoded elsewhere must have (None: the collection encodes), once their encoder is
        checked to be the collection's."""
        if vectors_from is None:
            if vectors is not None:
                raise InvalidArgumentError(
                    "vectors= needs vectors_from=, the identity of the encoder that made them (encoder.identity)."
                )
            return None
        if not isinstance(vectors_from, str) or not vectors_from:
            raise InvalidArgumentError(f"vectors_from={vectors_from!r} must be an encoder identity (encoder.identity).")
        identity = identity_of(self.encoder)
        if identity is not None and not same_encoder(vectors_from, identity):
            raise CollectionMismatchError(
                f"the vectors come from encoder {vectors_from}, but collection {self.collection_name!r} is written "
                f"with {identity}: vectors of another model are not comparable; encode with the collection's "
                "encoder, or write them into a collection opened with their own model."
            )
        return VectorShape(self.encoder.dimension, self.encoder.normalizes, rows)

    def check_encoder(self, written_by: str | None) -> None:
        """Refuse an encoder other than the one that wrote the collection (when both identities are known)."""
        identity = identity_of(self.encoder)
        if written_by is None or identity is None or same_encoder(written_by, identity):
            return
        raise CollectionMismatchError(
            f"collection {self.collection_name!r} was written by encoder {written_by}, not {identity} (another model "
            "or other weights): its vectors and this encoder's are not comparable. Open it with the model that wrote "
            "it, or re-embed it into a new collection with this encoder (reembed)."
        )


def ours(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """sbert-qdrant's part of a collection's metadata."""
    return dict(metadata.get(_METADATA_KEY) or {})


def stored_threshold(metadata: Mapping[str, Any]) -> float:
    """The duplicate threshold calibrated for the collection, else the default."""
    value = ours(metadata).get("duplicate_threshold")
    return DEFAULT_DUPLICATE_THRESHOLD if value is None else float(value)


def holds_documents(metadata: Mapping[str, Any]) -> bool:
    """Whether documents were ever written into the collection (then text reads must leave their chunks out)."""
    return bool(ours(metadata).get("documents"))


def with_documents(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The collection's metadata update that records that it holds documents."""
    return {_METADATA_KEY: ours(metadata) | {"documents": True}}


def paused_indexing(metadata: Mapping[str, Any]) -> int | None:
    """The indexing threshold a bulk load paused (to restore), None when indexing is not paused."""
    value = ours(metadata).get("paused_indexing_threshold")
    return None if value is None else int(value)


def with_paused_indexing(metadata: Mapping[str, Any], threshold: int | None) -> dict[str, Any]:
    """The collection's metadata update that records (or, with None, clears) a paused indexing threshold."""
    updated = {k: v for k, v in ours(metadata).items() if k != "paused_indexing_threshold"}
    if threshold is not None:
        updated["paused_indexing_threshold"] = threshold
    return {_METADATA_KEY: updated}


def with_calibration(metadata: Mapping[str, Any], calibration: Calibration) -> dict[str, Any]:
    """The collection's metadata update that stores a calibration."""
    updated = ours(metadata) | {"duplicate_threshold": calibration.threshold, "calibration": vars(calibration)}
    return {_METADATA_KEY: updated}
