"""Data files as a Ray Dataset, through Ray Data's own readers (local paths or object-store URIs: s3://, gs://, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...errors import DataFormatError

if TYPE_CHECKING:  # imported where files are read: ``file_format`` serves a run that starts no Ray (``_local``)
    import ray.data

#: CPUs a read task asks of Ray: none, so that a pool of actors holding every CPU cannot starve the read (Ray Data
#: starts the actors first; ray-project/ray#44687). Reading is light next to encoding.
READ_CPUS = 0

#: Formats read here, and the file name endings that name them (a trailing .gz is read too).
READ_FORMATS = ("jsonl", "csv", "parquet")
_ENDINGS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}


def file_format(path: str) -> str:
    """A file's format from its name, or an error naming the file and the fix."""
    name = path.lower().removesuffix(".gz")
    found = next((fmt for ending, fmt in _ENDINGS.items() if name.endswith(ending)), None)
    if found is None:
        raise DataFormatError(
            f"{path}: cannot tell its format from the name; name it .jsonl, .csv or .parquet, or pass --format."
        )
    return found


def read_files(paths: Sequence[str], format: str | None = None) -> ray.data.Dataset:
    """The rows of JSONL, CSV or Parquet files (all of one format: ``format``, else told by their names), read by
    tasks that ask no CPU (``READ_CPUS``): an actor pool may hold every CPU."""
    if isinstance(paths, str) or not paths:
        raise DataFormatError(f"paths={paths!r} must be a non-empty list of files or URIs.")
    formats = {format} if format is not None else {file_format(p) for p in paths}
    if len(formats) != 1 or not formats <= set(READ_FORMATS):
        raise DataFormatError(
            f"{list(paths)} are of formats {sorted(formats)}; read one of {READ_FORMATS} at a time (or pass --format)."
        )
    chosen = formats.pop()
    import ray.data

    if chosen == "jsonl":
        return ray.data.read_json(list(paths), lines=True, file_extensions=None, num_cpus=READ_CPUS)
    if chosen == "csv":
        return ray.data.read_csv(list(paths), file_extensions=None, num_cpus=READ_CPUS)
    # Ray 2.60's Parquet reader (DataSourceV2) lists the files in a task asking 1 CPU whatever num_cpus= says; its
    # first reader asks what it is told.
    context = ray.data.DataContext.get_current()
    v2 = getattr(context, "use_datasource_v2", None)
    if v2 is not None:
        context.use_datasource_v2 = False
    try:
        return ray.data.read_parquet(list(paths), file_extensions=None, num_cpus=READ_CPUS)
    finally:
        if v2 is not None:
            context.use_datasource_v2 = v2
