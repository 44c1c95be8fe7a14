"""The map in the repo: which layer each module belongs to, and which layers it may import.

docs/architecture.md ("Layers") draws the package as layers through which data flows down, never up. This test
reads every module with ``ast`` (imports inside functions and ``if TYPE_CHECKING:`` blocks included) and fails on an
import against the rules below, and on a module the table does not place, so the table stays a complete map.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

PACKAGE = "sbert_qdrant"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE

# Module (or package, covering its submodules) -> layer. The root key covers ``__init__.py`` only; the most
# specific key wins, then the ``_*`` pattern for private top-level modules.
LAYER_OF: dict[str, str] = {
    "sbert_qdrant.errors": "base",  # one exception tree
    "sbert_qdrant.settings": "base",  # pydantic settings from env
    "sbert_qdrant.files": "base",  # reading input files
    "sbert_qdrant.types": "base",  # the Literal types of the public API (OnConflict, SearchMode, ...)
    "sbert_qdrant.protocols": "base",  # what a collection needs of an encoder (TextEncoder, DocumentEncoder)
    "sbert_qdrant._version": "base",
    "sbert_qdrant._lazy": "base",  # public names imported on first use (the package's and the encoder's)
    "sbert_qdrant._allocation": "base",  # the cycle collector paused around bulk work (records and the store)
    # a search's options as one checked value (SearchRequest): what the collection plans from, and what a store's
    # query carries whole to the engine
    "sbert_qdrant.search_request": "base",
    "sbert_qdrant.encoder": "encoder",  # SentenceEncoder, CrossEncoder, sparse weights; knows nothing of Qdrant
    "sbert_qdrant.store": "store",  # engines behind one protocol; knows vectors and payloads, never text
    "sbert_qdrant.records": "records",  # ids, payload keys, input checks
    "sbert_qdrant.layout": "records",  # where a point keeps what: named vector slots and payload fields
    "sbert_qdrant.documents": "records",  # chunking of long documents
    "sbert_qdrant.dedup": "records",  # duplicate mining and threshold calibration over vectors
    "sbert_qdrant.collection": "collection",  # TextCollection
    "sbert_qdrant.aio": "collection",  # AsyncTextCollection
    "sbert_qdrant._collection": "collection",  # the collection wing: the machinery behind the two doors
    "sbert_qdrant._*": "collection",  # any other private top-level module
    "sbert_qdrant.training": "training",  # data readers, objectives, trainer, evaluators
    "sbert_qdrant.adaptation": "root",  # adaptation to a corpus: a collection and the training package joined
    "sbert_qdrant.integrations": "integrations",  # LangChain / LlamaIndex adapters
    "sbert_qdrant.testing": "testing",  # test support: tiny random encoders, fault-injecting clients
    "sbert_qdrant.cli": "cli",  # the sbert-qdrant command
    "sbert_qdrant.__main__": "cli",
    "sbert_qdrant": "root",  # the public surface
}

ALL_LAYERS = {
    "base", "encoder", "store", "records", "collection", "training", "testing", "integrations", "cli", "root"
}  # fmt: skip

# Layer -> the layers its modules may import (its own included).
MAY_IMPORT: dict[str, set[str]] = {
    "base": {"base"},
    "encoder": {"base", "encoder"},
    "store": {"base", "store"},
    "records": {"base", "records"},
    "collection": {"base", "encoder", "store", "records", "collection"},
    "training": {"base", "encoder", "records", "training"},  # never the store nor a collection
    "testing": {"base", "encoder", "store", "testing"},  # imported by tests and benchmarks only
    # thin, on the public API only: through the collection, never the store (docs/architecture.md)
    "integrations": ALL_LAYERS - {"cli", "store"},
    "cli": ALL_LAYERS,
    "root": ALL_LAYERS - {"cli", "integrations", "testing"},  # the core never imports the integrations
}

# Third-party top-level packages -> the only layers that may import them.
RESTRICTED_THIRD_PARTY: dict[str, set[str]] = {
    "langchain_core": {"integrations"},
    "llama_index": {"integrations"},
    "mcp": {"integrations"},
    "ray": {"integrations"},
    "tests": set(),
    "conftest": set(),
}


def layer_of(module: str) -> str | None:
    if module in LAYER_OF:
        return LAYER_OF[module]
    parents = [key for key in LAYER_OF if key != PACKAGE and module.startswith(key + ".")]
    if parents:
        return LAYER_OF[max(parents, key=len)]
    patterns = [key for key in LAYER_OF if "*" in key and fnmatchcase(module, key)]
    return LAYER_OF[patterns[0]] if patterns else None


def package_modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = package_modules()


def imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for each module imported anywhere in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            # ``from pkg import name`` imports the submodule pkg.name when there is one, else pkg itself.
            targets = {f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names}
            for target in sorted(targets):
                yield node.lineno, target


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE_DIR.parent)}:{line}: {module}"


def test_every_module_has_a_layer() -> None:
    """A new module must be placed in LAYER_OF, so the map stays complete."""
    assert f"{PACKAGE}.collection" in MODULES, f"no modules found under {PACKAGE_DIR}"
    unplaced = [module for module in MODULES if layer_of(module) is None]
    assert not unplaced, f"add these modules to LAYER_OF in {Path(__file__).name}: {unplaced}"


def test_layers_import_only_downwards() -> None:
    """Each layer imports only the layers MAY_IMPORT allows it (see docs/architecture.md, "Layers")."""
    violations = []
    for module, path in MODULES.items():
        layer = layer_of(module)
        if layer is None:
            continue  # reported by test_every_module_has_a_layer
        for line, target in imports(module, path):
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            target_layer = layer_of(target)
            if target_layer not in MAY_IMPORT[layer]:
                allowed = ", ".join(sorted(MAY_IMPORT[layer]))
                violations.append(
                    f"{where(module, line)} ({layer}) imports {target} ({target_layer}); {layer} may import: {allowed}"
                )
    assert not violations, "imports against the layer rules:\n" + "\n".join(violations)


def test_restricted_third_party_imports() -> None:
    """Optional frameworks are imported only by the integrations; the package never imports the tests."""
    violations = []
    for module, path in MODULES.items():
        for line, target in imports(module, path):
            allowed = RESTRICTED_THIRD_PARTY.get(target.partition(".")[0])
            if allowed is not None and layer_of(module) not in allowed:
                violations.append(f"{where(module, line)} imports {target}; only allowed in: {sorted(allowed)}")
    assert not violations, "\n".join(violations)


def import_cycles() -> list[list[str]]:
    """Groups of package modules that import each other, directly or round a loop (Tarjan's strongly connected
    components over every import, those inside functions included: a cycle Python tolerates is still a knot)."""
    graph = {
        module: sorted({target for _, target in imports(module, path) if target in MODULES and target != module})
        for module, path in MODULES.items()
    }
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []
    for root in graph:
        if root in order:
            continue
        # Iterative, so that a long import chain cannot hit the recursion limit.
        work = [(root, iter(graph[root]))]
        order[root] = low[root] = len(order)
        stack.append(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in order:
                    order[successor] = low[successor] = len(order)
                    stack.append(successor)
                    work.append((successor, iter(graph[successor])))
                    break
                if successor in stack:
                    low[node] = min(low[node], order[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_no_import_cycles() -> None:
    """No two modules of the package import each other, even round a loop or from inside a function."""
    cycles = import_cycles()
    assert not cycles, "import cycles (move what both sides need into a module of its own):\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_no_private_name_imported_from_another_module() -> None:
    """A ``_name`` stays in its module: what two modules share is public in a module both import (a private
    module, ``from . import _requests``, may be imported whole)."""
    taken = []
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            if source != PACKAGE and not source.startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{source}.{alias.name}" not in MODULES:
                    taken.append(f"{where(module, node.lineno)} imports {alias.name} from {source}")
    assert not taken, "private names imported across modules (make them public where both can import):\n" + "\n".join(
        taken
    )


def longest_chain(folder: str) -> list[str]:
    """The longest chain of imports among the rooms of one folder of the package (its "floors"): a room is a module
    of the folder or a whole subfolder."""

    def room(module: str) -> str:
        return ".".join(module.split(".")[: folder.count(".") + 2])

    inside = {m for m in MODULES if m.startswith(folder + ".")}
    graph: dict[str, set[str]] = {room(m): set() for m in inside}
    for module in inside:
        graph[room(module)] |= {room(t) for _, t in imports(module, MODULES[module]) if t in inside}
    for name, below in graph.items():
        below.discard(name)
    best: dict[str, list[str]] = {}

    def chain(name: str) -> list[str]:  # no cycles (test_no_import_cycles): the recursion ends
        if name not in best:
            best[name] = [name, *max((chain(t) for t in sorted(graph[name])), key=len, default=[])]
        return best[name]

    return max((chain(name) for name in sorted(graph)), key=len, default=[])


def test_the_encoder_stays_shallow() -> None:
    """No chain of imports inside ``encoder/`` is longer than 6 modules: its parts stand beside one another (the
    cross-encoder beside the bi-encoder, both on one runtime setup), not on one another."""
    chain = longest_chain(f"{PACKAGE}.encoder")
    assert len(chain) <= 6, "encoder/ import chain too long:\n" + " -> ".join(chain)


def calls(path: Path, attribute: str) -> Iterator[int]:
    """The lines of a file that call a method named ``attribute`` with no arguments."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        called = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attribute
        if called and not node.args and not node.keywords:  # type: ignore[attr-defined]  # a Call: it has them
            yield node.lineno


def test_a_search_request_travels_whole() -> None:
    """The command line, the MCP server and the adapters pass the ``SearchRequest`` they built (``request=``),
    never taken apart into keyword options (``.options()``) for the collection to rebuild and check again."""
    unpacked = [
        where(module, line)
        for module, path in MODULES.items()
        if layer_of(module) in ("cli", "integrations")
        for line in calls(path, "options")
    ]
    assert not unpacked, "a request taken apart with .options():\n" + "\n".join(unpacked)


def test_the_store_seam_takes_one_value_per_call() -> None:
    """Each search, write and scan of the store protocol takes the collection's name and one value of
    ``store/calls.py`` (a query, its grouping, a write, a scan): an option is a field there, not an argument
    spelled again in every engine."""
    seam = MODULES[f"{PACKAGE}.store.protocol_async"]
    values = {
        node.name
        for node in ast.parse(MODULES[f"{PACKAGE}.store.calls"].read_text(encoding="utf-8")).body
        if isinstance(node, ast.ClassDef)
    }
    spelled = []
    for node in ast.walk(ast.parse(seam.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
            "query", "query_groups", "upsert", "scroll"
        ):  # fmt: skip
            rest = node.args.args[2:]
            if not rest or any(not (a.annotation and ast.unparse(a.annotation) in values) for a in rest):
                spelled.append(f"{node.name}({', '.join(ast.unparse(a) for a in node.args.args[1:])})")
    assert not spelled, "store calls spelling their options as arguments:\n" + "\n".join(spelled)


def test_a_store_query_is_built_in_one_place() -> None:
    """Every search path calls the engine through ``SearchPlan.store_query``, the one place a ``StoreQuery`` is
    made (the engines derive theirs with ``dataclasses.replace``): the request travels with it whole, so that a
    search option the engine applies is a field of the request plus the engines reading it, no path touched."""
    built = [
        where(module, node.lineno)
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "StoreQuery"
    ]
    assert len(built) == 1 and built[0].endswith(f"{PACKAGE}._collection.search"), (
        "StoreQuery built outside SearchPlan.store_query:\n" + "\n".join(built)
    )
