"""Documents as chunks: token-aware splitting with exact character offsets, and the chunk points' ids and payload.

A chunk holds at most ``max_tokens`` tokens of the encoder's own tokenizer (so it is never truncated) and ends, where
it can, at a sentence end, else between words; the next chunk starts ``overlap_tokens`` earlier, at a word start.
Every token of a document lands in some chunk, ``document[start:end] == chunk.text``, and a chunk runs up to the next
one's first token, so the chunks rebuild the document from its first token to its last.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from qdrant_client import models

from .errors import InvalidArgumentError, InvalidInputError
from .protocols import DocumentEncoder
from .records import (
    DOCUMENT_KEY,
    ID_NAMESPACE,
    KEY_KEY,
    TEXT_KEY,
    CheckedRecord,
    Key,
    PreparedPoint,
    check_payload,
    check_text,
)
from .types import MIN_CHUNK_TOKENS, Scoring

#: Token spans (start, end) of a text's tokens, in characters, without special tokens.
Offsets = Callable[[str], list[tuple[int, int]]]
#: The payload path Qdrant groups chunks by.
GROUP_BY = f"{DOCUMENT_KEY}.id"
_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f][\"')\]]*\s+$|\n\s*$")  # also the CJK full stops


@dataclass(frozen=True)
class Chunk:
    """One piece of a document: its position in the document (``index``), characters ``start:end`` and text."""

    index: int
    start: int
    end: int
    text: str
    tokens: int


def chunk_tokens_within(limit: int, chunk_tokens: int | None) -> int:
    """Tokens per chunk: ``chunk_tokens`` checked against what the encoder reads whole (``limit``), else ``limit``."""
    if chunk_tokens is None:
        return limit
    if (
        isinstance(chunk_tokens, bool)
        or not isinstance(chunk_tokens, int)
        or not MIN_CHUNK_TOKENS <= chunk_tokens <= limit
    ):
        raise InvalidArgumentError(
            f"chunk_tokens={chunk_tokens!r} must be an integer from {MIN_CHUNK_TOKENS} to {limit} (the encoder's "
            f"max_seq_length less its special tokens and document prompt), or None for {limit}."
        )
    return chunk_tokens


def split_document(text: str, offsets: Offsets, max_tokens: int, overlap_tokens: int = 0) -> list[Chunk]:
    """Split ``text`` (checked non-empty) into chunks of at most ``max_tokens`` tokens."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < MIN_CHUNK_TOKENS:
        raise InvalidArgumentError(f"chunk_tokens={max_tokens!r} must be an integer of at least {MIN_CHUNK_TOKENS}.")
    check_overlap(overlap_tokens, max_tokens)
    spans = offsets(text)
    chunks: list[Chunk] = []
    first = 0
    while first < len(spans):
        last = _cut(text, spans, first, min(first + max_tokens, len(spans)))
        while True:  # re-tokenized on its own, a cut inside a word may need more tokens: shrink until it fits
            start, end = spans[first][0], spans[last][0] if last < len(spans) else spans[-1][1]
            count = len(offsets(text[start:end]))
            if count <= max_tokens or last - first == 1:
                break
            last -= max(1, count - max_tokens)
        chunks.append(Chunk(len(chunks), start, end, text[start:end], count))
        if last == len(spans):
            break
        first = _next_start(text, spans, first, last, overlap_tokens)
    return chunks


def check_overlap(overlap_tokens: object, max_tokens: int) -> None:
    if (
        isinstance(overlap_tokens, bool)
        or not isinstance(overlap_tokens, int)
        or not 0 <= overlap_tokens < max_tokens // 2
    ):
        raise InvalidArgumentError(
            f"overlap_tokens={overlap_tokens!r} must be an integer from 0 to less than half of chunk_tokens "
            f"({max_tokens})."
        )


def _word_start(text: str, spans: list[tuple[int, int]], i: int) -> bool:
    """Whether token ``i`` begins a word (whitespace, or the text's start, before it)."""
    return i == 0 or (spans[i - 1][1] < spans[i][0] and text[spans[i - 1][1] : spans[i][0]].isspace())


def _cut(text: str, spans: list[tuple[int, int]], first: int, limit: int) -> int:
    """Where the chunk starting at token ``first`` ends (exclusive): the last sentence end, else word start, in the
    second half of the window; else ``limit``."""
    if limit == len(spans):
        return limit
    floor = first + (limit - first) // 2
    word = None
    for i in range(limit, floor, -1):
        if not _word_start(text, spans, i):
            continue
        if _SENTENCE_END.search(text[spans[i - 1][0] : spans[i][0]]):
            return i
        word = word or i
    return word or limit


def _next_start(text: str, spans: list[tuple[int, int]], first: int, last: int, overlap: int) -> int:
    """The first token of the next chunk: ``overlap`` tokens before ``last``, moved forward to a word start."""
    start = max(first + 1, last - overlap)
    while start < last and not _word_start(text, spans, start):
        start += 1
    return start


def document_version(document_id: Key, text: str, settings: Mapping[str, Any]) -> str:
    """A hash of a document's id, text and chunking settings: equal versions store equal chunks."""
    material = repr((type(document_id).__name__, document_id, text, sorted(settings.items())))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


def chunk_point_id(document_id: Key, index: int) -> str:
    """The point id of a document's chunk: deterministic from the document's id and the chunk's index."""
    return str(uuid.uuid5(ID_NAMESPACE, f"chunk:{type(document_id).__name__}:{document_id}:{index}"))


def chunk_payload(document_id: Key, chunk: Chunk, count: int, version: str) -> dict[str, Any]:
    """The ``document`` payload field of a chunk point."""
    return {
        "id": document_id,
        "chunk": chunk.index,
        "chunks": count,
        "start": chunk.start,
        "end": chunk.end,
        "tokens": chunk.tokens,
        "version": version,
    }


def with_context(context: str, text: str) -> str:
    """What is encoded for a chunk: its document's context (a title), then the chunk."""
    return f"{context}\n{text}" if context else text


def encoded_text(payload: Mapping[str, Any]) -> str:
    """What was encoded for a stored point of sbert-qdrant's layout: its text, after its document's context for a
    chunk that had one."""
    place = payload.get(DOCUMENT_KEY)
    field = place.get("context_field") if isinstance(place, Mapping) else None
    context = payload.get(field) if isinstance(field, str) else None
    return with_context(context.strip() if isinstance(context, str) else "", str(payload.get(TEXT_KEY, "")))


@dataclass(frozen=True)
class PreparedDocument:
    """A checked document split into chunks, with its version (a hash of id, text and chunking)."""

    id: Key
    payload: dict[str, Any]
    version: str
    chunks: list[Chunk]
    #: Put before every chunk when it is encoded (dense and BM25), never stored in the chunk's text.
    context: str = ""
    #: The payload field the context comes from (recorded in each chunk, so that it can be re-encoded).
    context_field: str | None = None
    #: One dense vector per chunk when they were encoded elsewhere (``upsert_documents(..., vectors_from=)``).
    vectors: np.ndarray | None = None

    @property
    def point_ids(self) -> list[str]:
        return [chunk_point_id(self.id, c.index) for c in self.chunks]

    def points(self) -> list[PreparedPoint]:
        """One point per chunk: the chunk's text, the document's payload and the ``document`` field."""
        count = len(self.chunks)
        return [
            PreparedPoint(
                point,
                point,
                with_context(self.context, chunk.text),
                {
                    TEXT_KEY: chunk.text,
                    DOCUMENT_KEY: chunk_payload(self.id, chunk, count, self.version)
                    | ({"context_field": self.context_field} if self.context else {}),
                    **self.payload,
                },
            )
            for point, chunk in zip(self.point_ids, self.chunks, strict=True)
        ]


@dataclass(frozen=True)
class Chunking:
    """How documents are cut: chunks of ``max_tokens`` sharing ``overlap_tokens``, within the ``limit`` the encoder
    reads whole; ``context_field`` names a payload field (e.g. a title) put before every chunk when it is encoded,
    its tokens taken from the chunk's budget where chunk and context would pass ``limit``."""

    offsets: Offsets
    max_tokens: int
    overlap_tokens: int
    limit: int
    context_field: str | None = None

    @classmethod
    def of(
        cls,
        encoder: DocumentEncoder,
        chunk_tokens: int | None = None,
        overlap_tokens: int | None = None,
        context_field: str | None = None,
    ) -> Chunking:
        """The chunking ``upsert_documents`` applies with these arguments (each checked)."""
        budget = chunk_tokens_within(encoder.document_token_limit, chunk_tokens)
        if context_field is not None and (not isinstance(context_field, str) or not context_field):
            raise InvalidArgumentError(f"context_field={context_field!r} must name a payload field, e.g. 'title'.")
        overlap = budget // 8 if overlap_tokens is None else overlap_tokens
        check_overlap(overlap, budget)
        return cls(encoder.token_spans, budget, overlap, encoder.document_token_limit, context_field)

    def inputs(self, text: str, payload: Mapping[str, Any] | None = None) -> list[str]:
        """What is encoded for a document: one input per chunk, with its context. Encode these elsewhere (e.g. on
        GPU workers) to pass the vectors to ``upsert_documents(..., vectors_from=)``."""
        record = CheckedRecord(0, "", check_text(text, "text"), check_payload(payload, "payload"), explicit_id=True)
        return [point.text for point in self.prepare(record).points()]

    def prepare(self, record: CheckedRecord) -> PreparedDocument:
        """A document from a checked record (``records.checked_batches``): its fields, context, chunks, version,
        and the vectors it was given (one per chunk)."""
        fields = record.fields
        context = self._context(record)
        budget = min(self.max_tokens, self.limit - len(self.offsets(context))) if context else self.max_tokens
        overlap = min(self.overlap_tokens, budget // 2 - 1)  # a context may have shrunk the budget
        chunks = split_document(record.text, self.offsets, budget, overlap)
        settings = {
            "max_tokens": self.max_tokens,
            "overlap_tokens": self.overlap_tokens,
            "context": context,
            "payload": repr(sorted(fields.items())),
        }
        version = document_version(record.id, record.text, settings)
        if record.vector is not None and len(record.vector) != len(chunks):
            raise InvalidInputError(
                f"vectors[{record.index}] has {len(record.vector)} rows, but document {record.id!r} has {len(chunks)} "
                "chunks: encode Chunking.of(encoder, chunk_tokens, overlap_tokens, context_field).inputs(text, "
                "payload), with the arguments of this call."
            )
        field = self.context_field if context else None
        return PreparedDocument(record.id, fields, version, chunks, context, field, record.vector)

    def _context(self, record: CheckedRecord) -> str:
        """The record's context, checked: a str short enough to leave most of a chunk's budget to the chunk."""
        if self.context_field is None:
            return ""
        where = f"payloads[{record.index}][{self.context_field!r}]"
        if self.context_field not in record.fields:
            raise InvalidInputError(
                f"{where} is missing: context_field={self.context_field!r} names the field put before every chunk; "
                "give each document one (None or '' for no context), or drop context_field."
            )
        value = record.fields[self.context_field]
        if value is None:
            return ""
        if not isinstance(value, str):
            raise InvalidInputError(f"{where} is {type(value).__name__}, not str: context_field names a text field.")
        tokens = len(self.offsets(value))
        if tokens > self.limit // 2:
            raise InvalidInputError(
                f"{where} has {tokens} tokens: a chunk's context may take at most half of the {self.limit} tokens the "
                "encoder reads; shorten it (a title or a heading, not a text)."
            )
        return value.strip()


def is_stored(document: PreparedDocument, stored: Mapping[str, Mapping[str, Any] | None], any_version: bool) -> bool:
    """Whether the store holds this document already: every chunk in this version, or (``any_version``) its first
    chunk in any version."""
    if any_version:
        return document.point_ids[0] in stored
    return all(
        ((stored.get(point) or {}).get(DOCUMENT_KEY) or {}).get("version") == document.version
        for point in document.point_ids
    )


def _ids_condition(ids: Sequence[Key]) -> models.Filter:
    """Chunks of any of the documents (str and int ids matched apart, as they are different ids)."""
    texts = [k for k in ids if isinstance(k, str)]
    numbers = [k for k in ids if not isinstance(k, str)]
    should: list[models.Condition] = [
        models.FieldCondition(key=GROUP_BY, match=models.MatchAny(any=values)) for values in (texts, numbers) if values
    ]
    return models.Filter(should=should)


def documents_filter(ids: Sequence[Key]) -> models.Filter:
    """Every chunk of the documents."""
    return models.Filter(must=[_ids_condition(ids)])


def stale_filter(documents: Sequence[PreparedDocument]) -> models.Filter:
    """Chunks of the documents in any version other than the one just stored (versions differ per document)."""
    versions = [d.version for d in documents]
    return models.Filter(
        must=[_ids_condition([d.id for d in documents])],
        must_not=[models.FieldCondition(key=f"{DOCUMENT_KEY}.version", match=models.MatchAny(any=versions))],
    )


#: The payload field that marks a chunk (a text has none); indexed in the collections sbert-qdrant creates.
CHUNK_FIELD = f"{DOCUMENT_KEY}.chunk"
_IS_CHUNK = models.FieldCondition(key=CHUNK_FIELD, range=models.Range(gte=0))
_FIRST_CHUNK = models.FieldCondition(key=CHUNK_FIELD, match=models.MatchValue(value=0))


def _with(query_filter: models.Filter | None) -> list[models.Condition]:
    return [query_filter] if query_filter is not None else []


def is_chunk(payload: Mapping[str, Any]) -> bool:
    """Whether a stored payload is a document's chunk (another tool's ``document`` field is not)."""
    place = payload.get(DOCUMENT_KEY)
    return isinstance(place, Mapping) and isinstance(place.get("chunk"), int)


def chunks_only(query_filter: models.Filter | None) -> models.Filter:
    """The caller's filter, restricted to document chunks (a collection may also hold texts)."""
    return models.Filter(must=[_IS_CHUNK, *_with(query_filter)])


def texts_only(query_filter: models.Filter | None) -> models.Filter:
    """The caller's filter, restricted to texts (never a document's chunk)."""
    return models.Filter(must=_with(query_filter), must_not=[_IS_CHUNK])


def first_chunks_only(query_filter: models.Filter | None) -> models.Filter:
    """The caller's filter, restricted to each document's first chunk: one point per document."""
    return models.Filter(must=[_FIRST_CHUNK, *_with(query_filter)])


@dataclass(frozen=True)
class ChunkHit:
    """A matching chunk of a document: where it sits (characters ``start:end``), its text and its score (after
    re-ranking, the cross-encoder's; ``retrieval_score``: the search's)."""

    index: int
    start: int
    end: int
    text: str
    score: float
    retrieval_score: float | None = None


@dataclass(frozen=True)
class DocumentHit:
    """One document found by ``search_documents``: its id, score (its best chunk's, or their sum), payload and the
    matching chunks, best first."""

    id: Key
    score: float
    payload: dict[str, Any]
    chunks: list[ChunkHit]


@dataclass(frozen=True)
class StoredDocument:
    """A stored document: its text rebuilt from its chunks (first token to last), payload and chunks in order."""

    id: Key
    text: str
    payload: dict[str, Any]
    chunks: list[Chunk]


def chunk_index(row: Any) -> int:
    """The index of a chunk in its document, from a stored or scored chunk point."""
    return int((row.payload or {})[DOCUMENT_KEY]["chunk"])


def document_hit(rows: Sequence[tuple[float, Mapping[str, Any]]], scoring: Scoring) -> DocumentHit:
    """A document hit from its chunks' (score, payload), best first."""
    chunks = [_chunk_hit(score, payload) for score, payload in rows]
    fields = _fields(rows[0][1])
    score = chunks[0].score if scoring == "max" else sum(c.score for c in chunks)
    return DocumentHit(rows[0][1][DOCUMENT_KEY]["id"], score, fields, chunks)


def _chunk_hit(score: float, payload: Mapping[str, Any]) -> ChunkHit:
    place = payload[DOCUMENT_KEY]
    return ChunkHit(int(place["chunk"]), int(place["start"]), int(place["end"]), payload.get(TEXT_KEY) or "", score)


def _fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in (TEXT_KEY, KEY_KEY, DOCUMENT_KEY)}


def stored_document(payloads: Sequence[Mapping[str, Any]]) -> StoredDocument:
    """A document from its chunks' payloads (any order)."""
    ordered = sorted(payloads, key=lambda p: int(p[DOCUMENT_KEY]["chunk"]))
    chunks = []
    for payload in ordered:
        place = payload[DOCUMENT_KEY]
        text = payload.get(TEXT_KEY) or ""
        chunks.append(Chunk(int(place["chunk"]), int(place["start"]), int(place["end"]), text, int(place["tokens"])))
    text = chunks[0].text
    for before, chunk in itertools.pairwise(chunks):
        text += chunk.text[before.end - chunk.start :]  # the overlap is already there
    return StoredDocument(ordered[0][DOCUMENT_KEY]["id"], text, _fields(ordered[0]), chunks)
