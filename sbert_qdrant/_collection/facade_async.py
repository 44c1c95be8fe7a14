"""AsyncTextCollection: texts in, Qdrant points out; text queries in, typed hits out (asyncio).

Written once, here; ``tools/unasync.py`` derives the sync ``TextCollection`` (``facade_sync.py``) from this file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from qdrant_client import AsyncQdrantClient, models
from typing_extensions import Unpack

from ..dedup import Calibration
from ..documents import DocumentHit, StoredDocument, chunk_point_id, chunks_only, first_chunks_only
from ..errors import InvalidArgumentError
from ..protocols import TextEncoder, TokenEncoder
from ..records import Hit, Key, StoredText, UpsertResult, check_ids, point_id
from ..search_request import SearchOptions, SearchRequest, requested, takes_search_options
from ..settings import Settings
from ..store.factory import open_async_store
from ..types import (
    COUNT_KINDS,
    ID_KINDS,
    CountKind,
    IdKind,
    OnConflict,
)
from .base_async import AsyncCollectionBase
from .duplicates import DuplicatePair
from .filters import engine_filter
from .reembed_async import point_alias, reembed_into
from .writes import WriteOptions

__all__ = ["AsyncTextCollection", "DuplicatePair", "list_collections"]


class AsyncTextCollection(AsyncCollectionBase):
    """A Qdrant collection of texts (and documents) embedded by a SentenceEncoder.

    Engine: ``location=`` (embedded Qdrant Edge on disk), ``url=``/``api_key=`` (a Qdrant server or Qdrant Cloud),
    ``client=`` (an AsyncQdrantClient, ``":memory:"`` included), or ``store=`` (any ``AsyncVectorStore``: the seam
    where tests put an engine that fails on demand). With none, ``QDRANT_URL`` if set, else
    ``SBERT_QDRANT_LOCATION`` (default ``./sbert_qdrant_data``). The collection is created on the first write with
    the encoder's size and cosine distance and, unless ``sparse=None``, a BM25 sparse vector (``sparse="bm25"`` or
    your ``Bm25(...)`` settings) for ``mode="sparse"``/``"hybrid"`` searches; an existing one is checked and used as
    it is, never recreated unless ``recreate=True``. Ids are yours (any str or int given to ``upsert_texts``, else
    the id derived from the text) everywhere. Texts and documents share a collection without mixing: text calls see
    texts only, document calls documents only. A collection another tool wrote is read and searched as it is with
    its vector's name and its text's payload field, e.g. langchain-qdrant's ``vector_name="", text_field=
    "page_content"`` (read-only: writes are refused). ``encoder`` may be any object with what a collection uses
    (``sbert_qdrant.protocols.TextEncoder``); documents also need a tokenizer (``DocumentEncoder``).

    Several models in one collection: ``named_vectors={"name": encoder, ...}`` adds a dense slot per encoder beside
    the primary (``vector_name``); every write fills each slot, and a search picks one with ``using="name"``. A
    token encoder (``MultiVectorEncoder``) there fills a multivector slot, which ``rescore="name"`` uses.
    ``layout=`` takes a whole ``PointLayout`` instead (e.g. ``PointLayout.mcp_server_qdrant(model)``: the
    collections mcp-server-qdrant reads and writes).
    """

    async def __aenter__(self) -> AsyncTextCollection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- writes ----------------------------------------------------------------------------------------------------

    async def upsert_texts(
        self,
        texts: Iterable[Any],
        ids: Sequence[Key] | None = None,
        payloads: Sequence[Mapping[str, Any] | None] | None = None,
        batch_size: int | None = None,
        wait: bool = True,
        on_conflict: OnConflict = "overwrite",
        show_progress_bar: bool | None = None,
        *,
        vectors: Sequence[Any] | None = None,
        vectors_from: str | None = None,
        bulk: bool = False,
    ) -> UpsertResult:
        """Embed and store texts; returns one id per record: yours, else the one derived from its text.

        ``texts`` is a list of str (with optional ``ids`` and ``payloads`` lists) or an iterable of records
        (``TextRecord``, ``{"text", "payload", "id"}`` dicts, or str), streamed in batches. Re-running writes the
        same points again (``on_conflict="overwrite"``) or leaves stored ids alone without encoding them
        (``"skip"``). Batch k+1 is encoded while batch k is written; at most two batches of vectors are held.

        Vectors encoded elsewhere (another process, a Ray worker, a GPU box) are written as given with
        ``vectors_from=`` the identity of the encoder that made them (``encoder.identity``; another model's is
        refused): ``vectors`` holds one per text of a list, or each record carries its ``vector``. They are checked
        (size, finite, unit length when the encoder normalizes); BM25 is computed here from the text.

        ``bulk=True`` loads many points into a server fast: background indexing paused during the load, writes not
        waited on one by one, then one wait for all of them and the index built once (``optimize``; a crashed bulk
        load leaves indexing paused until the next ``optimize()`` or bulk load ends). Edge and local mode index on
        ``optimize()`` only, so there it just builds the index at the end.
        """
        return await self._texts.upsert(texts, WriteOptions.of(locals()))

    async def reembed(
        self,
        collection_name: str,
        encoder: TextEncoder,
        *,
        batch_size: int | None = None,
        on_conflict: OnConflict = "overwrite",
        bulk: bool = False,
        show_progress_bar: bool | None = None,
        named_vectors: Mapping[str, TextEncoder | TokenEncoder] | None = None,
    ) -> UpsertResult:
        """Copy every text and document into the collection ``collection_name`` (on the same engine), encoded by
        ``encoder``: the same ids, payloads and chunks (each re-encoded with its document's context), BM25 with
        this collection's settings, the collection created with this one's; returns the point ids written (texts
        and chunks). ``named_vectors`` adds slots to the new collection, filled in the same pass (e.g. a
        late-interaction slot: ``{"tokens": MultiVectorEncoder}``). Re-running resumes (``on_conflict="skip"``).
        This collection is left as it is: move readers with ``set_alias`` (atomic, on a server or local mode) or,
        on Qdrant Edge, by opening the new name, then ``delete_collection`` it. A calibrated duplicate threshold is
        not copied (it belongs to the old model). Holds every point's payload (not its vector) in memory while it
        copies.
        """
        return await reembed_into(
            self._ctx, collection_name, encoder, batch_size, on_conflict, bulk, show_progress_bar, named_vectors
        )

    async def set_alias(self, alias: str) -> None:
        """Make ``alias`` name this collection, moved atomically from the collection it named (a server, local
        mode): readers open ``TextCollection(alias, encoder)`` and switch over with no gap. Qdrant Edge has no
        aliases (open the new name there)."""
        await point_alias(self._ctx, alias)

    async def delete_texts(
        self, ids: Sequence[Key] | None = None, *, query_filter: models.Filter | None = None, wait: bool = True
    ) -> None:
        """Delete texts by id (as ``upsert_texts`` returned them; unknown ones are ignored) or by a filter; a
        document's chunks are never touched (``delete_documents`` deletes documents)."""
        await self._texts.delete(ids, query_filter, wait)

    # -- reads -----------------------------------------------------------------------------------------------------

    async def count(self, query_filter: models.Filter | None = None, *, kind: CountKind = "texts") -> int:
        """Stored texts, all or those matching the filter; ``kind="documents"`` counts documents instead, and
        ``kind="chunks"`` the chunks of documents."""
        if kind not in COUNT_KINDS:
            raise InvalidArgumentError(f"kind={kind!r} must be one of {COUNT_KINDS}.")
        selected = engine_filter(query_filter)
        await self._ctx.ensure(create=False)
        only = {"texts": self._ctx.texts_only, "documents": first_chunks_only, "chunks": chunks_only}[kind](selected)
        return await self._ctx.store.count(self.collection_name, only)

    async def get(self, ids: Sequence[Key], with_vectors: bool = False) -> list[StoredText]:
        """Stored texts by id, in the order asked; unknown ids (and documents' ids) are left out."""
        return await self._texts.get(ids, with_vectors)

    async def stored_ids(self, ids: Sequence[Key], *, kind: IdKind = "texts") -> list[Key]:
        """Those of ``ids`` stored as texts (``kind="documents"``: as documents), in the order asked. Ids only: no
        payload or vector is read, so that a resumed load can ask it of millions of ids batch by batch."""
        if kind not in ID_KINDS:
            raise InvalidArgumentError(f"kind={kind!r} must be one of {ID_KINDS}.")
        keys = check_ids(ids)
        points = [point_id(key) if kind == "texts" else chunk_point_id(key, 0) for key in keys]
        await self._ctx.ensure(create=False)
        found = await self._ctx.store.existing_ids(self.collection_name, points) if points else set()
        return [key for key, point in zip(keys, points, strict=True) if point in found]

    @takes_search_options
    async def search_text(
        self, query: str, limit: int = 10, *, request: SearchRequest | None = None, **options: Unpack[SearchOptions]
    ) -> list[Hit]:
        """The ``limit`` stored texts best matching ``query``, best first (documents: ``search_documents``).

        The options (listed below, each one field of ``SearchRequest``): the mode (``"dense"`` cosine, ``"sparse"``
        BM25, ``"hybrid"`` both fused in the engine), MMR diversity, late interaction (``rescore``: a multivector
        slot's MaxSim re-scores the candidates in the engine), a re-ranker (a CrossEncoder re-scoring the best
        ``rerank_candidates``, blended with the retrieval score by ``rerank_weight``; ``Hit.retrieval_score`` keeps
        the retrieval's own), the dense search's ``search_params``, ``using`` a dense slot of ``named_vectors``,
        pagination (``offset``), filters and what each hit carries. An option that cannot apply is refused.
        ``request=`` takes them all as one ``SearchRequest`` instead (e.g. one an adapter or the CLI built).
        """
        return (await self.search_texts([query], limit, request=request, **options))[0]

    @takes_search_options
    async def search_texts(
        self,
        queries: Sequence[str],
        limit: int = 10,
        *,
        request: SearchRequest | None = None,
        **options: Unpack[SearchOptions],
    ) -> list[list[Hit]]:
        """``search_text`` for many queries: one encode, one batched query (and one cross-encoder pass)."""
        return await self._texts.search(queries, requested(request, limit, options))

    @takes_search_options
    async def search_by_vector(
        self,
        vector: Sequence[float] | np.ndarray,
        limit: int = 10,
        *,
        request: SearchRequest | None = None,
        **options: Unpack[SearchOptions],
    ) -> list[Hit]:
        """The ``limit`` texts nearest to a dense vector you encoded (``encoder.encode_query``), as qdrant-client's
        ``query_points(query=vector)``; ``using``: the dense slot (None: the primary). Options that need the
        query's text (mode, diversity, rescore, rerank) are refused."""
        return await self._texts.search_vector(vector, requested(request, limit, options))

    @takes_search_options
    async def search_similar(
        self, id: Key, limit: int = 10, *, request: SearchRequest | None = None, **options: Unpack[SearchOptions]
    ) -> list[Hit]:
        """ "More like this": the ``limit`` texts nearest to the stored text ``id`` (itself left out), as
        qdrant-client's ``query_points(query=point_id)``; the options as ``search_by_vector``'s."""
        return await self._texts.search_similar(id, requested(request, limit, options))

    async def scroll(
        self,
        scroll_filter: models.Filter | None = None,
        limit: int = 10,
        offset: Key | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[StoredText], Key | None]:
        """A page of stored texts (those matching ``scroll_filter``) and the id of the text the next page starts at
        (None: no more), as qdrant-client's ``scroll``: pass it back as ``offset``. Documents' chunks are left out."""
        return await self._texts.scroll(scroll_filter, limit, offset, with_vectors)

    # -- documents -------------------------------------------------------------------------------------------------

    async def upsert_documents(
        self,
        documents: Iterable[Any],
        ids: Sequence[Key] | None = None,
        payloads: Sequence[Mapping[str, Any] | None] | None = None,
        chunk_tokens: int | None = None,
        overlap_tokens: int | None = None,
        batch_size: int | None = None,
        wait: bool = True,
        on_conflict: OnConflict = "overwrite",
        show_progress_bar: bool | None = None,
        *,
        context_field: str | None = None,
        vectors: Sequence[Any] | None = None,
        vectors_from: str | None = None,
        bulk: bool = False,
    ) -> UpsertResult:
        """Chunk, embed and store documents; returns one id per document (yours, else derived from its text).

        Each document is split with the encoder's tokenizer into chunks of at most ``chunk_tokens`` (default: all
        the encoder reads), at sentence or word boundaries, neighbours sharing ``overlap_tokens`` (default: an
        eighth of a chunk). ``context_field`` names a payload field (a title, a heading) put before every chunk of
        its document when the chunk is encoded (dense and BM25), so that a chunk from the middle keeps its topic;
        the stored chunk text and offsets are the document's own. A changed document replaces all its chunks (its
        new chunks are written first, then the old version's removed; re-running after a crash in between removes
        them); an unchanged one is not re-encoded. ``on_conflict="skip"`` leaves any stored version alone.
        ``documents`` takes the same shapes as ``upsert_texts``' texts; ``batch_size`` counts chunks. Chunk vectors
        encoded elsewhere come as in ``upsert_texts``, one array per document with a row per input of
        ``Chunking.of(encoder, chunk_tokens, overlap_tokens, context_field).inputs(text, payload)``. ``bulk`` as in
        ``upsert_texts``.
        """
        options = WriteOptions.of(locals())
        return await self._documents.upsert(documents, options, chunk_tokens, overlap_tokens, context_field)

    async def delete_documents(self, ids: Sequence[Key], wait: bool = True) -> None:
        """Delete documents (every chunk) by id; unknown ids are ignored."""
        await self._documents.delete(ids, wait)

    async def get_document(self, id: Key) -> StoredDocument | None:
        """A stored document, its text rebuilt from its chunks, or None."""
        return await self._documents.get(id)

    async def scroll_documents(
        self, limit: int = 10, offset: Key | None = None
    ) -> tuple[list[StoredDocument], Key | None]:
        """A page of stored documents (texts rebuilt from their chunks) and the id of the document the next page
        starts at (None: no more), as ``scroll`` for texts: pass it back as ``offset``."""
        return await self._documents.scroll(limit, offset)

    @takes_search_options
    async def search_documents(
        self, query: str, limit: int = 10, *, request: SearchRequest | None = None, **options: Unpack[SearchOptions]
    ) -> list[DocumentHit]:
        """The ``limit`` documents best matching ``query``, one hit each, with up to ``chunks`` matching chunks.

        Every stage of ``search_text`` applies, over chunks: the modes, MMR (chunks picked by maximal marginal
        relevance, documents in the order of their first pick), late interaction (``rescore``), a re-ranker
        (re-scoring the listed chunks of the best ``rerank_candidates`` documents, per chunk). ``score``: ``"max"``
        ranks documents by their best chunk, ``"sum"`` by the sum of their listed chunks' scores. A server (and
        local mode) groups in the engine; on Qdrant Edge the best chunks are fetched until ``limit`` documents are
        found, so no document is crowded out by another's chunks.
        """
        return await self._documents.search(query, requested(request, limit, options))

    # -- duplicates ------------------------------------------------------------------------------------------------

    async def find_duplicates(
        self, text_or_texts: str | Sequence[str], threshold: float | None = None, limit: int = 10
    ) -> list[Hit] | list[list[Hit]]:
        """Stored texts at or above the duplicate threshold (given, else calibrated, else the default).

        The record stored from the very same text (without an id of its own) is not its own duplicate.
        """
        texts: list[str] = [text_or_texts] if isinstance(text_or_texts, str) else list(text_or_texts)
        results = await self._texts.find_duplicates(texts, threshold, limit)
        return results[0] if isinstance(text_or_texts, str) else results

    async def calibrate_threshold(self, labelled_pairs: Iterable[tuple[str, str, int | bool]]) -> Calibration:
        """Best-F1 cosine threshold on (text, text, is_duplicate) pairs, stored with the collection."""
        return await self._texts.calibrate_threshold(labelled_pairs)

    async def mine_duplicates(
        self, threshold: float | None = None, top_k: int = 5, limit: int | None = None, block_size: int = 2048
    ) -> list[DuplicatePair]:
        """The most similar pairs of stored texts (paraphrase mining), best first, each text's ``top_k`` best;
        ``block_size`` texts are compared with all at a time (memory: ``block_size`` x texts scores)."""
        return await self._texts.mine_duplicates(threshold, top_k, limit, block_size)


async def list_collections(
    location: str | os.PathLike[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    client: AsyncQdrantClient | None = None,
    *,
    settings: Settings | None = None,
) -> list[str]:
    """The names of the collections on an engine, sorted; the engine is chosen as ``AsyncTextCollection`` chooses it
    (with none given: ``QDRANT_URL`` if set, else ``SBERT_QDRANT_LOCATION``). A client given is left open."""
    store = open_async_store(location, url, api_key, client, settings)
    try:
        return await store.names()
    finally:
        await store.close()
