"""Documents as records of a text collection: ids, metadata filters, the arguments of its calls."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from qdrant_client import models

from ...errors import InvalidArgumentError, UnsupportedError
from ...records import Hit, StoredText
from ...search_request import SearchOptions, SearchRequest, did_you_mean

#: Namespace of the ids derived from a document's content and metadata (when it comes without an id).
DOCUMENT_NAMESPACE = uuid.UUID("0b6f3a5e-8a1c-5d4e-9f2b-7c3d1e6a4b90")
_FILTER_KEYS = frozenset({"must", "should", "must_not", "min_should"})
#: LangChain's names (VectorStore's and langchain-qdrant's) for search options, by the option each means.
LANGCHAIN_NAMES = {"k": "limit", "filter": "query_filter", "fetch_k": "candidates", "retrieval_mode": "mode"}


#: langchain-qdrant's names for a collection's arguments, by the argument each means.
LANGCHAIN_COLLECTION_NAMES = {"path": "client", "content_payload_key": "text_field", "sparse_embedding": "sparse"}
#: The fastembed model langchain-qdrant names for BM25 (``FastEmbedSparse(model_name="Qdrant/bm25")``).
_BM25_MODEL = "qdrant/bm25"


class LangChainSearchOptions(SearchOptions, total=False):
    """The search options, also under langchain-qdrant's name ``retrieval_mode`` (a ``RetrievalMode`` or its
    value), and ``filter`` as a dict of field -> value."""

    retrieval_mode: Any
    filter: Any


def search_request(*layers: Mapping[str, Any]) -> SearchRequest:
    """Search arguments in LangChain's names or ours (later layers override earlier ones) as one checked
    SearchRequest, its errors naming each option as the caller did."""
    options, names = _ours(layers)
    return SearchRequest.of(options, names=names)


def search_defaults(options: Mapping[str, Any]) -> dict[str, Any]:
    """A store's default search options in our names, checked as one request."""
    search_request(options)
    return _ours([options])[0]


def _ours(layers: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The layers' options in our names (later ones override earlier ones), and the caller's name of each."""
    options: dict[str, Any] = {}
    names: dict[str, str] = {}
    for layer in layers:
        seen: dict[str, str] = {}
        for key, value in layer.items():
            if not is_search_option(key):
                ours = sorted(SearchRequest.__dataclass_fields__)
                raise InvalidArgumentError(
                    f"{key}= is not a search option{did_you_mean(key, [*LANGCHAIN_NAMES, *ours])}; use LangChain's "
                    f"{', '.join(LANGCHAIN_NAMES)} or ours: {', '.join(ours)}."
                )
            option = LANGCHAIN_NAMES.get(key, key)
            if option in seen:
                raise InvalidArgumentError(f"{seen[option]}= and {key}= name the same search option; pass one.")
            seen[option] = key
            if option == "mode":
                value = getattr(value, "value", value)  # langchain-qdrant's RetrievalMode.HYBRID is "hybrid"
            elif option == "query_filter" and key == "filter":
                value = query_filter(value)
            options[option] = value
            names.pop(option, None)
            if key != option:
                names[option] = key
    return options, names


def collection_args(options: Mapping[str, Any], writes: bool, client_type: Callable[..., Any]) -> dict[str, Any]:
    """A collection's arguments in langchain-qdrant's names or ours: ``path`` is qdrant-client's local mode in that
    folder, as there (``client=client_type(path=...)``, so their collections are read as they are);
    ``content_payload_key`` is ``text_field`` (a collection that ``writes`` keeps its text under ours, ``"text"``);
    a ``sparse_embedding`` naming BM25 is ``sparse="bm25"`` (computed by the collection; another sparse model
    refused)."""
    out = {k: v for k, v in options.items() if k not in LANGCHAIN_COLLECTION_NAMES}
    for theirs, ours in LANGCHAIN_COLLECTION_NAMES.items():
        if theirs not in options:
            continue
        clash = ("location", "url", "client") if theirs == "path" else (ours,)
        given = [name for name in clash if name in options]
        if given:
            raise InvalidArgumentError(f"{theirs}= and {given[0]}= both say where the collection is; pass one.")
        value = options[theirs]
        if theirs == "sparse_embedding":
            if value is None:
                continue  # langchain-qdrant's dense-only default; a collection here keeps its BM25 slot
            value = _sparse(value)
        out[ours] = client_type(path=str(value)) if theirs == "path" else value
    text_field = out.get("text_field", "text")
    if writes and text_field != "text":
        raise UnsupportedError(
            f"content_payload_key={text_field!r}: a store created here writes sbert-qdrant's layout, its text under "
            "'text'; drop content_payload_key= to create one, or read a langchain-qdrant collection as it is with "
            f"from_existing_collection(..., content_payload_key={text_field!r}, vector_name='') (read-only)."
        )
    return out


def _sparse(embedding: object) -> str:
    """``"bm25"`` for langchain-qdrant's BM25 sparse embedding (``FastEmbedSparse(model_name="Qdrant/bm25")``)."""
    model = getattr(embedding, "model_name", None) or getattr(getattr(embedding, "_model", None), "model_name", None)
    if embedding == "bm25" or (isinstance(model, str) and model.lower() == _BM25_MODEL):
        return "bm25"
    raise UnsupportedError(
        f"sparse_embedding={type(embedding).__name__}({model or '?'}) is not supported: sbert-qdrant's sparse vectors "
        "are BM25, computed by the collection (sparse='bm25', the default, for retrieval_mode=RetrievalMode.HYBRID "
        "or SPARSE); drop sparse_embedding=, or pass FastEmbedSparse(model_name='Qdrant/bm25')."
    )


def is_search_option(name: str) -> bool:
    """Whether ``name`` is a search option, in our words or LangChain's."""
    return name in LANGCHAIN_NAMES or name in SearchRequest.__dataclass_fields__


def document_id(text: Any, metadata: Mapping[str, Any] | None) -> str:
    """The id of a document added without one: a UUIDv5 of its text and metadata, so re-adding it overwrites."""
    content = json.dumps([text, dict(metadata or {})], sort_keys=True, ensure_ascii=False, default=str)
    return str(uuid.uuid5(DOCUMENT_NAMESPACE, content))


def query_filter(value: models.Filter | Mapping[str, Any] | None) -> models.Filter | Mapping[str, Any] | None:
    """A qdrant ``models.Filter`` or its dict form (``{"must": [...]}``) as it is, for the collection to check;
    ``{"field": value, ...}`` (a list value: any of them) as equality conditions, all of which must hold."""
    if value is None or isinstance(value, models.Filter):
        return value
    if isinstance(value, Mapping) and value and set(value) <= _FILTER_KEYS:
        return value
    if isinstance(value, Mapping):
        must: list[models.Condition] = []
        for key, wanted in value.items():
            if isinstance(wanted, (list, tuple)):
                must.append(models.FieldCondition(key=key, match=models.MatchAny(any=list(wanted))))
            elif isinstance(wanted, (str, int, bool)):
                must.append(models.FieldCondition(key=key, match=models.MatchValue(value=wanted)))
            else:
                raise InvalidArgumentError(
                    f"filter[{key!r}]={wanted!r}: a dict filter matches str, int or bool values (or a list of them); "
                    "pass a qdrant_client.models.Filter for ranges and other conditions."
                )
        return models.Filter(must=must)
    raise InvalidArgumentError(
        f"filter must be a qdrant_client.models.Filter or a dict of field -> value, not {type(value).__name__}."
    )


def upsert_args(
    texts: Iterable[str],
    metadatas: Sequence[Mapping[str, Any] | None] | None,
    ids: Sequence[str | None] | None,
    batch_size: int | None,
    extra: Mapping[str, Any],
) -> tuple[list[str], dict[str, Any]]:
    """(every text's id, the arguments of ``upsert_texts``); a repeated document without an id is written once."""
    if extra:
        raise InvalidArgumentError(f"unknown argument(s) {sorted(extra)} for add_texts/add_documents.")
    items = list(texts)
    for name, values in (("metadatas", metadatas), ("ids", ids)):
        if values is not None and len(values) != len(items):
            raise InvalidArgumentError(f"{name} has {len(values)} items but texts has {len(items)}; pass one each.")
    metas = list(metadatas) if metadatas is not None else [None] * len(items)
    given = list(ids) if ids is not None else [None] * len(items)
    keys: list[str] = []
    rows: list[tuple[str, Any, Any]] = []
    derived: set[str] = set()
    for text, meta, key in zip(items, metas, given, strict=True):
        if key is not None:
            keys.append(str(key))
            rows.append((str(key), text, meta))
            continue
        keys.append(document_id(text, meta))
        if keys[-1] not in derived:  # the same text and metadata twice: written once
            derived.add(keys[-1])
            rows.append((keys[-1], text, meta))
    upsert = {
        "texts": [t for _, t, _ in rows],
        "ids": [k for k, _, _ in rows],
        "payloads": [m for _, _, m in rows],
        "batch_size": batch_size,
    }
    return keys, upsert


def delete_args(ids: Sequence[str] | None, filter_: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    if extra:
        raise InvalidArgumentError(f"unknown argument(s) {sorted(extra)} for delete; use ids or filter=.")
    if (ids is None) == (filter_ is None):
        raise InvalidArgumentError(
            "delete needs ids or filter= (exactly one); to remove everything, drop the collection: "
            "store.collection.delete_collection()."
        )
    if ids is not None:
        return {"ids": [str(i) for i in ids]}
    return {"query_filter": query_filter(filter_)}


def to_document(record: Hit | StoredText) -> Document:
    return Document(id=str(record.id), page_content=record.text or "", metadata=record.payload)
