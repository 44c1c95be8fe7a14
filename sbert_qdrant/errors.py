"""The exception tree of sbert-qdrant.

```
SbertQdrantError
├── InvalidArgumentError   (also ValueError) a parameter value the library cannot use
│   └── CollectionMismatchError  an existing collection whose vectors differ from the encoder's
├── InvalidInputError      (also ValueError) texts or records that cannot be encoded or stored
│   └── DataFormatError    a data file that cannot be read (JSONL/CSV/TSV/TXT): names the file and line
├── ModelLoadError         a model that cannot be found or read
│   ├── ModelNotFoundError (also FileNotFoundError) nothing found under the given name
│   └── CheckpointError    a training checkpoint that cannot be resumed; in sbert_qdrant.training
├── UnsupportedError       what this engine or collection cannot do (says which one can)
├── PartialWriteError      some batches of an upsert were written and some were not (ids of both)
└── StoreError             a Qdrant engine refused or failed an operation
    ├── CollectionNotFoundError (also LookupError) reading a collection that does not exist
    ├── StoreInUseError    an embedded (Edge) collection folder already opened by another process
    └── StoreUnavailableError   transient faults outlasted the retry budget
```
Every message names the offending value and says how to fix it. ``StoreError`` is an engine fault; a request the
engine cannot serve (``UnsupportedError``) and an upsert that stopped part-way (``PartialWriteError``: the error that
stopped it is its ``__cause__``) are not, so ``except StoreError`` does not catch them.
"""

from __future__ import annotations


class SbertQdrantError(Exception):
    """Base class of every error raised on purpose by sbert-qdrant."""


class InvalidArgumentError(SbertQdrantError, ValueError):
    """A parameter value the library cannot use (device, precision, batch size, ...)."""


class InvalidInputError(SbertQdrantError, ValueError):
    """Texts or records that cannot be encoded or stored."""


class DataFormatError(InvalidInputError):
    """A data file that cannot be read: unknown format, missing, or a row that breaks the rules of ``files``.

    The message names the file, the line where there is one, and the fix.
    """


class ModelLoadError(SbertQdrantError):
    """A model folder that cannot be read: unknown module, missing or corrupt weights."""


class ModelNotFoundError(ModelLoadError, FileNotFoundError):
    """No model was found under the given name; the message lists every place tried."""


class CollectionMismatchError(InvalidArgumentError):
    """An existing collection's vector size, distance or name differs from what this collection needs."""


class StoreError(SbertQdrantError):
    """A Qdrant engine refused or failed an operation."""


class CollectionNotFoundError(StoreError, LookupError):
    """A read (search, get, count) on a collection that does not exist yet."""


class StoreInUseError(StoreError):
    """An embedded Qdrant Edge folder is already open in another process (or another instance here)."""


class StoreUnavailableError(StoreError):
    """Transient faults (connection errors, timeouts, 429, 5xx) lasted past the retry budget."""


class UnsupportedError(SbertQdrantError):
    """What this engine or collection cannot do (e.g. local mode's MMR over hybrid results, writes to a collection
    written by another tool); the message names one that can. Not a ``StoreError``: nothing failed."""


class PartialWriteError(SbertQdrantError):
    """An upsert stopped part-way: ``written_ids`` are stored, ``unwritten_ids`` are not.

    Re-running the same upsert is safe: ids are deterministic, so nothing is duplicated.
    """

    def __init__(self, message: str, written_ids: list[str | int], unwritten_ids: list[str | int]) -> None:
        super().__init__(message)
        self.written_ids = written_ids
        self.unwritten_ids = unwritten_ids
