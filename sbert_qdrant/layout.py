"""Where a point keeps what: its named vector slots (dense, sparse, multivector), each with what fills it, and its
payload fields (the text, the caller's id, the caller's fields), in this package's layout or in another tool's.

Every engine creates, writes and searches a collection from its slots; the collection, Ray and the MCP server build
points from the layout; the read-only rule is the layout's. Three layouts ship:

- ``PointLayout.ours(...)``: sbert-qdrant's own: a dense slot per encoder (``"text"`` first), BM25 (``"bm25"``), the
  text under ``"text"``, your id under ``"key"``, your fields beside them. Writable.
- ``PointLayout.mcp_server_qdrant(model)``: mcp-server-qdrant's: the vector ``fast-<model>``, the text under
  ``"document"``, your fields nested under ``"metadata"``. Writable, so that its users' memories stay writable.
- ``PointLayout.foreign(vector_name, text_field)``: a collection another tool wrote (e.g. langchain-qdrant's
  ``vector_name="", text_field="page_content"``): read and searched as it is, never written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import InvalidArgumentError, UnsupportedError
from .records import DOCUMENT_KEY, KEY_KEY, RESERVED_KEYS, TEXT_KEY, CheckedRecord, Key, PreparedPoint
from .types import DISTANCES, SLOT_KINDS, Distance, LayoutOwner, SlotKind

#: The BM25 slot's name in sbert-qdrant's layout.
SPARSE_NAME = "bm25"
#: Where mcp-server-qdrant keeps a memory's text and its metadata.
MCP_TEXT_FIELD = "document"
MCP_METADATA_FIELD = "metadata"


@dataclass(frozen=True)
class VectorSlot:
    """One named vector of every point: its kind, size and distance (dense and multivector), and what fills it.

    filled_by: the identity of the encoder that fills it (``encoder.identity``), ``"bm25"`` for a BM25 slot, None
    where unknown (another tool's). index: whether the engine builds an HNSW graph for it (a multivector or a full
    vector that only re-scores candidates needs none). prefix_of: the dense slot whose vectors' first ``size``
    values this one holds (a Matryoshka first stage: searched first, its candidates re-scored by that slot).
    """

    name: str
    kind: SlotKind = "dense"
    size: int = 0
    distance: Distance = "cosine"
    filled_by: str | None = None
    index: bool = True
    prefix_of: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InvalidArgumentError(f"a vector slot's name must be a str, not {self.name!r}.")
        if self.kind not in SLOT_KINDS:
            raise InvalidArgumentError(f"slot {self.name!r} has kind={self.kind!r}; use one of {SLOT_KINDS}.")
        if self.distance not in DISTANCES:
            raise InvalidArgumentError(f"slot {self.name!r} has distance={self.distance!r}; use one of {DISTANCES}.")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise InvalidArgumentError(f"slot {self.name!r} has size={self.size!r}; use the encoder's dimension.")


def _with_first_stage(slots: tuple[VectorSlot, ...], dim: int) -> tuple[VectorSlot, ...]:
    """The slots with the primary unindexed (it re-scores only) and, after it, its first stage of ``dim`` values."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise InvalidArgumentError(f"first_stage_dim={dim!r} must be a positive int below the encoder's dimension.")
    primary = next(slot for slot in slots if slot.kind == "dense")
    if primary.name == "":
        raise InvalidArgumentError(
            "first_stage_dim= adds a named slot, which the unnamed vector (vector_name='') cannot share a point with; "
            "give the vector a name (the default 'text')."
        )
    small = VectorSlot(f"{primary.name}_{dim}d", size=dim, distance=primary.distance, prefix_of=primary.name)
    if any(slot.name == small.name for slot in slots):
        raise InvalidArgumentError(f"slot name {small.name!r} is the first stage's; name that slot otherwise.")
    at = slots.index(primary)
    return (*slots[:at], replace(primary, index=False), small, *slots[at + 1 :])


def mcp_vector_name(model: str) -> str:
    """mcp-server-qdrant's vector name for a model: ``fast-`` and the model's last path part in lower case."""
    return "fast-" + model.rstrip("/").split("/")[-1].lower()


@dataclass(frozen=True)
class PointLayout:
    """A collection's point shape: its vector slots (the first dense one is the primary, which plain searches and
    duplicates use) and its payload fields; ``owner`` says whose layout it is, and so whether it is writable."""

    slots: tuple[VectorSlot, ...]
    text_field: str = TEXT_KEY
    id_field: str = KEY_KEY
    #: Where the caller's fields sit: nested under this field (mcp-server-qdrant's way), or beside the text (None).
    metadata_field: str | None = None
    owner: LayoutOwner = "sbert-qdrant"

    def __post_init__(self) -> None:
        names = [slot.name for slot in self.slots]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise InvalidArgumentError(f"slot name(s) {repeated} appear twice in the layout; give each its own name.")
        if not any(slot.kind == "dense" for slot in self.slots):
            raise InvalidArgumentError(f"the layout {names} has no dense slot; a collection searches a dense one.")
        dense = {slot.name for slot in self.slots if slot.kind == "dense" and slot.prefix_of is None}
        for slot in self.slots:
            if slot.prefix_of is not None and (slot.kind != "dense" or slot.prefix_of not in dense):
                raise InvalidArgumentError(
                    f"slot {slot.name!r} holds the first values of {slot.prefix_of!r}, which is no full dense slot "
                    f"of the layout {names}; name one of {sorted(dense)}."
                )
        if sum(slot.kind == "sparse" for slot in self.slots) > 1:
            raise InvalidArgumentError(f"the layout {names} has several sparse slots; one BM25 slot is supported.")
        if not isinstance(self.text_field, str) or not self.text_field or self.text_field == self.id_field:
            raise InvalidArgumentError(
                f"text_field={self.text_field!r} must name the payload field holding the text, e.g. 'page_content'."
            )

    # -- the three layouts -----------------------------------------------------------------------------------------

    @classmethod
    def ours(
        cls, dense: tuple[VectorSlot, ...] | VectorSlot, sparse: bool = True, first_stage_dim: int | None = None
    ) -> PointLayout:
        """sbert-qdrant's layout: the dense slot(s) given (the first is the primary) and, with ``sparse``, BM25.

        first_stage_dim: the primary's vectors cut to their first ``first_stage_dim`` values in a slot of their own
        (``<primary>_<dim>d``, HNSW-indexed), searched first; the full vectors, stored without a graph, re-score
        its candidates in the engine. For Matryoshka models, whose leading values carry most of the meaning.
        """
        slots = (dense,) if isinstance(dense, VectorSlot) else tuple(dense)
        if sparse and any(slot.name == SPARSE_NAME for slot in slots):
            raise InvalidArgumentError(f"vector_name={SPARSE_NAME!r} is the BM25 slot's name; choose another.")
        if first_stage_dim is not None:
            slots = _with_first_stage(slots, first_stage_dim)
        bm25 = (VectorSlot(SPARSE_NAME, "sparse", filled_by="bm25"),) if sparse else ()
        return cls(slots + bm25)

    @classmethod
    def mcp_server_qdrant(cls, model: str, size: int = 0) -> PointLayout:
        """mcp-server-qdrant's layout for ``model`` (its ``EMBEDDING_MODEL``): one dense slot ``fast-<model>``."""
        return cls(
            (VectorSlot(mcp_vector_name(model), size=size),),
            text_field=MCP_TEXT_FIELD,
            metadata_field=MCP_METADATA_FIELD,
            owner="mcp-server-qdrant",
        )

    @classmethod
    def foreign(cls, vector_name: str, text_field: str, size: int = 0, distance: Distance = "cosine") -> PointLayout:
        """A collection another tool wrote: its dense vector ``vector_name`` (``""``: the unnamed one), its text
        under ``text_field``. Read-only."""
        return cls((VectorSlot(vector_name, size=size, distance=distance),), text_field=text_field, owner="foreign")

    # -- slots -----------------------------------------------------------------------------------------------------

    @property
    def primary(self) -> VectorSlot:
        """The first dense slot: what plain searches, duplicates and given vectors use."""
        return next(slot for slot in self.slots if slot.kind == "dense")

    @property
    def sparse(self) -> VectorSlot | None:
        return next((slot for slot in self.slots if slot.kind == "sparse"), None)

    def of_kind(self, kind: SlotKind) -> tuple[VectorSlot, ...]:
        return tuple(slot for slot in self.slots if slot.kind == kind)

    def slot(self, name: str, kind: SlotKind | None = None, argument: str = "using") -> VectorSlot:
        """The slot ``name`` (of ``kind``), or an error naming the caller's ``argument`` and the slots there are."""
        for slot in self.slots:
            if slot.name == name and (kind is None or slot.kind == kind):
                return slot
        there = [s.name for s in self.slots if kind is None or s.kind == kind]
        raise InvalidArgumentError(
            f"{argument}={name!r} names no {kind or 'vector'} slot of this collection; use one of {there}."
        )

    def first_stage(self, name: str) -> VectorSlot | None:
        """The slot holding the first values of slot ``name``'s vectors (its first stage), None without one."""
        return next((slot for slot in self.slots if slot.prefix_of == name), None)

    def filled(self, sizes: Mapping[str, tuple[int, str | None]]) -> PointLayout:
        """The layout with each dense or multivector slot's size and encoder identity as its encoder gives them
        (a first-stage slot keeps its size, and is filled by its full slot's encoder)."""
        slots = []
        for slot in self.slots:
            full = None if slot.prefix_of is None else sizes.get(slot.prefix_of)
            if slot.name in sizes:
                slot = replace(slot, size=sizes[slot.name][0], filled_by=sizes[slot.name][1])
            elif full is not None:
                if not slot.size < full[0]:
                    raise InvalidArgumentError(
                        f"first_stage_dim={slot.size} must be below the encoder's dimension {full[0]} (the full "
                        f"vectors re-score what the first {slot.size} values find), e.g. {full[0] // 4}."
                    )
                slot = replace(slot, filled_by=full[1])
            slots.append(slot)
        return replace(self, slots=tuple(slots))

    # -- payloads --------------------------------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.owner != "foreign"

    def check_writable(self, collection_name: str) -> None:
        """Refuse writes to a collection in another tool's layout: read-only (mcp-server-qdrant's excepted)."""
        if not self.writable:
            raise UnsupportedError(
                f"collection {collection_name!r} was written by another tool (its text is in payload field "
                f"text_field={self.text_field!r}), so it is read-only here; write to it with that tool, or copy its "
                "texts into a collection of sbert-qdrant's own (another collection_name, default text_field)."
            )

    @property
    def reserved(self) -> frozenset[str]:
        """Payload keys a caller's fields may not use: those the layout keeps beside them (none when nested)."""
        return RESERVED_KEYS if self.metadata_field is None else frozenset()

    def point(self, record: CheckedRecord) -> PreparedPoint:
        """The point that stores a text: the text, the id (when the caller gave one) and the caller's fields."""
        # an id that is its own point id (a canonical UUID) is read back from the point: no field needed for it
        keep = record.explicit_id and record.id != record.point_id
        payload = self.payload(record.text, record.id if keep else None, record.fields)
        return PreparedPoint(record.id, record.point_id, record.text, payload, record.vector)

    def payload(self, text: str, key: Key | None, fields: Mapping[str, Any]) -> dict[str, Any]:
        head: dict[str, Any] = {self.text_field: text}
        if key is not None:
            head[self.id_field] = key
        if self.metadata_field is not None:
            return {**head, self.metadata_field: dict(fields)}
        return {**head, **fields}

    def split(self, point: str, payload: Mapping[str, Any] | None) -> tuple[Key, str | None, dict[str, Any]]:
        """(id, text, the caller's fields) of a stored point: the id is the stored key, else the point id."""
        fields = dict(payload or {})
        key = fields.pop(self.id_field, None)
        text = fields.pop(self.text_field, None)
        if self.metadata_field is not None:
            nested = fields.get(self.metadata_field)
            fields = dict(nested) if isinstance(nested, Mapping) else {}
        return (point if key is None else key), (text if isinstance(text, str) else None), fields

    def field_key(self, name: str) -> str:
        """The payload key (a filter's) of one of the caller's fields."""
        return name if self.metadata_field is None else f"{self.metadata_field}.{name}"

    @property
    def takes_documents(self) -> bool:
        """Whether documents (chunks under ``"document"``) can be stored: in sbert-qdrant's layout only."""
        return self.owner == "sbert-qdrant" and DOCUMENT_KEY not in (self.text_field, self.metadata_field)
