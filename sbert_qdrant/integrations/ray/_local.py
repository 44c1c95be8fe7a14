"""A resumed run of local files with nothing missing, told without Ray or a model: the rows' ids read here by the
libraries Ray Data reads those files with (pandas for JSON lines, pyarrow for CSV and Parquet: the same values, so
the same ids), looked up in the collection opened with a stand-in for its encoder (``StoredSize``: the stored
vectors' size, nothing encoded). Anything else (a row missing, a repeated id, a file that is not local or does not
read) is left to the run itself, which says why."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from ...protocols import TextEncoder
from ...records import Key, UpsertResult
from ..mcp.model import StoredSize
from ._encode import Columns
from ._read import file_format
from ._rows import KEYS_BATCH, first_repeat

#: Opens the run's collection with the encoder given (the command's engine and collection options).
Opener = Callable[[TextEncoder], AbstractContextManager[Any]]


def stored_already(
    paths: Sequence[str], format: str | None, columns: Columns, documents: bool, open_collection: Opener
) -> tuple[UpsertResult, str, int] | None:
    """Where every row of the local files ``paths`` is stored: the run's result (every row skipped), the collection's
    name and how many texts (or documents) it holds; else None."""
    keys = _keys(paths, format, columns)
    if keys is None or any(key is None for key in keys) or first_repeat(keys, columns) is not None:
        return None
    kind = "documents" if documents else "texts"
    with open_collection(StoredSize(1)) as probe:  # the size is read, not checked: no search, no write
        sizes = probe.stored_vectors()
    if not sizes:
        return None
    with open_collection(StoredSize(sizes.get("text", next(iter(sizes.values()))))) as coll:
        for start in range(0, len(keys), KEYS_BATCH):
            asked = keys[start : start + KEYS_BATCH]
            if len(coll.stored_ids(asked, kind=kind)) < len(set(asked)):
                return None
        return UpsertResult(keys, 0, len(keys)), coll.collection_name, coll.count(kind=kind)  # type: ignore[arg-type]


def _keys(paths: Sequence[str], format: str | None, columns: Columns) -> list[Key | None] | None:
    """Every row's id as the Ray run reads it, in order; None where a path is not a local file or does not read."""
    name = columns.id or columns.text
    keys: list[Key | None] = []
    for path in paths:
        if "://" in path or not Path(path).is_file():
            return None
        try:
            column = _column(path, format or file_format(path), name)
        except Exception:  # noqa: BLE001 (the run reads it again and names the problem)
            return None
        keys.extend(columns.key({name: column}, row) for row in range(len(column)))
    return keys


def _column(path: str, format: str, name: str) -> np.ndarray:
    if format == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, columns=[name]).column(name).to_numpy()
    if format == "csv":
        import pyarrow.csv

        return pyarrow.csv.read_csv(path).column(name).to_numpy()
    import pandas as pd

    with pd.read_json(path, lines=True, chunksize=10_000) as reader:  # Ray's JSON lines reader: pandas, by chunks
        parts = [chunk[name].to_numpy() for chunk in reader]
    return np.concatenate(parts) if parts else np.array([], dtype=object)
