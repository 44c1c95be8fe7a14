"""The embedded store: Qdrant Edge (the real Qdrant engine in-process), one shard folder per collection.

Layout under ``location``: ``<collection>/shard/`` (the engine's files) and ``<collection>/metadata.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe
from qdrant_client import models

from .._allocation import gc_paused
from ..errors import InvalidArgumentError, StoreError, StoreInUseError
from .base import (
    CollectionSpec,
    ExistingCollection,
    Fused,
    Nearest,
    Payload,
    PointVectors,
    Rescored,
    ScoredRecord,
    SearchQuery,
    SlotVector,
    StoredRecord,
    VectorSpec,
)
from .calls import Grouping, Scan, StoreQuery, StoreWrite
from .edge_filters import to_edge_filter
from .edge_folder import CONFIG_FILE, edge_collection_names
from .grouping import first_fetch, groups_found, wider
from .protocol_sync import VectorStore

_DISTANCES = {
    "cosine": qe.Distance.Cosine,
    "dot": qe.Distance.Dot,
    "euclid": qe.Distance.Euclid,
    "manhattan": qe.Distance.Manhattan,
}
# Qdrant's own defaults, for settings an HnswConfigDiff leaves out.
_HNSW_DEFAULTS = {"m": 16, "ef_construct": 100, "full_scan_threshold": 10_000}


class _OpenShard:
    """One EdgeShard shared by every store of this process that opens the folder (the engine locks it)."""

    def __init__(self, shard: qe.EdgeShard) -> None:
        self.shard = shard
        self.users = 0
        self.write_lock = threading.Lock()


_open_shards: dict[Path, _OpenShard] = {}
_registry_lock = threading.Lock()


def _engine_call(what: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # the engine raises plain Exception with a message
        raise StoreError(f"{what} failed in Qdrant Edge: {exc}") from exc


class EdgeStore(VectorStore):
    """Collections as Qdrant Edge shards under one folder (no aliases; it indexes when ``optimize`` asks, never in
    the background: the protocol's defaults say so)."""

    engine = "Qdrant Edge"
    upsert_batch = 4096  # in-process: no request to bound; 4,096 texts encode ~8 % faster than 1,024

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.location = Path(location).expanduser().resolve()
        if self.location.exists() and not self.location.is_dir():
            raise InvalidArgumentError(f"location={str(location)!r} is a file; pass a folder for Qdrant Edge data.")
        self._mine: dict[str, _OpenShard] = {}

    def _folder(self, name: str) -> Path:
        """The collection's folder: its name as it is (every name Qdrant takes is a folder name on Linux and macOS,
        as in qdrant-client's local mode), within the 255 bytes a folder's name may have."""
        if len(os.fsencode(name)) > 255:
            raise InvalidArgumentError(
                f"collection name {name!r} is {len(os.fsencode(name))} bytes long as a folder name, and Qdrant Edge "
                "keeps a collection in a folder of its name (at most 255 bytes): use a shorter name."
            )
        return self.location / name

    def _shard(self, name: str) -> _OpenShard:
        opened = self._mine.get(name)
        if opened is not None:
            return opened
        path = self._folder(name) / "shard"
        with _registry_lock:
            opened = self._mine.get(name)  # another thread of this store may have opened it meanwhile
            if opened is not None:
                return opened
            opened = _open_shards.get(path)
            if opened is None:
                try:
                    opened = _OpenShard(qe.EdgeShard.load(str(path)))
                except Exception as exc:
                    if "WouldBlock" in str(exc):
                        raise StoreInUseError(
                            f"the Qdrant Edge collection at {path.parent} is open in another process; close it "
                            "there (TextCollection.close()) or give this one another location."
                        ) from exc
                    raise StoreError(f"cannot open the Qdrant Edge collection at {path.parent}: {exc}") from exc
                _open_shards[path] = opened
            opened.users += 1
            self._mine[name] = opened
        return opened

    def describe(self, name: str) -> ExistingCollection | None:
        config_file = self._folder(name) / CONFIG_FILE
        if not config_file.is_file():
            return None
        config = json.loads(config_file.read_text(encoding="utf-8"))
        return ExistingCollection(
            vectors={key: _vector_spec(v) for key, v in config.get("vectors", {}).items()},
            sparse_vectors=frozenset(config.get("sparse_vectors") or {}),
            metadata=self.metadata(name),
        )

    def names(self) -> list[str]:
        return edge_collection_names(self.location)

    def create(self, spec: CollectionSpec) -> None:
        folder = self._folder(spec.name)
        hnsw = None
        if spec.hnsw is not None:
            given = spec.hnsw.model_dump(exclude_none=True)
            hnsw = qe.HnswIndexConfig(**{k: given.get(k, v) for k, v in _HNSW_DEFAULTS.items()})
        config = qe.EdgeConfig(
            vectors={name: _vector_params(spec, name, vector) for name, vector in spec.vectors.items()},
            sparse_vectors={name: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf) for name in spec.sparse} or None,
            hnsw_config=hnsw,
            quantization_config=_quantization(spec),
        )
        folder.mkdir(parents=True, exist_ok=True)
        self._write_metadata(spec.name, spec.metadata)
        _engine_call(f"creating collection {spec.name!r}", qe.EdgeShard.create, str(folder / "shard"), config).close()

    def drop(self, name: str) -> None:
        self._release(name)
        with _registry_lock:
            if (self._folder(name) / "shard") in _open_shards:
                raise StoreInUseError(f"collection {name!r} is still open in another TextCollection; close it first.")
        shutil.rmtree(self._folder(name), ignore_errors=True)

    def metadata(self, name: str) -> Payload:
        path = self._folder(name) / "metadata.json"
        return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {}

    def update_metadata(self, name: str, values: Mapping[str, Any]) -> None:
        self._write_metadata(name, {**self.metadata(name), **values})

    def _write_metadata(self, name: str, values: Mapping[str, Any]) -> None:
        path = self._folder(name) / "metadata.json"
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(dict(values), f, ensure_ascii=False, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def upsert(self, name: str, write: StoreWrite) -> None:
        opened = self._shard(name)
        with gc_paused():
            rows = _edge_rows(write.vectors, len(write.ids))
            points = [
                qe.Point(id=i, vector=row, payload=p) for i, row, p in zip(write.ids, rows, write.payloads, strict=True)
            ]
            with opened.write_lock:
                _engine_call(f"upsert into {name!r}", opened.shard.update, qe.UpdateOperation.upsert_points(points))

    def existing_ids(self, name: str, ids: Sequence[str]) -> set[str]:
        found = _engine_call(f"retrieve from {name!r}", self._shard(name).shard.retrieve, list(ids), False, False)
        return {str(r.id) for r in found}

    def query(self, name: str, query: StoreQuery) -> list[list[ScoredRecord]]:
        edge_filter = to_edge_filter(query.query_filter)
        requests = [
            qe.QueryRequest(
                limit=query.limit,
                **_stage(search, edge_filter),
                filter=edge_filter,
                score_threshold=query.request.score_threshold,
                with_payload=query.with_payload,
            )
            for search in query.searches
        ]
        results = _engine_call(
            f"query of {name!r}", self._shard(name).shard.query_batch, qe.QueryBatchRequest(requests)
        )
        return [[ScoredRecord(str(p.id), float(p.score), p.payload) for p in points] for points in results]

    def query_groups(self, name: str, query: StoreQuery, grouping: Grouping) -> list[list[ScoredRecord]]:
        """Qdrant Edge has no grouping: the best points are fetched and grouped here (``grouping.first_fetch``)."""
        fetch = first_fetch(query, grouping)
        while (groups := groups_found(self.query(name, fetch)[0], fetch, query, grouping)) is None:
            fetch = wider(fetch)
        return groups

    def retrieve(self, name: str, vector_name: str, ids: Sequence[str], with_vectors: bool) -> list[StoredRecord]:
        found = _engine_call(f"retrieve from {name!r}", self._shard(name).shard.retrieve, list(ids), True, with_vectors)
        return [_stored(r, vector_name) for r in found]

    def scroll(self, name: str, scan: Scan) -> Iterator[list[StoredRecord]]:
        shard = self._shard(name).shard
        edge_filter = to_edge_filter(scan.query_filter)
        start: Any = scan.offset
        while True:
            request = qe.ScrollRequest(
                offset=start,
                limit=scan.batch_size,
                filter=edge_filter,
                with_payload=True,
                with_vector=scan.with_vectors,
            )
            records, start = _engine_call(f"scroll of {name!r}", shard.scroll, request)
            if records:
                yield [_stored(r, scan.vector_name) for r in records]
            if start is None:
                return

    def delete(self, name: str, ids: Sequence[str] | None, query_filter: models.Filter | None, wait: bool) -> None:
        if ids is not None:
            operation = qe.UpdateOperation.delete_points(list(ids))
        else:
            operation = qe.UpdateOperation.delete_points_by_filter(to_edge_filter(query_filter) or qe.Filter())
        opened = self._shard(name)
        with opened.write_lock:
            _engine_call(f"delete from {name!r}", opened.shard.update, operation)

    def count(self, name: str, query_filter: models.Filter | None) -> int:
        request = qe.CountRequest(exact=True, filter=to_edge_filter(query_filter))
        return int(_engine_call(f"count of {name!r}", self._shard(name).shard.count, request))

    def create_payload_index(self, name: str, field_name: str, schema: models.PayloadSchemaType) -> None:
        edge_schema = getattr(qe.PayloadSchemaType, models.PayloadSchemaType(schema).name.capitalize())
        opened = self._shard(name)
        with opened.write_lock:
            operation = qe.UpdateOperation.create_field_index(field_name, edge_schema)
            _engine_call(f"create_payload_index({field_name!r}) on {name!r}", opened.shard.update, operation)

    def optimize(self, name: str) -> None:
        """Merge segments and build the HNSW index now (the engine does not run optimizers in the background)."""
        opened = self._shard(name)
        with opened.write_lock:
            _engine_call(f"optimize of {name!r}", opened.shard.optimize)

    def _release(self, name: str) -> None:
        opened = self._mine.pop(name, None)
        if opened is None:
            return
        with _registry_lock:
            opened.users -= 1
            if opened.users == 0:
                path = next(p for p, o in _open_shards.items() if o is opened)
                del _open_shards[path]
                opened.shard.flush()
                opened.shard.close()

    def close(self) -> None:
        for name in list(self._mine):
            self._release(name)


def _stage(query: SearchQuery, edge_filter: qe.Filter | None) -> dict[str, Any]:
    """``query``/``prefetches`` arguments for one node of a search tree (the filter at every stage)."""
    if isinstance(query, Nearest):
        return {
            "query": qe.Query.Nearest(_edge_vector(query.vector), using=query.using),
            "params": _params(query.params),
        }
    if isinstance(query, Rescored):
        source = _prefetch(query.source, query.candidates, edge_filter)
        return {"query": qe.Query.Nearest(_edge_vector(query.vector), using=query.using), "prefetches": [source]}
    if isinstance(query, Fused):
        weights = list(query.weights) if query.weights else None
        fusion = qe.Fusion.Rrf(k=query.rrf_k, weights=weights) if query.fusion == "rrf" else qe.Fusion.Dbsf()
        return {"query": fusion, "prefetches": [_prefetch(s, query.candidates, edge_filter) for s in query.sources]}
    # Qdrant Edge's MMR takes lambda, the weight of relevance: 1 - diversity
    mmr = qe.Mmr(query.vector, 1.0 - query.diversity, query.candidates, using=query.using)
    sources = [] if query.source is None else [_prefetch(query.source, query.candidates, edge_filter)]
    return {"query": mmr, "prefetches": sources, "params": _params(query.params)}


def _edge_rows(vectors: PointVectors, count: int) -> list[dict[str, Any]]:
    """Each of ``count`` points' vectors as Edge takes them: a dense row as a memoryview of its float32 matrix (Edge
    reads it as it reads a list, without a Python float per value first), term weights as ``SparseVector``."""
    columns: dict[str, Any] = {
        name: map(memoryview, np.ascontiguousarray(matrix, dtype=np.float32)) for name, matrix in vectors.dense.items()
    }
    columns |= {name: map(_edge_vector, weights) for name, weights in vectors.sparse.items()}
    columns |= {name: (m.tolist() for m in matrices) for name, matrices in vectors.multivector.items()}
    parts: list[Any] = [*vectors.dense.values(), *vectors.sparse.values(), *vectors.multivector.values()]
    sizes = {len(part) for part in parts}
    if sizes - {count}:
        raise ValueError(f"slots hold vectors of {sorted(sizes)} points for {count} point ids")
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _edge_vector(value: SlotVector) -> Any:
    return qe.SparseVector(*value) if isinstance(value, tuple) else value


_BINARY_ENCODINGS = {
    "binary": qe.BinaryQuantizationEncoding.OneBit,
    "binary-1.5bit": qe.BinaryQuantizationEncoding.OneAndHalfBits,
    "binary-2bit": qe.BinaryQuantizationEncoding.TwoBits,
}


def _quantization(spec: CollectionSpec) -> Any:
    """The storage preset's quantization (codes in RAM beside the originals); float16 is a datatype instead."""
    if spec.quantization == "int8":
        return qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, always_ram=True)
    if spec.quantization in _BINARY_ENCODINGS:
        return qe.BinaryQuantizationConfig(always_ram=True, encoding=_BINARY_ENCODINGS[spec.quantization])
    return None


def _vector_params(spec: CollectionSpec, name: str, vector: VectorSpec) -> qe.EdgeVectorParams:
    return qe.EdgeVectorParams(
        size=vector.size,
        distance=_DISTANCES[vector.distance],
        memory=qe.Memory.Cold if spec.on_disk else None,
        multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim)
        if vector.kind == "multivector"
        else None,
        hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000)
        if name in spec.unindexed
        else None,
        datatype=qe.VectorStorageDatatype.Float16 if spec.quantization == "float16" else None,
    )


def _vector_spec(config: Mapping[str, Any]) -> VectorSpec:
    """A vector's spec from the shard's config file."""
    multi = config.get("multivector_config") or config.get("multivector")
    return VectorSpec(int(config["size"]), str(config["distance"]).lower(), "dense" if multi is None else "multivector")


def _params(params: models.SearchParams | None) -> qe.SearchParams | None:
    """A dense search's HNSW, exact and quantization settings, for Qdrant Edge."""
    if params is None:
        return None
    quantization = params.quantization
    return qe.SearchParams(
        hnsw_ef=params.hnsw_ef,
        exact=bool(params.exact),
        quantization=None
        if quantization is None
        else qe.QuantizationSearchParams(
            ignore=bool(quantization.ignore), rescore=quantization.rescore, oversampling=quantization.oversampling
        ),
    )


def _prefetch(query: SearchQuery, limit: int, edge_filter: qe.Filter | None) -> qe.Prefetch:
    return qe.Prefetch(limit=limit, **_stage(query, edge_filter), filter=edge_filter)


def _stored(record: Any, vector_name: str) -> StoredRecord:
    vector = record.vector
    if isinstance(vector, dict):
        vector = vector.get(vector_name)
    return StoredRecord(
        str(record.id), record.payload, None if vector is None else np.asarray(vector, dtype=np.float32)
    )
