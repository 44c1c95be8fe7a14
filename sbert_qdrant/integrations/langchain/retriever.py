"""A LangChain retriever over a collection's documents: one LangChain ``Document`` per stored document."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field

from ...aio import AsyncTextCollection
from ...collection import TextCollection
from ...documents import DocumentHit
from ...errors import InvalidArgumentError, UnsupportedError
from ...search_request import SearchRequest
from ._records import search_request


class SbertDocumentRetriever(BaseRetriever):
    """The ``k`` documents (``upsert_documents``) best matching a query, one LangChain ``Document`` each: its
    matching chunks in reading order as ``page_content``, its payload as ``metadata`` with ``score`` and, under
    ``chunks``, each chunk's ``start``, ``end`` (offsets into the document) and ``score``; ``Document.id`` is its id.

    collection: a TextCollection (async calls run it in a worker thread) or an AsyncTextCollection (async calls
    only). search_kwargs: any option of ``search_documents`` (``mode``, ``chunks``, ``diversity``, ``rescore``,
    ``rerank``, ...; ``filter``, ``fetch_k`` and ``retrieval_mode`` as in SbertQdrantVectorStore);
    ``invoke(query, k=3, filter=...)`` overrides them per call. ``k=`` and a ``k`` (or ``limit``) in
    ``search_kwargs`` that differ are refused: neither silently wins.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection: TextCollection | AsyncTextCollection
    k: int = 4
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        for name in ("k", "limit") if "k" in self.model_fields_set else ():
            if name in self.search_kwargs and self.search_kwargs[name] != self.k:
                raise InvalidArgumentError(
                    f"k={self.k!r} and search_kwargs={{{name!r}: {self.search_kwargs[name]!r}}} both set how many "
                    "documents to return; pass one of them."
                )

    def _request(self, kwargs: dict[str, Any]) -> SearchRequest:
        return search_request({"k": self.k}, self.search_kwargs, kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        if not isinstance(self.collection, TextCollection):
            raise UnsupportedError(
                "this retriever wraps an AsyncTextCollection: call ainvoke() instead of invoke(), or pass a "
                "TextCollection."
            )
        return [as_document(hit) for hit in self.collection.search_documents(query, request=self._request(kwargs))]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        collection = self.collection
        if isinstance(collection, TextCollection):
            hits = await run_in_executor(None, collection.search_documents, query, request=self._request(kwargs))
        else:
            hits = await collection.search_documents(query, request=self._request(kwargs))
        return [as_document(hit) for hit in hits]


def as_document(hit: DocumentHit) -> Document:
    """A document hit as a LangChain Document: its matching chunks in reading order, its payload and places."""
    chunks = sorted(hit.chunks, key=lambda c: c.start)
    places = [{"start": c.start, "end": c.end, "score": c.score} for c in hit.chunks]
    metadata = {**hit.payload, "score": hit.score, "chunks": places}
    return Document(id=str(hit.id), page_content="\n\n".join(c.text for c in chunks), metadata=metadata)
