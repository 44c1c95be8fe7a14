"""qdrant-client request and response shapes, shared by the sync and async client stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from qdrant_client import models

from ..errors import UnsupportedError
from .base import (
    CollectionSpec,
    Diversified,
    ExistingCollection,
    Fused,
    Nearest,
    Rescored,
    ScoredRecord,
    SearchQuery,
    SlotVector,
    Sparse,
    StoredRecord,
    VectorSpec,
)
from .calls import Grouping, StoreQuery, StoreWrite

_TO_QDRANT = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclid": models.Distance.EUCLID,
    "manhattan": models.Distance.MANHATTAN,
}


def create_kwargs(spec: CollectionSpec) -> dict[str, Any]:
    """Arguments of ``create_collection`` for a spec (a lone vector named ``""`` is the collection's unnamed one)."""
    params = {name: _vector_params(spec, name, vector) for name, vector in spec.vectors.items()}
    sparse = {name: models.SparseVectorParams(modifier=models.Modifier.IDF) for name in sorted(spec.sparse)}
    return {
        "collection_name": spec.name,
        "vectors_config": params[""] if list(params) == [""] else params,
        "sparse_vectors_config": sparse or None,
        "hnsw_config": spec.hnsw,
        "quantization_config": _quantization(spec),
        "on_disk_payload": spec.on_disk or None,
        "shard_number": spec.shard_number,
        "replication_factor": spec.replication_factor,
        "metadata": spec.metadata or None,
    }


_BINARY_ENCODINGS = {
    "binary": models.BinaryQuantizationEncoding.ONE_BIT,
    "binary-1.5bit": models.BinaryQuantizationEncoding.ONE_AND_HALF_BITS,
    "binary-2bit": models.BinaryQuantizationEncoding.TWO_BITS,
}


def _quantization(spec: CollectionSpec) -> models.QuantizationConfig | None:
    """The storage preset's quantization (codes in RAM beside the originals); float16 is a datatype instead."""
    if spec.quantization == "int8":
        return models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
        )
    if spec.quantization in _BINARY_ENCODINGS:
        encoding = _BINARY_ENCODINGS[spec.quantization]
        return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True, encoding=encoding))
    return None


def check_local_create(spec: CollectionSpec) -> None:
    """Refuse a storage preset in qdrant-client's local mode, which keeps and searches float32 vectors only: the
    preset would be silently ignored (and its recall measured on what it is not)."""
    if spec.quantization is not None:
        raise UnsupportedError(
            f"qdrant-client's local mode stores float32 vectors only, so it cannot create collection {spec.name!r} "
            f"with quantization={spec.quantization!r}; use Qdrant Edge (location=) or a Qdrant server, or drop "
            "quantization= here."
        )


def _vector_params(spec: CollectionSpec, name: str, vector: VectorSpec) -> models.VectorParams:
    return models.VectorParams(
        size=vector.size,
        distance=_TO_QDRANT[vector.distance],
        on_disk=spec.on_disk or None,
        multivector_config=(
            models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
            if vector.kind == "multivector"
            else None
        ),
        hnsw_config=models.HnswConfigDiff(m=0) if name in spec.unindexed else None,
        datatype=models.Datatype.FLOAT16 if spec.quantization == "float16" else None,
    )


def existing(info: models.CollectionInfo) -> ExistingCollection:
    """A collection's dense vectors (the unnamed one under ``""``), sparse vector names and metadata."""
    vectors = info.config.params.vectors
    named = {"": vectors} if isinstance(vectors, models.VectorParams) else dict(vectors or {})
    return ExistingCollection(
        vectors={
            name: VectorSpec(
                p.size, _distance_name(p.distance), "dense" if p.multivector_config is None else "multivector"
            )
            for name, p in named.items()
        },
        sparse_vectors=frozenset(info.config.params.sparse_vectors or {}),
        metadata=dict(info.config.metadata or {}),
    )


def _distance_name(distance: models.Distance) -> str:
    return str(distance.value).lower()


def points_batch(write: StoreWrite) -> models.Batch:
    """The points as one batch: each slot's vectors by name (the unnamed vector's as a plain list)."""
    rows = write.vectors.rows()
    names = list(rows[0]) if rows else []
    columns: Any = {name: [_slot_value(row[name]) for row in rows] for name in names}
    if names == [""]:
        columns = columns[""]
    return models.Batch(ids=list(write.ids), vectors=columns, payloads=list(write.payloads))


def _slot_value(value: SlotVector) -> Any:
    return _sparse(value) if isinstance(value, tuple) else value


def query_requests(query: StoreQuery) -> list[models.QueryRequest]:
    """One ``QueryRequest`` per search of the query."""
    return [
        models.QueryRequest(
            **_stage(search, query.query_filter),
            limit=query.limit,
            filter=query.query_filter,
            score_threshold=query.request.score_threshold,
            with_payload=query.with_payload,
        )
        for search in query.searches
    ]


def groups_request(query: StoreQuery, grouping: Grouping) -> dict[str, Any]:
    """Arguments of ``query_points_groups`` for the query's one search (the engine groups: a server, and local
    mode alike)."""
    (search,) = query.searches
    stage = _stage(search, query.query_filter)
    stage["search_params"] = stage.pop("params", None)  # QueryRequest's params, as query_points_groups names them
    return {
        **stage,
        "group_by": grouping.by,
        "limit": query.limit,
        "group_size": grouping.size,
        "query_filter": query.query_filter,
        "score_threshold": query.request.score_threshold,
        "with_payload": True,
    }


def grouped(response: models.GroupsResult) -> list[list[ScoredRecord]]:
    return [[ScoredRecord(str(p.id), float(p.score), p.payload) for p in group.hits] for group in response.groups]


def check_local_mode(query: StoreQuery) -> None:
    """Refuse what qdrant-client's local mode would answer wrongly: it runs MMR over the nearest points only,
    ignoring prefetched (sparse or fused) candidates."""
    if any(isinstance(q, Diversified) and q.source is not None for q in query.searches):
        raise UnsupportedError(
            "qdrant-client's local mode cannot diversify (MMR) sparse or hybrid results; use mode='dense' with "
            "diversity=, or Qdrant Edge (location=) or a Qdrant server, which can."
        )


def _stage(query: SearchQuery, query_filter: models.Filter | None) -> dict[str, Any]:
    """``query``/``using``/``prefetch`` arguments for one node of a search tree (the filter at every stage)."""
    if isinstance(query, Nearest):
        return {"query": _slot_value(query.vector), "using": query.using or None, "params": query.params}
    if isinstance(query, Rescored):
        source = _prefetch(query.source, query.candidates, query_filter)
        return {"query": _slot_value(query.vector), "using": query.using or None, "prefetch": [source]}
    if isinstance(query, Fused):
        fusion: Any = (
            models.RrfQuery(rrf=models.Rrf(k=query.rrf_k, weights=list(query.weights) if query.weights else None))
            if query.fusion == "rrf"
            else models.FusionQuery(fusion=models.Fusion.DBSF)
        )
        return {"query": fusion, "prefetch": [_prefetch(s, query.candidates, query_filter) for s in query.sources]}
    mmr = models.Mmr(diversity=query.diversity, candidates_limit=query.candidates)
    return {
        "query": models.NearestQuery(nearest=query.vector, mmr=mmr),
        "using": query.using or None,
        "params": query.params,
        "prefetch": None if query.source is None else _prefetch(query.source, query.candidates, query_filter),
    }


def _prefetch(query: SearchQuery, limit: int, query_filter: models.Filter | None) -> models.Prefetch:
    return models.Prefetch(**_stage(query, query_filter), limit=limit, filter=query_filter)


def _sparse(vector: Sparse) -> models.SparseVector:
    return models.SparseVector(indices=vector[0], values=vector[1])


def vectors_selector(vector_name: str, with_vectors: bool) -> bool | list[str]:
    """``with_vectors`` for retrieve/scroll: just our named vector, or all/none for the unnamed one."""
    return [vector_name] if with_vectors and vector_name else with_vectors


def scored(responses: Sequence[models.QueryResponse]) -> list[list[ScoredRecord]]:
    return [[ScoredRecord(str(p.id), float(p.score), p.payload) for p in r.points] for r in responses]


def stored(records: Sequence[models.Record], vector_name: str) -> list[StoredRecord]:
    return [StoredRecord(str(r.id), r.payload, _vector_of(r.vector, vector_name)) for r in records]


def _vector_of(vector: Any, vector_name: str) -> np.ndarray | None:
    if vector is None:
        return None
    if isinstance(vector, dict):
        vector = vector.get(vector_name)
    return None if vector is None else np.asarray(vector, dtype=np.float32)


def points_selector(ids: Sequence[str] | None, query_filter: models.Filter | None) -> models.PointsSelector:
    if ids is not None:
        return models.PointIdsList(points=list(ids))
    return models.FilterSelector(filter=query_filter or models.Filter())
