"""The exception tree of sbert-qdrant.

```
SbertQdrantError
├── InvalidArgumentError   (also ValueError) a parameter value the library cannot use
├── InvalidInputError      (also ValueError) texts or records that cannot be encoded or stored
└── ModelLoadError         a model that cannot be found or read
    └── ModelNotFoundError (also FileNotFoundError) nothing found under the given name
```
Every message names the offending value and says how to fix it.
"""

from __future__ import annotations


class SbertQdrantError(Exception):
    """Base class of every error raised on purpose by sbert-qdrant."""


class InvalidArgumentError(SbertQdrantError, ValueError):
    """A parameter value the library cannot use (device, precision, batch size, ...)."""


class InvalidInputError(SbertQdrantError, ValueError):
    """Texts or records that cannot be encoded or stored."""


class ModelLoadError(SbertQdrantError):
    """A model folder that cannot be read: unknown module, missing or corrupt weights."""


class ModelNotFoundError(ModelLoadError, FileNotFoundError):
    """No model was found under the given name; the message lists every place tried."""
