"""qdrant-client request and response shapes, shared by the sync and async client stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from qdrant_client import models

from .base import CollectionSpec, Payload, PayloadSelector, ScoredRecord, StoredRecord, VectorSpec

_TO_QDRANT = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclid": models.Distance.EUCLID,
    "manhattan": models.Distance.MANHATTAN,
}


def create_kwargs(spec: CollectionSpec) -> dict[str, Any]:
    """Arguments of ``create_collection`` for a spec."""
    params = models.VectorParams(
        size=spec.vector.size, distance=_TO_QDRANT[spec.vector.distance], on_disk=spec.on_disk or None
    )
    quantization: models.QuantizationConfig | None = None
    if spec.quantization == "int8":
        quantization = models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
        )
    elif spec.quantization == "binary":
        quantization = models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))
    return {
        "collection_name": spec.name,
        "vectors_config": params if spec.vector_name == "" else {spec.vector_name: params},
        "hnsw_config": spec.hnsw,
        "quantization_config": quantization,
        "on_disk_payload": spec.on_disk or None,
        "shard_number": spec.shard_number,
        "replication_factor": spec.replication_factor,
        "metadata": spec.metadata or None,
    }


def vector_specs(info: models.CollectionInfo) -> dict[str, VectorSpec]:
    """The dense vectors of a collection, the unnamed one under ``""``."""
    vectors = info.config.params.vectors
    named = {"": vectors} if isinstance(vectors, models.VectorParams) else dict(vectors or {})
    return {name: VectorSpec(p.size, _distance_name(p.distance)) for name, p in named.items()}


def _distance_name(distance: models.Distance) -> str:
    return str(distance.value).lower()


def points_batch(
    vector_name: str, ids: Sequence[str], vectors: np.ndarray, payloads: Sequence[Payload]
) -> models.Batch:
    rows: list[Any] = vectors.tolist()
    return models.Batch(ids=list(ids), vectors={vector_name: rows} if vector_name else rows, payloads=list(payloads))


def query_requests(
    vector_name: str,
    vectors: np.ndarray,
    limit: int,
    query_filter: models.Filter | None,
    score_threshold: float | None,
    with_payload: PayloadSelector,
) -> list[models.QueryRequest]:
    return [
        models.QueryRequest(
            query=row,
            using=vector_name or None,
            limit=limit,
            filter=query_filter,
            score_threshold=score_threshold,
            with_payload=with_payload,
        )
        for row in vectors.tolist()
    ]


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
