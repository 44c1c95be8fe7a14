"""What the tools return: structured content (the models here, published as each tool's output schema) and the same
as readable text (``<entry>`` lines, or mcp-server-qdrant's own JSON array of them, byte for byte, so prompts written
for it keep working). A stored text is shown as stored, but for the ``<`` of a tag of the answer's own structure
(``entry``, ``content``, ``metadata`` in a find; ``document``, ``passage``, ``metadata`` in a document search): no text
can forge one, and any other text (``<entry-point>``, ``<document>`` in a find, ``&``) reads byte for byte as theirs."""

from __future__ import annotations

import html
import json
import re
from typing import TYPE_CHECKING, Any

import pydantic_core
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from ...records import Key
from ...types import CountKind
from .settings import ResultFormat

if TYPE_CHECKING:
    from ...documents import DocumentHit
    from ...records import Hit


class Entry(BaseModel):
    """A stored text found: its id, score, text and payload."""

    id: Key
    score: float
    text: str | None
    payload: dict[str, Any]


class Found(BaseModel):
    """The texts found for a query, best first; ``truncated``: the query was longer than the model reads, and was
    searched by its first tokens."""

    collection_name: str
    query: str
    entries: list[Entry]
    truncated: bool = False


class Passage(BaseModel):
    """A matching chunk of a document: characters ``start:end`` of the document, ready to cite."""

    start: int
    end: int
    text: str
    score: float


class FoundDocument(BaseModel):
    """A document found: one per document, its best-matching passages first."""

    id: Key
    score: float
    payload: dict[str, Any]
    passages: list[Passage]


class FoundDocuments(BaseModel):
    """The documents found for a query, best first."""

    collection_name: str
    query: str
    documents: list[FoundDocument]
    truncated: bool = False


class Stored(BaseModel):
    """A stored text or document: its id (storing the same text again, or another under this id, replaces it);
    ``truncated``: a note longer than the model reads, kept whole, its vector made from its first tokens."""

    collection_name: str
    id: Key
    truncated: bool = False


class Deleted(BaseModel):
    """The ids given, and how many of them were stored (and are now deleted)."""

    collection_name: str
    ids: list[Key]
    deleted: int


class Counted(BaseModel):
    collection_name: str
    kind: CountKind
    count: int


class Collections(BaseModel):
    collections: list[str]


def _tags(*names: str) -> re.Pattern[str]:
    """The ``<`` of a tag named one of ``names`` that opens or closes (``</x>``, ``<x/>``), in any case, with
    whitespace inside, attributes or nothing after it; not a tag whose name only starts so (``<entry-point>``)."""
    return re.compile(rf"<(?=\s*/?\s*(?:{'|'.join(names)})(?![\w.:-]))", re.IGNORECASE)


#: The tags of a find's answer (ours and mcp-server-qdrant's), and of a document search's.
_ENTRY_TAGS = _tags("entry", "content", "metadata")
_DOCUMENT_TAGS = _tags("document", "passage", "metadata")


def _nothing_yet(collection_name: str) -> str:
    return f"Nothing stored yet in collection {collection_name}: no results."


def found(
    collection_name: str,
    query: str,
    hits: list[Hit],
    *,
    stored: bool = True,
    truncated: str = "",
    style: ResultFormat = "sbert-qdrant",
) -> CallToolResult:
    """``stored=False``: the collection does not exist yet (an agent's first run), an answer and not an error;
        ``truncated``: what to say of a query longer than the model reads; ``style``: the text's format, ours (lines,
        an ``<entry>`` with id and score each) or mcp-server-qdrant's (a JSON array of strings, no content at all when
        nothing is found; a long query said in the structured content only). No stored text can forge an entry in
    either."""
    entries = [Entry(id=h.id, score=h.score, text=h.text, payload=h.payload) for h in hits]
    result = Found(collection_name=collection_name, query=query, entries=entries, truncated=bool(truncated))
    if style == "mcp-server-qdrant":
        if not entries:
            return CallToolResult(content=[], structured_content=result.model_dump(mode="json"))
        theirs = [f"Results for the query '{query}'"]
        theirs += [
            f"<entry><content>{_text(e.text or '', _ENTRY_TAGS)}</content>"
            f"{_metadata(e.payload, _ENTRY_TAGS, ensure_ascii=True)}</entry>"
            for e in entries
        ]
        # their FastMCP's text of a list[str], by the same call: JSON indented by 2, non-ASCII as it is
        return reply(result, pydantic_core.to_json(theirs, indent=2).decode())
    if not stored:
        return reply(result, _nothing_yet(collection_name))
    lines = [f"Results for the query {query!r}" if entries else f"No results for the query {query!r}"]
    lines += [truncated] if truncated else []
    lines += [_entry(e.id, e.score, e.text or "", e.payload) for e in entries]
    return reply(result, "\n".join(lines))


def found_documents(
    collection_name: str, query: str, hits: list[DocumentHit], *, stored: bool = True, truncated: str = ""
) -> CallToolResult:
    documents = [
        FoundDocument(
            id=h.id,
            score=h.score,
            payload=h.payload,
            passages=[Passage(start=c.start, end=c.end, text=c.text, score=c.score) for c in h.chunks],
        )
        for h in hits
    ]
    result = FoundDocuments(
        collection_name=collection_name, query=query, documents=documents, truncated=bool(truncated)
    )
    if not stored:
        return reply(result, f"No documents stored yet in collection {collection_name}: no results.")
    lines = [f"Documents for the query {query!r}" if documents else f"No documents for the query {query!r}"]
    lines += [truncated] if truncated else []
    for d in documents:
        passages = "".join(
            f'<passage start="{p.start}" end="{p.end}">{_text(p.text, _DOCUMENT_TAGS)}</passage>' for p in d.passages
        )
        lines.append(
            f'<document id="{_attribute(d.id)}" score="{d.score:.4f}">'
            f"{passages}{_metadata(d.payload, _DOCUMENT_TAGS)}</document>"
        )
    return reply(result, "\n".join(lines))


def _entry(key: Key, score: float, text: str, payload: dict[str, Any]) -> str:
    return (
        f'<entry id="{_attribute(key)}" score="{score:.4f}"><content>{_text(text, _ENTRY_TAGS)}</content>'
        f"{_metadata(payload, _ENTRY_TAGS)}</entry>"
    )


def _metadata(payload: dict[str, Any], tags: re.Pattern[str], *, ensure_ascii: bool = False) -> str:
    """The payload as JSON (``ensure_ascii``: non-ASCII ``\\u``-escaped, as mcp-server-qdrant's ``json.dumps``), the
    ``<`` of one of ``tags`` written ``\\u003c``: the same value to a JSON reader, and no tag."""
    shown = tags.sub(r"\\u003c", json.dumps(payload, ensure_ascii=ensure_ascii)) if payload else ""
    return f"<metadata>{shown}</metadata>"


def _text(value: str, tags: re.Pattern[str]) -> str:
    """A stored text as stored, but for the ``<`` of one of ``tags`` (``&lt;``): it can neither close its part of the
    answer nor open one."""
    return tags.sub("&lt;", value)


def _attribute(value: object) -> str:
    """An id in an attribute of our format: ``&``, ``<``, ``>`` and quotes escaped."""
    return html.escape(str(value), quote=True)


def reply(result: BaseModel, text: str) -> CallToolResult:
    """A tool's result: ``text`` for the model to read, ``result`` as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json")
    )
