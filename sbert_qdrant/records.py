"""Texts as Qdrant points: deterministic ids, payload keys, input checks, and the typed results.

An id is the caller's: the one passed to ``upsert_texts`` (any str or int), or, when none was given, the id derived
from the text (``text_id``: a UUIDv5 string), so that upserting the same record twice writes the same point. The
engine's point id is ``point_id(id)``: a UUID in canonical form as it is, anything else its UUIDv5. In
sbert-qdrant's layout (``layout.py``) a point's payload holds the text under ``"text"``, the caller's id (when one
was given) under ``"key"``, and the caller's fields beside them; a document's chunk also holds its place under
``"document"`` (``documents.py``), which is how a collection tells chunks from texts.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InvalidInputError, PartialWriteError

TEXT_KEY = "text"
KEY_KEY = "key"
#: Payload key of a chunk's place in its document; a point without it is a text.
DOCUMENT_KEY = "document"
RESERVED_KEYS = frozenset({TEXT_KEY, KEY_KEY, DOCUMENT_KEY})
ID_NAMESPACE = uuid.UUID("6f1c1f9e-4b8e-5a57-9c3d-2a6b0d7e51c4")

Key = str | int


def text_id(text: str) -> str:
    """The id of a text stored without one: a UUID string, which is also its point id."""
    return _uuid5("text:" + text)


def _uuid5(name: str) -> str:
    """``str(uuid.uuid5(ID_NAMESPACE, name))``, without building a ``UUID`` (a write computes one per point)."""
    h = hashlib.sha1(_NAMESPACE_BYTES + name.encode("utf-8")).hexdigest()
    # version 5 in the 13th hex digit; the RFC 4122 variant (binary 10) in the top bits of the 17th
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


_NAMESPACE_BYTES = ID_NAMESPACE.bytes
_VARIANT = "89ab"


#: A UUID in its canonical form, the only spelling ``str(uuid.UUID(value))`` gives back unchanged.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def check_id(value: object, where: str) -> Key:
    """A usable id (str or int), or an error naming it and the fix."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(f"{where}={value!r} is a {type(value).__name__}; ids must be str or int.")
    return value


def point_id(key: Key) -> str:
    """The engine's point id of an id: a UUID in its canonical form (lower-case, hyphenated) as it is, else its UUIDv5.

    Different ids never share a point: ``"7"`` and ``7`` differ, and so do two spellings of one UUID.
    """
    check_id(key, "id")
    if isinstance(key, str) and _CANONICAL_UUID.fullmatch(key):
        return key
    return _uuid5(f"{type(key).__name__}:{key}")


def check_ids(ids: object, where: str = "ids") -> list[Key]:
    """A list of ids, each checked."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InvalidInputError(f"{where} must be a list of ids, not {type(ids).__name__} {ids!r:.40}; wrap it: [id].")
    return [check_id(value, f"{where}[{i}]") for i, value in enumerate(ids)]


@dataclass(frozen=True)
class TextRecord:
    """One text to store, with its optional key (any str/int) and payload, and its dense vector when it was
    encoded elsewhere (``upsert_texts(..., vectors_from=)``)."""

    text: str
    payload: Mapping[str, Any] | None = None
    id: Key | None = None
    vector: Any = None


@dataclass(frozen=True)
class Hit:
    """A search result: the record's id, score, stored text and the caller's payload (``point_id``: the engine's).

    After re-ranking by a cross-encoder, ``score`` is the cross-encoder's and ``retrieval_score`` the search's;
    ``vector``: the stored dense vector, when asked for (``with_vectors=True``).
    """

    id: Key
    score: float
    text: str | None
    payload: dict[str, Any] = field(default_factory=dict)
    point_id: str = ""
    retrieval_score: float | None = None
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class StoredText:
    """A stored record read back: id, text, the caller's payload, the vector when asked for, the engine's point id."""

    id: Key
    text: str | None
    payload: dict[str, Any] = field(default_factory=dict)
    vector: np.ndarray | None = None
    point_id: str = ""


@dataclass(frozen=True)
class CheckedRecord:
    """A record whose text, id and payload passed the checks; ``index``: its place in the input (errors name it)."""

    index: int
    id: Key
    text: str
    fields: dict[str, Any]
    #: Whether the caller gave the id (else it was derived from the text and is its own point id).
    explicit_id: bool
    #: The dense vector the caller gave (checked), None when the collection encodes the text.
    vector: np.ndarray | None = None
    #: The engine's point id of ``id`` (computed once: given where the id is checked, else from ``id``).
    point_id: str = ""

    def __post_init__(self) -> None:
        if not self.point_id:
            object.__setattr__(self, "point_id", point_id(self.id))


@dataclass(frozen=True)
class PreparedPoint:
    """A point ready to encode and write: the record's id, the engine's point id, the text to encode, the payload."""

    id: Key
    point_id: str
    text: str
    payload: dict[str, Any]
    vector: np.ndarray | None = None


class UpsertResult(list[Key]):
    """The ids of an upsert, one per input record (yours, or derived from the text), plus what happened to them."""

    def __init__(self, ids: Iterable[Key] = (), written: int = 0, skipped: int = 0) -> None:
        super().__init__(ids)
        #: Records (texts, or documents with all their chunks) whose write landed in this call.
        self.written = written
        #: Records left alone: already stored (``on_conflict="skip"``; a document unchanged), or repeated.
        self.skipped = skipped


class WriteLedger:
    """Which records of a write are stored: every record's id in input order and those stored (written now, or
    found stored before), by point id, so that ``"7"`` and ``7`` stay apart. The one ledger of the collection's
    pipelined write and of both Ray write paths; an id that is not an id (a bad row's) is left out. It keeps the
    lists it is given and reads them only when asked (after a failure): a write that succeeds pays nothing per id."""

    def __init__(self) -> None:
        self._added: list[list[object]] = []
        self._landed: list[list[object]] = []

    def add(self, keys: Iterable[object]) -> None:
        """Records of the write, in input order (a repeat keeps its first place)."""
        self._added.append(list(keys))

    def stored(self, keys: Iterable[object]) -> None:
        """Records now stored (their write landed, or they were stored before)."""
        self._landed.append(list(keys))

    def _marks(self) -> tuple[dict[str, Key], set[str]]:
        order: dict[str, Key] = {}
        for key in itertools.chain.from_iterable(self._added):
            mark = id_mark(key)
            if mark is not None:
                order.setdefault(mark, key)  # type: ignore[arg-type]
        landed = {mark for key in itertools.chain.from_iterable(self._landed) if (mark := id_mark(key)) is not None}
        return order, landed

    @property
    def any_stored(self) -> bool:
        return any(id_mark(key) is not None for key in itertools.chain.from_iterable(self._landed))

    @property
    def stored_count(self) -> int:
        order, landed = self._marks()
        return sum(mark in landed for mark in order)

    def error(self, message: str) -> PartialWriteError:
        """The write's ``PartialWriteError``: the stored ids and the others, each in input order."""
        order, landed = self._marks()
        return PartialWriteError(
            message,
            written_ids=[key for mark, key in order.items() if mark in landed],
            unwritten_ids=[key for mark, key in order.items() if mark not in landed],
        )


def id_mark(key: object) -> str | None:
    """How an id is looked up among stored points: its point id (None for a value that is not an id)."""
    try:
        return point_id(key)  # type: ignore[arg-type]
    except InvalidInputError:
        return None


def check_text(text: object, where: str, fix: str = "drop it before upserting") -> str:
    """A text worth storing (or searching for), or an error naming it and the fix."""
    if not isinstance(text, str):
        raise InvalidInputError(f"{where} is {type(text).__name__} ({text!r:.60}), not str; pass text.")
    if not text.strip():
        raise InvalidInputError(f"{where} is empty or whitespace only ({text!r:.20}); {fix}.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{where} is not valid Unicode ({exc.reason} at position {exc.start}); "
            "decode your input with errors='replace' or fix the source."
        ) from exc
    return text


def check_payload(payload: object, where: str, reserved_keys: frozenset[str] = RESERVED_KEYS) -> dict[str, Any]:
    """A JSON-safe payload without reserved keys, or an error naming it and the fix."""
    if payload is None:
        return {}
    if not isinstance(payload, Mapping):
        raise InvalidInputError(f"{where} is a {type(payload).__name__}; a payload must be a dict.")
    fields = dict(payload)
    for name in fields:
        if not isinstance(name, str):
            raise InvalidInputError(f"{where} has a non-str key {name!r}; payload keys must be str.")
    reserved = reserved_keys.intersection(fields)
    if reserved:
        raise InvalidInputError(
            f"{where} uses the reserved key(s) {sorted(reserved)}: sbert-qdrant stores the text under "
            f"{TEXT_KEY!r}, your id under {KEY_KEY!r} and a chunk's place in its document under {DOCUMENT_KEY!r}; "
            "rename those fields."
        )
    try:
        json.dumps(fields, allow_nan=False, ensure_ascii=False, default=_refuse).encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError (a lone surrogate) is a ValueError
        raise InvalidInputError(
            f"{where} cannot be stored as JSON ({exc}); use str, int, float (finite), bool, None, lists and dicts."
        ) from exc
    _check_integers(fields, where)
    return fields


def _refuse(value: object) -> None:
    raise TypeError(f"{type(value).__name__} {value!r:.40} is not JSON")


def _check_integers(value: object, where: str) -> None:
    """Qdrant stores payload integers as signed 64-bit."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise InvalidInputError(f"{where} holds the integer {value}, beyond 64 bits; store it as a str.")
    if isinstance(value, dict):
        for item in value.values():
            _check_integers(item, where)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_integers(item, where)


@dataclass(frozen=True)
class VectorShape:
    """What a given dense vector must be: ``dimension`` finite values, of unit length when ``unit``; a document's
    (``rows``) is one such vector per chunk."""

    dimension: int
    unit: bool
    rows: bool = False

    #: How far from 1 a unit vector's length may be (fp16 vectors from a GPU are within 1e-3).
    TOLERANCE = 1e-2

    def check(self, value: object, where: str) -> np.ndarray:
        """The vector as float32, or an error naming it and what is wrong."""
        try:
            vector = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{where} is not a vector of numbers ({exc}).") from exc
        wanted = "(chunks, {0})" if self.rows else "({0},)"
        if vector.shape[-1:] != (self.dimension,) or vector.ndim != 1 + self.rows or not vector.size:
            raise InvalidInputError(
                f"{where} has shape {vector.shape}, not {wanted.format(self.dimension)}: the collection's encoder "
                f"makes {self.dimension}-dim vectors."
            )
        if not np.isfinite(vector).all():
            raise InvalidInputError(f"{where} holds NaN or infinite values; re-encode that text.")
        lengths = np.linalg.norm(vector, axis=-1).reshape(-1)
        worst = float(lengths[np.argmax(np.abs(lengths - 1.0))])
        if self.unit and abs(worst - 1.0) > self.TOLERANCE:
            raise InvalidInputError(
                f"{where} has length {worst:.4f}, but the collection's encoder makes unit vectors: pass the "
                "encoder's own (normalized) output."
            )
        return vector

    def check_each(self, values: list[object], indices: list[int]) -> list[np.ndarray]:
        """``check`` of one vector per record (``vectors[index]``), a batch's worth as one matrix where they stack:
        the same vectors and, for the first bad one, the same error."""
        if not self.rows and values:
            try:
                matrix = np.asarray(values, dtype=np.float32)
            except (TypeError, ValueError):
                matrix = None
            if matrix is not None and matrix.shape == (len(values), self.dimension) and self._fine(matrix):
                return list(matrix)
        return [self.check(value, f"vectors[{index}]") for value, index in zip(values, indices, strict=True)]

    def _fine(self, matrix: np.ndarray) -> bool:
        """Whether every row of a (n, dimension) matrix passes ``check``."""
        if not np.isfinite(matrix).all():
            return False
        if not self.unit:
            return True
        squares = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)
        return bool(np.all(np.abs(np.sqrt(squares) - 1.0) <= self.TOLERANCE))


def _check(record: TextRecord, index: int, vector: np.ndarray | None, reserved: frozenset[str]) -> CheckedRecord:
    text = check_text(record.text, f"texts[{index}]")
    fields = check_payload(record.payload, f"payloads[{index}]", reserved)
    if record.id is None:
        derived = text_id(text)
        return CheckedRecord(index, derived, text, fields, explicit_id=False, vector=vector, point_id=derived)
    key = check_id(record.id, f"ids[{index}]")
    return CheckedRecord(index, key, text, fields, explicit_id=True, vector=vector, point_id=point_id(key))


def _checked_vectors(records: list[tuple[int, TextRecord]], shape: VectorShape | None) -> list[np.ndarray | None]:
    """The records' vectors, checked: every record has one when ``shape`` is given (vectors from elsewhere), none
    otherwise (the collection encodes)."""
    if shape is None:
        for index, record in records:
            if record.vector is not None:
                raise InvalidInputError(
                    f"texts[{index}] has a vector, but the call has no vectors_from=: pass "
                    "vectors_from=encoder.identity to write vectors encoded elsewhere, or drop the vectors and let the "
                    "collection encode."
                )
        return [None] * len(records)
    for index, record in records:
        if record.vector is None:
            raise InvalidInputError(
                f"texts[{index}] has no vector; with vectors_from= every record carries its vector (vectors= for a "
                "list)."
            )
    return list(shape.check_each([r.vector for _, r in records], [i for i, _ in records]))


def _as_record(item: object, index: int) -> TextRecord:
    if isinstance(item, TextRecord):
        return item
    if isinstance(item, str):
        return TextRecord(item)
    if isinstance(item, Mapping):
        unknown = set(item) - {"text", "payload", "id", "vector"}
        if "text" not in item or unknown:
            raise InvalidInputError(
                f"texts[{index}] must have 'text' and may have 'payload', 'id' and 'vector'; got keys "
                f"{sorted(map(str, item))}."
            )
        return TextRecord(item["text"], item.get("payload"), item.get("id"), item.get("vector"))
    raise InvalidInputError(
        f"texts[{index}] is {type(item).__name__} ({item!r:.40}); pass str, dict(text=, payload=, id=) or TextRecord."
    )


class Deduplicator:
    """The one rule for repeated ids, of ``upsert_texts`` and of the Ray paths: a text-derived id seen before (same
    text, same payload) is dropped, any other repeat refused, naming both places (``name``: how a place is named,
    ``ids[i]`` by default; Ray names a dataset's rows)."""

    def __init__(self, name: Callable[[int], str] = "ids[{}]".format) -> None:
        self._seen: dict[str, tuple[int, dict[str, Any] | None]] = {}
        self._name = name

    def keep(
        self,
        index: int,
        key: object,
        explicit: bool = True,
        fields: dict[str, Any] | None = None,
        mark: str | None = None,
    ) -> bool:
        """Whether the record at ``index`` is the first with its id (a value that is not an id: its own check);
        ``mark``: the id's point id where already known."""
        mark = mark or id_mark(key)
        if mark is None:
            return True
        if mark not in self._seen:
            self._seen[mark] = (index, fields)
            return True
        first, first_fields = self._seen[mark]
        if explicit:
            raise InvalidInputError(
                f"{self._name(index)} repeats {self._name(first)} ({key!r}, the same point); ids must be unique in "
                "one call."
            )
        if first_fields != fields:
            raise InvalidInputError(
                f"texts[{index}] repeats texts[{first}] with a different payload; both would get the same id. Pass "
                "ids= to store them as separate records."
            )
        return False


def checked_batches(
    texts: Iterable[object],
    ids: Sequence[Key] | None,
    payloads: Sequence[Any] | None,
    batch_size: int,
    vectors: Sequence[Any] | None = None,
    shape: VectorShape | None = None,
    reserved: frozenset[str] = RESERVED_KEYS,
) -> Iterator[tuple[list[CheckedRecord], list[CheckedRecord]]]:
    """(every record of the batch, the records to write: repeats dropped) per batch, in input order.

    A sequence of texts is checked whole before the first batch comes out, so bad input writes nothing. Any other
    iterable (records or texts, streamed) is checked batch by batch, each before it is written. With ``shape``,
    every record carries a vector encoded elsewhere (``vectors``, one per text of a list, or in each record).
    ``reserved``: the payload keys the layout keeps for itself (``PointLayout.reserved``).
    """
    if isinstance(texts, (str, bytes, Mapping)) or texts is None:
        raise InvalidInputError(
            f"texts must be a list of str or an iterable of records, not {type(texts).__name__}; "
            "wrap a single text in a list."
        )
    for name, values in (("ids", ids), ("payloads", payloads), ("vectors", vectors)):
        if isinstance(values, (str, bytes, Mapping)) or not (values is None or hasattr(values, "__getitem__")):
            raise InvalidInputError(
                f"{name}={values!r:.60} must be a list with one item per text, not a {type(values).__name__}; "
                f"for one text, wrap it: {name}=[...]."
            )
    if isinstance(texts, Sequence):
        for name, values in (("ids", ids), ("payloads", payloads), ("vectors", vectors)):
            if values is not None and len(values) != len(texts):
                raise InvalidInputError(f"{name} has {len(values)} items but texts has {len(texts)}; pass one each.")
        missing = [i for i, key in enumerate(ids or []) if key is None]
        if missing:
            raise InvalidInputError(f"ids[{missing[0]}] is None; give every text an id, or pass ids=None.")
        records = [
            _as_record(t, i)
            if ids is None and payloads is None and vectors is None
            else TextRecord(
                t,
                payloads[i] if payloads is not None else None,
                ids[i] if ids is not None else None,
                vectors[i] if vectors is not None else None,
            )
            for i, t in enumerate(texts)
        ]
        yield from _checked(records, batch_size, shape, reserved)
        return
    if ids is not None or payloads is not None or vectors is not None:
        raise InvalidInputError(
            "ids=, payloads= and vectors= need a list of texts; put id, payload and vector in each record instead."
        )
    yield from _checked((_as_record(t, i) for i, t in enumerate(texts)), batch_size, shape, reserved, eager=False)


def _batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _checked(
    records: Iterable[TextRecord],
    batch_size: int,
    shape: VectorShape | None,
    reserved: frozenset[str],
    eager: bool = True,
) -> Iterator[tuple[list[CheckedRecord], list[CheckedRecord]]]:
    dedup = Deduplicator()

    def check(batch: list[tuple[int, TextRecord]]) -> tuple[list[CheckedRecord], list[CheckedRecord]]:
        vectors = _checked_vectors(batch, shape)
        every = [
            _check(record, index, vector, reserved) for (index, record), vector in zip(batch, vectors, strict=True)
        ]
        kept = [r for r in every if dedup.keep(r.index, r.id, r.explicit_id, r.fields, r.point_id)]
        return every, kept

    batches = (check(batch) for batch in _batched(enumerate(records), batch_size))
    if eager:
        yield from list(batches)
    else:
        yield from batches
