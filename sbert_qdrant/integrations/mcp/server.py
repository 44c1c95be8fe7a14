"""``create_server``: the MCP server (the official SDK's ``MCPServer``) with the tools of mcp-server-qdrant and more.

``qdrant-find`` and ``qdrant-store`` keep mcp-server-qdrant's names and arguments (``query``, ``information``,
``metadata``, ``collection_name``, ``query_filter``), so prompts written for it keep working; the others are this
package's: documents, delete, count, list collections, duplicates. In read-only mode the writing tools are not
registered at all. A failure an agent can act on (a bad filter, an unknown collection, a too-long text) comes back
as a tool error naming the problem.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, StrictInt, StringConstraints, ValidationError

from ... import __version__
from ...errors import InvalidArgumentError, UnsupportedError
from ...records import Hit, check_text
from ...types import CountKind, SearchMode
from . import results
from .access import auth_options
from .agent_tools import Server, Tool, agent_tool
from .backend import Backend
from .filterable import both, field_filter
from .settings import McpSettings

if TYPE_CHECKING:
    from qdrant_client import models

    from ...aio import AsyncTextCollection
    from ...encoder import CrossEncoder
    from ...protocols import TextEncoder
    from ...search_request import SearchRequest

#: The find tools' words for the search options whose names differ.
_TOOL_WORDS = {"chunks": "passages"}
Query = Annotated[str, Field(description="What to search for")]
Filter = Annotated[
    dict[str, Any] | None,
    Field(
        description='A Qdrant filter on the payload (JSON), e.g. {"must": [{"key": "topic", "match": {"value": '
        '"billing"}}]}; in a collection written by mcp-server-qdrant the metadata sits under "metadata.<field>".'
    ),
]
Limit = Annotated[
    StrictInt | None, Field(ge=1, le=100, description="How many results (default: the server's search limit)")
]
Mode = Annotated[
    SearchMode,
    Field(description="dense: by meaning; sparse: by keywords (BM25); hybrid: both, fused"),
]
Rerank = Annotated[bool, Field(description="Re-score the best candidates with the server's cross-encoder")]
Diversity = Annotated[
    float | None,
    Field(ge=0, le=1, description="0..1: trade relevance for variety among the results (maximal marginal relevance)"),
]
Metadata = Annotated[
    dict[str, Any] | None,
    Field(description="Extra metadata stored along with memorised information. Any json is accepted."),
]
#: An id as an agent gives it: a non-empty string or an integer (strict: ``true`` is not 1).
AgentKey = Annotated[str, StringConstraints(min_length=1)] | StrictInt
Id = Annotated[
    AgentKey | None, Field(description="Your id for it (default: derived from the text, so a repeat is one entry)")
]

_READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
#: A write replaces what is stored under the same id: destructive, and idempotent (the same call, the same state).
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def create_server(
    settings: McpSettings | None = None,
    *,
    encoder: TextEncoder | None = None,
    cross_encoder: CrossEncoder | None = None,
) -> MCPServer[Any]:
    """The MCP server on ``settings`` (None: from the environment); ``encoder``/``cross_encoder``: models already
    loaded (else the settings' model loads in the background as the server starts, and the cross-encoder on the
    first ``rerank=true``)."""
    settings = settings or McpSettings()
    backend = Backend(settings, encoder, cross_encoder)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        backend.start()
        try:
            yield
        finally:
            await backend.close()

    instructions = (
        "Semantic memory in Qdrant (read-only): qdrant-find finds texts by meaning, qdrant-find-documents cites "
        "passages of long documents."
        if settings.read_only
        else "Semantic memory in Qdrant: qdrant-store remembers a text, qdrant-find finds texts by meaning; long "
        "texts go in as documents (qdrant-store-document; qdrant-find-documents cites their passages)."
    )
    server = Server(
        "sbert-qdrant",
        version=__version__,
        instructions=instructions,
        lifespan=lifespan,
        log_level=settings.log_level,
        **auth_options(settings),
    )
    tools = _tools(backend)
    bound = settings.collection_name
    for name, (tool, description, hints) in tools.items():
        if settings.read_only and not hints.read_only_hint:
            continue  # enforced here: a read-only server has no tool that writes
        if bound is not None and name == "qdrant-list-collections":
            continue  # every tool is bound to one collection: nothing to choose from
        fn = agent_tool(
            tool,
            name=name,
            writes=not hints.read_only_hint,
            bound=bound,
            fields=settings.field_arguments,
            query_filter=settings.query_filter_offered,
            held=backend.held,
            redact=backend.redact,
        )
        server.add_agent_tool(fn, name=name, description=description, annotations=hints)
    return server


def _tools(backend: Backend) -> dict[str, tuple[Tool, str, ToolAnnotations]]:
    """Every tool by name: (function, description, annotations)."""
    settings = backend.settings

    async def search_request(
        collection: AsyncTextCollection,
        query_filter: Filter,
        limit: int | None,
        field_values: dict[str, Any] | None,
        rerank: bool,
        chosen: dict[str, Any],
    ) -> SearchRequest:
        """A find tool's arguments as one checked SearchRequest (errors in the tool's words)."""
        from ...search_request import SearchRequest  # imports qdrant-client: not before the server answers

        fields = field_filter(settings.field_arguments, field_values or {}, collection.layout)
        options: dict[str, Any] = {
            "limit": limit or settings.search_limit,
            "query_filter": both(_filter(query_filter), fields),
        }
        if rerank:
            options |= {"rerank": await backend.cross_encoder(), "rerank_weight": settings.rerank_weight}
        return SearchRequest.of({**options, **chosen}, names=_TOOL_WORDS)

    async def find(
        query: Query,
        collection_name: Annotated[str, Field(description="The collection to search in")],
        query_filter: Filter = None,
        limit: Limit = None,
        mode: Mode = "dense",
        rerank: Rerank = False,
        diversity: Diversity = None,
        field_values: dict[str, Any] | None = None,
    ) -> Annotated[CallToolResult, results.Found]:
        collection = await backend.collection(collection_name)
        if not await collection.exists():
            return results.found(collection_name, query, [], stored=False, style=settings.results)
        if mode != "dense" and collection.layout.sparse is None:
            raise UnsupportedError(
                f"collection {collection_name!r} is in {collection.layout.owner}'s layout, which has no BM25 "
                f"vectors for mode {mode}: search it with mode dense (the default). Collections this server creates "
                "with SBERT_QDRANT_LAYOUT=sbert-qdrant have them."
            )
        cut = await backend.truncation(query, "query")
        chosen = {"mode": mode, "diversity": diversity}
        request = await search_request(collection, query_filter, limit, field_values, rerank, chosen)
        hits = await collection.search_text(query, request=request)
        return results.found(collection_name, query, hits, truncated=cut, style=settings.results)

    async def store(
        information: Annotated[str, Field(description="Text to store")],
        collection_name: Annotated[str, Field(description="The collection to store the information in")],
        metadata: Metadata = None,
        id: Id = None,
    ) -> Annotated[CallToolResult, results.Stored]:
        check_text(information, "information", "give the text to remember")
        collection = await backend.collection(collection_name, write=True)
        cut = await backend.truncation(information, "note")
        key = await backend.remember(collection, information, metadata, id)
        text = f"Remembered: {information} in collection {collection_name}"  # theirs; ours adds the id and a cut
        if settings.results == "sbert-qdrant":
            text += f" (id {key})"
        if cut and settings.results == "sbert-qdrant":
            whole = " (qdrant-store-document searches all of it)" if collection.layout.takes_documents else ""
            text += f"\n{cut} The whole note is stored{whole}."
        return results.reply(results.Stored(collection_name=collection_name, id=key, truncated=bool(cut)), text)

    async def store_document(
        document: Annotated[str, Field(description="The long text to store (an article, a page, a file's text)")],
        collection_name: Annotated[str, Field(description="The collection to store the document in")],
        metadata: Metadata = None,
        id: Id = None,
    ) -> Annotated[CallToolResult, results.Stored]:
        if len(document) > settings.max_document_chars:
            raise InvalidArgumentError(
                f"document is {len(document)} characters long, more than this server takes "
                f"({settings.max_document_chars}, SBERT_QDRANT_MAX_DOCUMENT_CHARS); split it into parts."
            )
        check_text(document, "document", "give the text to store")
        collection = await backend.collection(collection_name, write=True)
        if not collection.layout.takes_documents:
            raise UnsupportedError(
                f"collection {collection_name!r} is in mcp-server-qdrant's layout (the text under 'document'), "
                "which has no place for a document's passages: qdrant-store keeps it whole as one note (its vector "
                "made from its first tokens), or store it as a document in another collection."
            )
        ids = await collection.upsert_documents(
            [document], ids=None if id is None else [id], payloads=[metadata], show_progress_bar=False
        )
        text = f"Stored the document ({len(document)} characters) in collection {collection_name} (id {ids[0]})"
        return results.reply(results.Stored(collection_name=collection_name, id=ids[0]), text)

    async def find_documents(
        query: Query,
        collection_name: Annotated[str, Field(description="The collection to search in")],
        query_filter: Filter = None,
        limit: Limit = None,
        mode: Mode = "dense",
        rerank: Rerank = False,
        passages: Annotated[StrictInt, Field(ge=1, le=10, description="Matching passages per document")] = 3,
        field_values: dict[str, Any] | None = None,
    ) -> Annotated[CallToolResult, results.FoundDocuments]:
        collection = await backend.collection(collection_name)
        if not collection.layout.takes_documents or not await collection.exists():
            return results.found_documents(collection_name, query, [], stored=False)
        cut = await backend.truncation(query, "query")
        chosen = {"mode": mode, "chunks": passages}
        request = await search_request(collection, query_filter, limit, field_values, rerank, chosen)
        hits = await collection.search_documents(query, request=request)
        return results.found_documents(collection_name, query, hits, truncated=cut)

    async def find_duplicates(
        information: Annotated[str, Field(description="The text whose duplicates (same meaning) to look up")],
        collection_name: Annotated[str, Field(description="The collection to search in")],
        threshold: Annotated[
            float | None,
            Field(ge=-1, le=1, description="Cosine similarity from which a text is a duplicate (default: calibrated)"),
        ] = None,
        limit: Limit = None,
    ) -> Annotated[CallToolResult, results.Found]:
        collection = await backend.collection(collection_name)
        if not await collection.exists():
            return results.found(collection_name, information, [], stored=False, style=settings.results)
        cut = await backend.truncation(information, "text")
        hits = await collection.find_duplicates(information, threshold, limit or settings.search_limit)
        found = cast("list[Hit]", hits)
        return results.found(collection_name, information, found, truncated=cut, style=settings.results)

    async def delete(
        ids: Annotated[list[AgentKey], Field(min_length=1, description="Ids of stored texts or documents")],
        collection_name: Annotated[str, Field(description="The collection to delete from")],
    ) -> Annotated[CallToolResult, results.Deleted]:
        collection = await backend.collection(collection_name, write=True, vectors=False)
        existed = 0
        if await collection.exists():
            documents = collection.layout.takes_documents
            found = {t.id for t in await collection.get(ids)}
            found |= {k for k in ids if documents and k not in found and await collection.get_document(k) is not None}
            existed = len(found)
            await collection.delete_texts(ids)
            if documents:
                await collection.delete_documents(ids)
        asked = len(set(ids))
        text = f"Deleted {existed} of the {asked} id(s) given from collection {collection_name}" + (
            "" if existed == asked else f"; {asked - existed} did not exist"
        )
        deleted = results.Deleted(collection_name=collection_name, ids=ids, deleted=existed)
        return results.reply(deleted, text)

    async def count(
        collection_name: Annotated[str, Field(description="The collection to count in")],
        query_filter: Filter = None,
        kind: Annotated[CountKind, Field(description="What to count: texts, documents or chunks")] = "texts",
    ) -> Annotated[CallToolResult, results.Counted]:
        collection = await backend.collection(collection_name, vectors=False)
        number = await collection.count(_filter(query_filter), kind=kind) if await collection.exists() else 0
        counted = results.Counted(collection_name=collection_name, kind=kind, count=number)
        return results.reply(counted, f"{number} {kind} in collection {collection_name}")

    async def list_collections() -> Annotated[CallToolResult, results.Collections]:
        names = await backend.collection_names()
        text = "Collections: " + ", ".join(names) if names else "No collections yet"
        return results.reply(results.Collections(collections=names), text)

    return {
        "qdrant-find": (find, settings.tool_find_description, _READS),
        "qdrant-store": (store, settings.tool_store_description, _WRITES),
        "qdrant-find-documents": (
            find_documents,
            "Look up long documents by meaning: one result per document, with its best-matching passages and "
            "their character offsets (start, end) to cite.",
            _READS,
        ),
        "qdrant-store-document": (
            store_document,
            "Keep a long text (an article, a page, a file) as a document, split into passages that are searched "
            "with qdrant-find-documents.",
            _WRITES,
        ),
        "qdrant-find-duplicates": (
            find_duplicates,
            "Look up stored texts that say the same as the given one (duplicate questions, repeated memories).",
            _READS,
        ),
        "qdrant-delete": (delete, "Delete stored texts and documents by id.", _WRITES),
        "qdrant-count": (count, "Count the texts, documents or chunks stored, all or those matching a filter.", _READS),
        "qdrant-list-collections": (list_collections, "List the collections in Qdrant.", _READS),
    }


def _filter(query_filter: dict[str, Any] | None) -> models.Filter | None:
    from qdrant_client import models

    if query_filter is None:
        return None
    try:
        return models.Filter.model_validate(query_filter)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise InvalidArgumentError(
            f"query_filter is not a Qdrant filter ({problems}); write it as "
            '{"must": [{"key": "<payload field>", "match": {"value": <value>}}]}.'
        ) from exc
