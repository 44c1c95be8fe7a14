"""Documents as records of a text collection: ids, metadata filters, the arguments of its calls."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from qdrant_client import models

from ...errors import InvalidArgumentError
from ...records import Hit, StoredText
from ...search_request import SearchOptions, SearchRequest

#: Namespace of the ids derived from a document's content and metadata (when it comes without an id).
DOCUMENT_NAMESPACE = uuid.UUID("0b6f3a5e-8a1c-5d4e-9f2b-7c3d1e6a4b90")
_FILTER_KEYS = frozenset({"must", "should", "must_not", "min_should"})
#: LangChain's names (VectorStore's and langchain-qdrant's) for search options, by the option each means.
LANGCHAIN_NAMES = {"k": "limit", "filter": "query_filter", "fetch_k": "candidates", "retrieval_mode": "mode"}


class LangChainSearchOptions(SearchOptions, total=False):
    """The search options, also under langchain-qdrant's name ``retrieval_mode`` (a ``RetrievalMode`` or its
    value), and ``filter`` as a dict of field -> value."""

    retrieval_mode: Any
    filter: Any


def search_request(*layers: Mapping[str, Any]) -> SearchRequest:
    """Search arguments in LangChain's names or ours (later layers override earlier ones) as one checked
    SearchRequest, its errors naming each option as the caller did."""
    options: dict[str, Any] = {}
    names: dict[str, str] = {}
    for layer in layers:
        seen: dict[str, str] = {}
        for key, value in layer.items():
            if not is_search_option(key):
                ours = ", ".join(sorted(SearchRequest.__dataclass_fields__))
                raise InvalidArgumentError(
                    f"{key}= is not a search option; use LangChain's {', '.join(LANGCHAIN_NAMES)} or ours: {ours}."
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
    return SearchRequest.of(options, names=names)


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
