"""A LlamaIndex retriever over a collection's documents: one node per stored document."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ...aio import AsyncTextCollection
from ...collection import TextCollection
from ...documents import DocumentHit
from ...errors import UnsupportedError
from ...search_request import SearchRequest


class SbertDocumentRetriever(BaseRetriever):
    """The ``similarity_top_k`` documents (``upsert_documents``) best matching a query, one ``NodeWithScore`` each:
    a ``TextNode`` (id: the document's id) holding its matching chunks in reading order, its payload as metadata
    with each chunk's ``start``, ``end`` and ``score`` under ``chunks``.

    collection: a TextCollection (async calls run it in a worker thread) or an AsyncTextCollection (async calls
    only). search_kwargs: any further option of ``search_documents`` (``mode``, ``chunks``, ``diversity``,
    ``query_filter``, ``rescore``, ``rerank``, ...), checked here.
    """

    def __init__(
        self,
        collection: TextCollection | AsyncTextCollection,
        similarity_top_k: int = 4,
        search_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.collection = collection
        self.similarity_top_k = similarity_top_k
        self.search_kwargs = dict(search_kwargs or {})
        options = {**self.search_kwargs, "limit": similarity_top_k}
        #: The request every retrieval sends, checked here.
        self.request = SearchRequest.of(options, names={"limit": "similarity_top_k"})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not isinstance(self.collection, TextCollection):
            raise UnsupportedError(
                "this retriever wraps an AsyncTextCollection: call aretrieve() instead of retrieve(), or pass a "
                "TextCollection."
            )
        found = self.collection.search_documents(query_bundle.query_str, request=self.request)
        return [as_node(hit) for hit in found]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        collection = self.collection
        query = query_bundle.query_str
        if isinstance(collection, TextCollection):
            found = await asyncio.to_thread(collection.search_documents, query, request=self.request)
        else:
            found = await collection.search_documents(query, request=self.request)
        return [as_node(hit) for hit in found]


def as_node(hit: DocumentHit) -> NodeWithScore:
    """A document hit as a LlamaIndex node: its matching chunks in reading order, its payload and places."""
    chunks = sorted(hit.chunks, key=lambda c: c.start)
    places = [{"start": c.start, "end": c.end, "score": c.score} for c in hit.chunks]
    node = TextNode(
        id_=str(hit.id), text="\n\n".join(c.text for c in chunks), metadata={**hit.payload, "chunks": places}
    )
    return NodeWithScore(node=node, score=hit.score)
