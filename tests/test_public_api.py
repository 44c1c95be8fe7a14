"""``__all__`` is the public surface: complete, real and without duplicates, in the package and each subpackage.

Ruff's RUF022 keeps every ``__all__`` sorted; this test guards what ruff cannot see: that each public name an
``__init__.py`` imports is listed, and that each listed name exists.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import subprocess
import sys
import types
from pathlib import Path

import pytest

import sbert_qdrant

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "sbert_qdrant"


def imported_names(init: Path) -> set[str]:
    """Names bound at module level by the import statements of an ``__init__.py`` (functions and classes skipped)."""
    names: set[str] = set()
    pending = list(ast.parse(init.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            names.update(alias.asname or alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return names


def defines_all(init: Path) -> bool:
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
            return True
    return False


PACKAGES = sorted(
    ".".join(init.parent.relative_to(PACKAGE_DIR.parent).parts)
    for init in PACKAGE_DIR.rglob("__init__.py")
    if defines_all(init)
)


def test_the_root_package_defines_all() -> None:
    assert "sbert_qdrant" in PACKAGES


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_complete_and_real(name: str) -> None:
    """Every public name the ``__init__.py`` imports is in ``__all__``; every name in ``__all__`` exists."""
    package = importlib.import_module(name)
    exported = list(package.__all__)
    public = {
        imported
        for imported in imported_names(Path(package.__file__))
        if not imported.startswith("_")
        and imported != "annotations"
        and not isinstance(getattr(package, imported, None), types.ModuleType)
    }
    duplicates = sorted({n for n in exported if exported.count(n) > 1})
    assert not duplicates, f"{name}.__all__ lists these twice: {duplicates}"
    assert not public - set(exported), f"{name}.__all__ misses: {sorted(public - set(exported))}"
    missing = [n for n in exported if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ lists names {name} does not define: {missing}"


def test_version_is_written_once_in_pyproject() -> None:
    """``__version__`` and ``sbert-qdrant --version`` read the installed metadata, which pyproject.toml writes."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((PACKAGE_DIR.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert sbert_qdrant.__version__ == importlib.metadata.version("sbert-qdrant") == project["version"]


def test_importing_the_package_loads_no_heavy_dependency() -> None:
    """``import sbert_qdrant`` (and reading ``__all__``) imports neither torch, transformers nor qdrant-client: the
    public names load on first use, so the CLI and the MCP server start fast."""
    heavy = ("torch", "transformers", "qdrant_client")
    code = f"import sys, sbert_qdrant; sbert_qdrant.__all__; print([m for m in {heavy!r} if m in sys.modules])"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.strip() == "[]", run.stdout


def test_the_stub_lists_every_public_name_of_the_package() -> None:
    """``__init__.pyi`` is the one list: each name it imports resolves at run time, and ``__all__`` is exactly it."""
    stub = imported_names(PACKAGE_DIR / "__init__.pyi")
    assert set(sbert_qdrant.__all__) == stub | {"__version__"}
    assert all(getattr(sbert_qdrant, name) is not None for name in stub)
