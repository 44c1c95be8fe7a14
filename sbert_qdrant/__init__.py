"""sbert-qdrant: Sentence-BERT encoders and Qdrant text collections.

The public names are listed once, in ``__init__.pyi``: type checkers read them there, and this module reads that
file to import each name on first use (PEP 562), so that ``import sbert_qdrant`` (and a CLI verb or an MCP server
that has not yet touched a model) starts without loading torch, transformers and qdrant-client.
"""

from __future__ import annotations

import ast as _ast
import importlib as _importlib
from importlib import metadata as _metadata
from pathlib import Path as _Path


def _public_names() -> dict[str, str]:
    """Public name -> the module it comes from (relative), as ``__init__.pyi`` imports it."""
    stub = _ast.parse(_Path(__file__).with_name("__init__.pyi").read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: "." * node.level + (node.module or "")
        for node in stub.body
        if isinstance(node, _ast.ImportFrom)
        for alias in node.names
    }


_LAZY = _public_names()


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


try:  # pyproject.toml is the one place the version is written; the installed metadata carries it here
    __version__ = _metadata.version("sbert-qdrant")
except _metadata.PackageNotFoundError:  # a source tree on sys.path that pip never installed
    __version__ = "0+unknown"

__all__ = [*_LAZY, "__version__"]
