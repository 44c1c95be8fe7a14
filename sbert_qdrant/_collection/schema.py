"""A collection's settings (frozen, checked once) and its shape in the engine: the spec to create, the checks of an
existing collection, and what sbert-qdrant keeps in the collection's metadata."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

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
from ..layout import SPARSE_NAME, PointLayout, VectorSlot
from ..protocols import DocumentEncoder, TextEncoder, TokenEncoder, identity_of, same_encoder
from ..records import TEXT_KEY, VectorShape
from ..store.base import CollectionSpec, ExistingCollection, VectorSpec
from ..types import DISTANCES, ON_CONFLICTS, QUANTIZATIONS, Distance, Quantization
from .names import check_name
from .slots import layout_of, slot_encoders

_METADATA_KEY = "sbert_qdrant"


@dataclass(frozen=True)
class CollectionConfig:
    """Everything a collection was opened with, checked: see ``AsyncTextCollection`` for each argument.

    ``layout`` is where a point keeps what (its slots filled: sizes and encoder identities); ``encoders`` fill its
    dense slots, by slot name, the primary's first.
    """

    collection_name: str
    encoders: Mapping[str, TextEncoder]
    layout: PointLayout
    #: The encoder of each multivector slot, by slot name.
    token_encoders: Mapping[str, TokenEncoder] = field(default_factory=dict)
    on_disk: bool = False
    hnsw: models.HnswConfigDiff | None = None
    quantization: Quantization | None = None
    shard_number: int | None = None
    replication_factor: int | None = None
    payload_indexes: Mapping[str, models.PayloadSchemaType] = field(default_factory=dict)
    encode_batch_size: int = 32
    show_progress_bar: bool | None = None
    #: BM25 for a collection this creates (None: no sparse slot).
    bm25: Bm25 | None = None
    #: Whether the caller chose the BM25 settings (an existing collection's must then match).
    bm25_explicit: bool = False
    #: Slots the stored collection records that this instance has no encoder for: read, never written.
    unfilled: frozenset[str] = frozenset()

    @classmethod
    def checked(
        cls,
        collection_name: str,
        encoder: object,
        *,
        sparse: object,
        layout: object = None,
        named_vectors: Mapping[str, object] | None = None,
        vector_name: str = "text",
        text_field: str = TEXT_KEY,
        distance: str = "cosine",
        first_stage_dim: int | None = None,
        **options: Any,
    ) -> CollectionConfig:
        """The settings, each argument checked (before anything is written)."""
        check_name(collection_name, "collection_name")
        quantization, batch = options.get("quantization"), options.get("encode_batch_size", 32)
        if distance not in DISTANCES:
            raise InvalidArgumentError(f"distance={distance!r} must be one of {DISTANCES}.")
        if quantization is not None and quantization not in QUANTIZATIONS:
            raise InvalidArgumentError(f"quantization={quantization!r} must be None or one of {QUANTIZATIONS}.")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidArgumentError(f"encode_batch_size={batch!r} must be a positive integer.")
        if not (sparse is None or sparse == "bm25" or isinstance(sparse, Bm25)):
            raise InvalidArgumentError(f"sparse={sparse!r} must be 'bm25', a Bm25(...) configuration, or None.")
        chosen = layout_of(layout, sparse, named_vectors or {}, vector_name, text_field, distance, first_stage_dim)
        encoders, token_encoders = slot_encoders(chosen, encoder, named_vectors or {})
        sizes = {name: (e.dimension, identity_of(e)) for name, e in {**encoders, **token_encoders}.items()}
        options["payload_indexes"] = dict(options.get("payload_indexes") or {})
        bm25 = (sparse if isinstance(sparse, Bm25) else Bm25()) if chosen.sparse is not None else None
        return cls(
            collection_name,
            encoders,
            chosen.filled(sizes),
            token_encoders,
            bm25=bm25,
            bm25_explicit=isinstance(sparse, Bm25),
            **options,
        )

    @property
    def encoder(self) -> TextEncoder:
        """The primary slot's encoder."""
        return self.encoders[self.vector_name]

    @property
    def vector_name(self) -> str:
        return self.layout.primary.name

    @property
    def distance(self) -> str:
        return self.layout.primary.distance

    @property
    def text_field(self) -> str:
        return self.layout.text_field

    @property
    def first_stage_dim(self) -> int | None:
        """The size of the primary's first stage (None: without one)."""
        first = self.layout.first_stage(self.vector_name)
        return None if first is None else first.size

    def token_encoder_of(self, slot: str) -> TokenEncoder:
        """The token encoder of the multivector slot ``slot`` (an unknown one refused, naming those there are)."""
        name = self.layout.slot(slot, "multivector", "rescore").name
        if name in self.unfilled:
            raise self._without_encoder(f"rescore={slot!r}", [name])
        return self.token_encoders[name]

    def encoder_of(self, using: str | None) -> tuple[str, TextEncoder]:
        """The dense slot ``using`` (None: the primary) and its encoder."""
        name = self.vector_name if using is None else self.layout.slot(using, "dense").name
        if name in self.unfilled:
            raise self._without_encoder(f"using={using!r}", [name])
        return name, self.encoders[name]

    def describe(self, flavour: str, store: object) -> str:
        """The collection's repr."""
        slots = ", ".join(
            f"{s.name or '<unnamed>'}: {s.kind}{f' {s.size}' if s.size else ''}"
            f"{' (no encoder here)' if s.name in self.unfilled else ''}"
            for s in self.layout.slots
        )
        return (
            f"{flavour}({self.collection_name!r}, dimension={self.encoder.dimension}, "
            f"distance={self.distance!r}, slots={{{slots}}}, store={type(store).__name__})"
        )

    def spec(self) -> CollectionSpec:
        """The collection to create, from the layout's slots."""
        ours: dict[str, Any] = {"dimension": self.encoder.dimension, "normalized": self.encoder.normalizes}
        if identity_of(self.encoder) is not None:
            ours["encoder"] = identity_of(self.encoder)
        filled = [s for s in self.layout.slots if s.kind != "sparse" and s.name != self.vector_name]
        others = {s.name: s.filled_by for s in filled if s.filled_by is not None}
        if others:
            ours["slots"] = others
        first = self.layout.first_stage(self.vector_name)
        if first is not None:
            ours["first_stage"] = {"slot": first.name, "dim": first.size}
        if self.bm25 is not None:
            ours["bm25"] = self.bm25.to_dict()
        vectors = [s for s in self.layout.slots if s.kind != "sparse"]
        sparse = self.layout.sparse
        return CollectionSpec(
            name=self.collection_name,
            vectors={s.name: VectorSpec(s.size, s.distance, s.kind) for s in vectors},
            sparse=frozenset({sparse.name}) if sparse is not None else frozenset(),
            unindexed=frozenset(s.name for s in vectors if not s.index),
            on_disk=self.on_disk,
            hnsw=self.hnsw,
            quantization=self.quantization,
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
            metadata={_METADATA_KEY: ours},
        )

    def payload_indexes_to_create(self) -> dict[str, models.PayloadSchemaType]:
        """The caller's payload indexes, and the one that tells chunks from texts (every text read filters on it)."""
        return {CHUNK_FIELD: models.PayloadSchemaType.INTEGER, **self.payload_indexes}

    def missing(self, names: list[str]) -> CollectionNotFoundError:
        """The error of a read of a collection that does not exist, naming those that do (``names``)."""
        there = ", ".join(repr(n) for n in names) if names else "none"
        return CollectionNotFoundError(
            f"collection {self.collection_name!r} does not exist in this engine (its collections: {there}); check "
            "the name and the engine (location=, url=), or write to it first: upsert_texts() or upsert_documents() "
            "creates it."
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
        self.layout.check_writable(self.collection_name)

    def require_filled(self) -> None:
        """Refuse a write that would leave a slot the stored collection records empty (its search never finding
        the new points)."""
        if self.unfilled:
            raise self._without_encoder("a write", sorted(self.unfilled))

    def _without_encoder(self, what: str, names: list[str]) -> CollectionMismatchError:
        """The error of ``what`` (a write, or a search's argument) needing slots this instance has no encoder for."""
        by = {slot.name: slot.filled_by or "that wrote it" for slot in self.layout.slots}
        given = ", ".join(f"{name!r}: <encoder {by[name]}>" for name in names)
        why = (
            "a write would leave them empty (a search of them would never find the new points); nothing was written"
            if what == "a write"
            else f"{what} cannot be encoded"
        )
        return CollectionMismatchError(
            f"collection {self.collection_name!r} has the slot(s) {names}, which this instance was opened without an "
            f"encoder for, so {why}. Open it with named_vectors={{{given}}}, as it was created."
        )

    def with_recorded(self, existing: ExistingCollection) -> CollectionConfig:
        """These settings with the slots of the stored collection: every dense or multivector slot beyond those
        opened with (``unfilled``: seen, searched by no one here, never left empty by a write), its BM25 (filled by
        the settings it records, also when opened with ``sparse=None``), no BM25 slot where it has none."""
        known, metadata = {slot.name for slot in self.layout.slots}, ours(existing.metadata)
        written_by = {self.vector_name: metadata.get("encoder"), **(metadata.get("slots") or {})}
        extra = [
            VectorSlot(
                name,
                spec.kind,
                spec.size,
                cast(Distance, spec.distance),  # as every engine reports it: one of DISTANCES
                written_by.get(name),
                index=spec.kind != "multivector",
            )
            for name, spec in sorted(existing.vectors.items())
            if name not in known
        ]
        # Our BM25 is filled from the settings the collection records; another tool's sparse vector is left alone.
        stored_bm25 = metadata.get("bm25") if SPARSE_NAME in existing.sparse_vectors else None
        bm25 = Bm25.from_dict(stored_bm25) if stored_bm25 is not None and self.layout.owner == "sbert-qdrant" else None
        slots = [s for s in self.layout.slots if s.kind != "sparse" or bm25 is not None]
        if bm25 is not None and self.layout.sparse is None:
            slots.append(VectorSlot(SPARSE_NAME, "sparse", filled_by="bm25"))
        if not extra and len(slots) == len(self.layout.slots):
            return self
        return replace(
            self,
            layout=replace(self.layout, slots=(*slots, *extra)),
            bm25=self.bm25 if self.layout.sparse is not None else bm25,
            unfilled=frozenset(slot.name for slot in extra),
        )

    def document_encoder(self) -> DocumentEncoder:
        """The encoder, when it can cut documents into chunks (it has a tokenizer) in a layout that stores them."""
        if not self.layout.takes_documents:
            raise UnsupportedError(
                f"collection {self.collection_name!r} is in {self.layout.owner}'s layout, which has no place for a "
                "document's chunks; store documents in a collection of sbert-qdrant's own layout."
            )
        if not isinstance(self.encoder, DocumentEncoder):
            raise UnsupportedError(
                f"{self.encoder!r} has no tokenizer (document_token_limit, token_spans), so it cannot cut documents "
                "into chunks; use upsert_texts (one vector per text) or a SentenceEncoder for documents."
            )
        if len(self.encoders) > 1:
            raise UnsupportedError(
                f"collection {self.collection_name!r} has several dense slots ({sorted(self.encoders)}); documents "
                "are chunked by one encoder's tokenizer: store them in a collection with one dense slot."
            )
        return self.encoder

    def existing_bm25(self, existing: ExistingCollection) -> Bm25 | None:
        """Check an existing collection against these settings, slot by slot (never recreate it silently); its
        BM25 settings when sbert-qdrant wrote a sparse vector into it, else None (dense only)."""
        name, metadata = self.collection_name, ours(existing.metadata)
        written_by = {self.vector_name: metadata.get("encoder"), **(metadata.get("slots") or {})}
        self._check_first_stage(metadata.get("first_stage"))
        for slot in self.layout.slots:
            if slot.kind == "sparse":
                continue
            found = existing.vectors.get(slot.name)
            if found is None:
                raise CollectionMismatchError(
                    f"collection {name!r} has no vector named {slot.name!r} (it has {sorted(existing.vectors)}); "
                    f"pass vector_name= one of those, or recreate=True to replace the collection."
                )
            wanted = VectorSpec(slot.size, slot.distance, slot.kind)
            if found != wanted:
                raise CollectionMismatchError(
                    f"collection {name!r} stores {found.size}-dim {found.distance} vectors under {slot.name!r}, "
                    f"but its encoder makes {wanted.size}-dim {wanted.distance} ones; use the model the collection "
                    "was built with, another collection_name, or recreate=True to replace it (deletes its points)."
                )
            self.check_encoder(written_by.get(slot.name), slot.filled_by)
        stored = metadata.get("bm25")
        sparse = self.layout.sparse
        if sparse is None or sparse.name not in existing.sparse_vectors or stored is None:
            return None  # dense only: searches in sparse or hybrid mode say how to add BM25
        active = Bm25.from_dict(stored)
        if self.bm25_explicit and self.bm25 != active:
            raise CollectionMismatchError(
                f"collection {name!r} was indexed with {active!r}, not {self.bm25!r}; queries must be tokenized "
                "like the stored texts: leave sparse= at its default to use the collection's settings, or re-index "
                "into another collection_name."
            )
        return active

    def _check_first_stage(self, stored: Mapping[str, Any] | None) -> None:
        """Refuse to open a collection with another first stage than it was created with (new points would lack
        its vectors, or fill a slot it does not have)."""
        first = self.layout.first_stage(self.vector_name)
        stored_dim = None if stored is None else stored.get("dim")
        if (None if first is None else first.size) != stored_dim:
            opened = "no first stage" if first is None else f"first_stage_dim={first.size}"
            made = "without a first stage" if stored_dim is None else f"with first_stage_dim={stored_dim}"
            raise CollectionMismatchError(
                f"collection {self.collection_name!r} was created {made}, but is opened with {opened}; open it as "
                f"it was created (first_stage_dim={stored_dim}), or re-embed it into a new collection "
                "(reembed) to change it."
            )

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

    def check_encoder(self, written_by: str | None, identity: str | None) -> None:
        """Refuse an encoder other than the one that wrote a slot (when both identities are known)."""
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
