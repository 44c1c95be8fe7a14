"""LangChain ``VectorStore`` over a TextCollection (sync) and/or an AsyncTextCollection (async)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from qdrant_client import AsyncQdrantClient, QdrantClient, models
from typing_extensions import Unpack

from ...aio import AsyncTextCollection
from ...collection import TextCollection
from ...encoder import SentenceEncoder
from ...errors import CollectionNotFoundError, InvalidArgumentError, UnsupportedError
from ...records import Hit
from ...search_request import SearchRequest
from ._records import (
    LangChainSearchOptions,
    collection_args,
    delete_args,
    is_search_option,
    search_defaults,
    search_request,
    to_document,
    upsert_args,
)
from .embeddings import LangChainEncoder, SbertEmbeddings, as_encoder


class SbertQdrantVectorStore(VectorStore):
    """A LangChain VectorStore over sbert-qdrant's collections: texts embedded by the collection's encoder.

    collection: a TextCollection (sync methods; async ones run it in a worker thread) or an AsyncTextCollection
    (async methods only); pass both (``async_collection=``) when they open the same Qdrant collection (a server).
    A document's id is its own (``Document.id`` or ``ids=``), else derived from its text and metadata, so that adding
    the same documents again overwrites them and never duplicates. Metadata is stored as the point's payload, beside
    the text (``"text"`` and ``"key"`` are reserved).
    search_options: the defaults of every search, any option of ``TextCollection.search_text`` (e.g.
    ``mode="hybrid"``, ``rerank=``; langchain-qdrant's ``retrieval_mode=RetrievalMode.HYBRID`` too), checked here;
    each search may override them.
    """

    def __init__(
        self,
        collection: TextCollection | AsyncTextCollection,
        *,
        async_collection: AsyncTextCollection | None = None,
        **search_options: Unpack[LangChainSearchOptions],
    ) -> None:
        if isinstance(collection, AsyncTextCollection):
            if async_collection is not None:
                raise InvalidArgumentError(
                    "pass a TextCollection first and the AsyncTextCollection as async_collection."
                )
            sync, async_collection = None, collection
        elif isinstance(collection, TextCollection):
            sync = collection
        else:
            raise InvalidArgumentError(
                f"collection must be a TextCollection or an AsyncTextCollection, not {type(collection).__name__}."
            )
        if async_collection is not None and not isinstance(async_collection, AsyncTextCollection):
            raise InvalidArgumentError(
                f"async_collection must be an AsyncTextCollection, not {type(async_collection).__name__}."
            )
        self.collection = sync
        self.async_collection = async_collection
        #: The defaults of every search, in our names (checked as one request).
        self.search_options: dict[str, Any] = search_defaults(search_options)
        self._embeddings: Embeddings | None = None
        #: The local-mode client opened for langchain-qdrant's ``path=`` (closed with the store).
        self._own_client: Any = None

    def __repr__(self) -> str:
        return f"SbertQdrantVectorStore({self._any!r}, mode={self.search_options.get('mode', 'dense')!r})"

    @property
    def _any(self) -> TextCollection | AsyncTextCollection:
        return self.collection if self.collection is not None else cast(AsyncTextCollection, self.async_collection)

    @property
    def embeddings(self) -> Embeddings:
        """The collection's encoder as LangChain Embeddings (the Embeddings it wraps, for a LangChainEncoder)."""
        if self._embeddings is None:
            encoder = self._any.encoder
            if isinstance(encoder, LangChainEncoder):
                self._embeddings = encoder.embeddings
            elif isinstance(encoder, SentenceEncoder):
                self._embeddings = SbertEmbeddings(encoder=encoder)
            else:
                raise UnsupportedError(
                    f"the collection's encoder {encoder!r} is neither a SentenceEncoder nor a LangChainEncoder, so "
                    "it has no LangChain Embeddings; pass one of those to the collection."
                )
        return self._embeddings

    def _sync(self, method: str) -> TextCollection:
        if self.collection is None:
            raise UnsupportedError(
                f"{method}() needs a TextCollection, but this store wraps an AsyncTextCollection only: call "
                f"a{method}() instead, or pass SbertQdrantVectorStore(TextCollection(...), async_collection=...)."
            )
        return self.collection

    # -- writes ----------------------------------------------------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and store texts (metadata as payload); returns their ids. Adding an id again overwrites it."""
        collection = self._sync("add_texts")
        keys, upsert = upsert_args(texts, metadatas, ids, batch_size, kwargs)
        collection.upsert_texts(**upsert)
        return keys

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """``add_texts`` for asyncio."""
        if self.async_collection is None:
            return await super().aadd_texts(texts, metadatas, ids=ids, batch_size=batch_size, **kwargs)
        keys, upsert = upsert_args(texts, metadatas, ids, batch_size, kwargs)
        await self.async_collection.upsert_texts(**upsert)
        return keys

    def delete(
        self, ids: list[str] | None = None, *, filter: models.Filter | Mapping[str, Any] | None = None, **kwargs: Any
    ) -> bool:
        """Delete by id (unknown ids are ignored) or by ``filter=``; returns True."""
        collection = self._sync("delete")
        selector = delete_args(ids, filter, kwargs)
        with contextlib.suppress(CollectionNotFoundError):  # nothing stored yet: nothing to delete
            collection.delete_texts(**selector)
        return True

    async def adelete(
        self, ids: list[str] | None = None, *, filter: models.Filter | Mapping[str, Any] | None = None, **kwargs: Any
    ) -> bool:
        """``delete`` for asyncio."""
        if self.async_collection is None:
            return bool(await super().adelete(ids, filter=filter, **kwargs))
        selector = delete_args(ids, filter, kwargs)
        with contextlib.suppress(CollectionNotFoundError):
            await self.async_collection.delete_texts(**selector)
        return True

    # -- reads -----------------------------------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents with these ids, in the order asked; unknown ids are left out."""
        collection = self._sync("get_by_ids")
        try:
            return [to_document(r) for r in collection.get([str(i) for i in ids])]
        except CollectionNotFoundError:
            return []

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """``get_by_ids`` for asyncio."""
        if self.async_collection is None:
            return await super().aget_by_ids(ids)
        try:
            return [to_document(r) for r in await self.async_collection.get([str(i) for i in ids])]
        except CollectionNotFoundError:
            return []

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` documents best matching ``query``; kwargs: ``filter`` and any search option of
        ``TextCollection.search_text`` (``mode``, ``score_threshold``, ``rerank``, ``rescore``, ...)."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """``similarity_search`` for asyncio."""
        return [doc for doc, _ in await self.asimilarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """``similarity_search`` with each document's score: the search mode's own (cosine for dense), or the
        cross-encoder's when re-ranking; higher is better."""
        collection = self._sync("similarity_search_with_score")
        return _scored(lambda: collection.search_text(query, request=self._search_request(k, kwargs)))

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """``similarity_search_with_score`` for asyncio."""
        if self.async_collection is None:
            return await super().asimilarity_search_with_score(query, k, **kwargs)
        try:
            hits = await self.async_collection.search_text(query, request=self._search_request(k, kwargs))
        except CollectionNotFoundError:
            return []
        return [(to_document(h), h.score) for h in hits]

    def max_marginal_relevance_search(
        self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents chosen by maximal marginal relevance among the ``fetch_k`` best, by the engine
        (``lambda_mult``: 1 for relevance only, 0 for diversity only)."""
        collection = self._sync("max_marginal_relevance_search")
        request = self._mmr_request(k, fetch_k, lambda_mult, kwargs)
        return [doc for doc, _ in _scored(lambda: collection.search_text(query, request=request))]

    async def amax_marginal_relevance_search(
        self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        """``max_marginal_relevance_search`` for asyncio."""
        if self.async_collection is None:
            return await super().amax_marginal_relevance_search(query, k, fetch_k, lambda_mult, **kwargs)
        request = self._mmr_request(k, fetch_k, lambda_mult, kwargs)
        try:
            return [to_document(h) for h in await self.async_collection.search_text(query, request=request)]
        except CollectionNotFoundError:
            return []

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` documents nearest to a query vector (``store.embeddings.embed_query``), as langchain-qdrant's;
        kwargs: ``filter``, ``score_threshold``."""
        collection = self._sync("similarity_search_by_vector")
        request = search_request(kwargs, {"k": k})
        return [doc for doc, _ in _scored(lambda: collection.search_by_vector(embedding, request=request))]

    async def asimilarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        """``similarity_search_by_vector`` for asyncio."""
        if self.async_collection is None:
            return await super().asimilarity_search_by_vector(embedding, k, **kwargs)
        request = search_request(kwargs, {"k": k})
        try:
            return [to_document(h) for h in await self.async_collection.search_by_vector(embedding, request=request)]
        except CollectionNotFoundError:
            return []

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """LangChain's retriever over this store. Search options given beside ``search_kwargs``
        (``as_retriever(k=2)``, which LangChain's retriever would drop without a word) are taken into it; the same
        option in both with two values is refused."""
        direct = {name: kwargs.pop(name) for name in list(kwargs) if is_search_option(name) or name in _MMR_ONLY}
        if direct:
            search_kwargs = dict(kwargs.get("search_kwargs") or {})
            for name, value in direct.items():
                if name in search_kwargs and search_kwargs[name] != value:
                    raise InvalidArgumentError(
                        f"as_retriever({name}={value!r}, search_kwargs={{{name!r}: {search_kwargs[name]!r}}}) sets "
                        f"{name} twice; pass it once (in search_kwargs, where LangChain reads it)."
                    )
                search_kwargs[name] = value
            kwargs["search_kwargs"] = search_kwargs
        return super().as_retriever(**kwargs)

    def _search_request(self, k: int, kwargs: dict[str, Any]) -> SearchRequest:
        request = search_request(self.search_options, kwargs, {"k": k})
        if "fetch_k" in kwargs and request.diversity is None and request.rescore is None and request.mode != "hybrid":
            raise InvalidArgumentError(
                f"fetch_k={kwargs['fetch_k']!r} does not apply to a similarity search of mode={request.mode!r}: it "
                "returns the k best directly, and fetch_k would be ignored (langchain-qdrant refuses it too). fetch_k "
                "is the candidates of max_marginal_relevance_search (as_retriever(search_type='mmr')) and of "
                "mode='hybrid' (each source's); drop it, or use one of those."
            )
        return request

    def _mmr_request(self, k: int, fetch_k: int, lambda_mult: float, kwargs: dict[str, Any]) -> SearchRequest:
        if isinstance(lambda_mult, bool) or not isinstance(lambda_mult, (int, float)) or not 0 <= lambda_mult <= 1:
            raise InvalidArgumentError(f"lambda_mult={lambda_mult!r} must be between 0 (diversity) and 1 (relevance).")
        fetch = max(fetch_k, k) if isinstance(fetch_k, int) and isinstance(k, int) else fetch_k
        mmr = {"k": k, "fetch_k": fetch, "diversity": 1.0 - float(lambda_mult)}
        return search_request(self.search_options, kwargs, mmr)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Relevance in [0, 1] for dense searches without re-ranking (other scores have no fixed range)."""
        options = self.search_options
        if options.get("mode", "dense") != "dense" or options.get("rerank") is not None:
            raise NotImplementedError(
                f"relevance scores in [0, 1] exist for mode='dense' without rerank= only (this store: "
                f"mode={options.get('mode', 'dense')!r}); use similarity_search_with_score, whose scores are the "
                "mode's own."
            )
        distance = self._any.distance
        if distance == "cosine":
            return _cosine_relevance
        if distance == "dot":
            return self._max_inner_product_relevance_score_fn
        if distance == "euclid":
            return self._euclidean_relevance_score_fn
        raise NotImplementedError(f"no relevance score for distance={distance!r}; use similarity_search_with_score.")

    # -- construction ----------------------------------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        collection_name: str = "langchain",
        location: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: QdrantClient | None = None,
        **collection_options: Any,
    ) -> SbertQdrantVectorStore:
        """Open (or create) a TextCollection for ``embedding`` (an SbertEmbeddings' own encoder, or any LangChain
        Embeddings through a LangChainEncoder) and add the texts to it. collection_options: TextCollection's
        (``sparse=``, ``distance=``, ``payload_indexes=``, ...) and the store's search options (``mode=``,
        ``retrieval_mode=``, ``rerank=``, ...)."""
        engine = {"location": location, "url": url, "client": client}
        searches, collection_options = _split(collection_options, engine, writes=True, client_type=QdrantClient)
        collection = TextCollection(collection_name, as_encoder(embedding), api_key=api_key, **collection_options)
        store = cls(collection, **searches)
        store._embeddings = embedding
        store._own_client = collection_options.get("client") if client is None else None
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    def from_existing_collection(
        cls,
        collection_name: str,
        embedding: Embeddings | None = None,
        *,
        location: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: QdrantClient | None = None,
        **collection_options: Any,
    ) -> SbertQdrantVectorStore:
        """A store over a collection that exists, as langchain-qdrant's: opened and checked (its vectors, and the
        encoder that wrote it) for ``embedding`` (None: the configured default model); a missing one raises
        ``CollectionNotFoundError`` naming the collections there."""
        encoder = as_encoder(embedding) if embedding is not None else None
        engine = {"location": location, "url": url, "client": client}
        searches, collection_options = _split(collection_options, engine, writes=False, client_type=QdrantClient)
        collection = TextCollection(collection_name, encoder, api_key=api_key, **collection_options)
        collection.count()  # opens and checks it: a missing collection or another model is refused here
        store = cls(collection, **searches)
        store._own_client = collection_options.get("client") if client is None else None
        if embedding is not None:
            store._embeddings = embedding
        return store

    @classmethod
    async def afrom_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        collection_name: str = "langchain",
        location: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: AsyncQdrantClient | None = None,
        **collection_options: Any,
    ) -> SbertQdrantVectorStore:
        """``from_texts`` for asyncio: an AsyncTextCollection (async methods only)."""
        engine = {"location": location, "url": url, "client": client}
        searches, collection_options = _split(collection_options, engine, writes=True, client_type=AsyncQdrantClient)
        collection = AsyncTextCollection(collection_name, as_encoder(embedding), api_key=api_key, **collection_options)
        store = cls(collection, **searches)
        store._embeddings = embedding
        store._own_client = collection_options.get("client") if client is None else None
        await store.aadd_texts(texts, metadatas, ids=ids)
        return store

    def close(self) -> None:
        """Close the sync collection (an Edge folder's lock, a client it opened, the one ``path=`` opened)."""
        if self.collection is not None:
            self.collection.close()
            if self._own_client is not None:
                self._own_client.close()

    async def aclose(self) -> None:
        """Close the async collection, and the sync one."""
        if self.async_collection is not None:
            await self.async_collection.close()
            if self._own_client is not None and self.collection is None:
                await self._own_client.close()
        self.close()


#: Arguments of max_marginal_relevance_search that are not search options, taken into search_kwargs as well.
_MMR_ONLY = frozenset({"lambda_mult"})


def _split(
    options: dict[str, Any], engine: dict[str, Any], writes: bool, client_type: Callable[..., Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A constructor's keyword options split into the store's search options and the collection's arguments (in
    langchain-qdrant's names or ours: ``collection_args``), the ``engine`` arguments given among them."""
    searches = {k: v for k, v in options.items() if is_search_option(k)}
    rest = {k: v for k, v in options.items() if k not in searches} | {k: v for k, v in engine.items() if v is not None}
    return searches, collection_args(rest, writes, client_type)


def _scored(search: Callable[[], list[Hit]]) -> list[tuple[Document, float]]:
    try:
        hits = search()
    except CollectionNotFoundError:
        return []  # nothing stored yet: an empty store
    return [(to_document(h), h.score) for h in hits]


def _cosine_relevance(score: float) -> float:
    """Cosine similarity in [-1, 1] as relevance in [0, 1]."""
    return (score + 1.0) / 2.0
