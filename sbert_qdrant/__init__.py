"""sbert-qdrant: Sentence-BERT encoders and Qdrant text collections.

The public names are listed once, in ``__init__.pyi``: type checkers read them there, and this module reads that
file to import each name on first use (PEP 562), so that ``import sbert_qdrant`` (and a CLI verb or an MCP server
that has not yet touched a model) starts without loading torch, transformers and qdrant-client.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from ._lazy import module_getattr as _module_getattr
from ._lazy import stub_names as _stub_names

_LAZY = _stub_names(__file__)
__getattr__ = _module_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


try:  # pyproject.toml is the one place the version is written; the installed metadata carries it here
    __version__ = _metadata.version("sbert-qdrant")
except _metadata.PackageNotFoundError:  # a source tree on sys.path that pip never installed
    __version__ = "0+unknown"

__all__ = [*_LAZY, "__version__"]
