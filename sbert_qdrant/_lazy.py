"""Public names imported on first use (PEP 562): a package lists them once, as the imports of its ``__init__.pyi``
(which type checkers read), and its ``__init__.py`` imports each from its module when it is first asked for, so that
importing the package loads none of them (torch, transformers and qdrant-client among what they pull in)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def stub_names(init_file: str) -> dict[str, str]:
    """Public name -> the module it comes from (relative), as the ``__init__.pyi`` beside ``init_file`` imports it."""
    stub = ast.parse(Path(init_file).with_name("__init__.pyi").read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: "." * node.level + (node.module or "")
        for node in stub.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def module_getattr(package: str, names: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], object]:
    """The package's ``__getattr__``: a public name imported from its module, then kept in ``namespace``."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__
