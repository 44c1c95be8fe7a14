"""Ray Data ingestion (``pip install "sbert-qdrant[ray]"``): datasets encoded by a pool of actors (GPUs where
asked), written into a collection with the collection's own ids, checks and pipeline; the core never imports ray.

```python
import ray
from sbert_qdrant import TextCollection
from sbert_qdrant.integrations.ray import upsert_dataset

ds = ray.data.read_parquet("s3://bucket/questions/")
with TextCollection("faq", location="./data") as coll:
    result = upsert_dataset(ds, coll, id_column="qid", actors=4, gpus_per_actor=1)
```
- ``upsert_dataset`` / ``upsert_documents_dataset``: the whole run; the same ``UpsertResult`` as ``upsert_texts``.
- ``EncodeTexts`` / ``EncodeDocuments``: the callable classes for ``Dataset.map_batches`` (one model per actor).
- ``QdrantDatasink``: parallel writes from the workers into a Qdrant server (``upsert_dataset(..., url=)``).
- ``read_files``: JSONL/CSV/Parquet files (local paths or object-store URIs) as a Dataset; ``connect``: join a
  cluster or start Ray here.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._cluster import connect
    from ._encode import Columns, EncodeDocuments, EncodeTexts
    from ._read import read_files
    from ._sink import QdrantDatasink
    from ._upsert import upsert_dataset, upsert_documents_dataset

#: Public name -> its module, imported on first use: an encoding actor unpickles ``EncodeTexts`` from ``._encode``
#: and so imports this package, which must not pull in the collection and the Qdrant client it never uses (seconds
#: of every actor's start).
_LAZY = {
    "connect": "._cluster",
    "Columns": "._encode",
    "EncodeDocuments": "._encode",
    "EncodeTexts": "._encode",
    "read_files": "._read",
    "QdrantDatasink": "._sink",
    "upsert_dataset": "._upsert",
    "upsert_documents_dataset": "._upsert",
}

__all__ = [
    "Columns",
    "EncodeDocuments",
    "EncodeTexts",
    "QdrantDatasink",
    "connect",
    "read_files",
    "upsert_dataset",
    "upsert_documents_dataset",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
