"""The exception tree: the classes are where the tree in ``sbert_qdrant.errors`` (and docs/errors.md) draws them."""

from __future__ import annotations

import builtins
import re

import pytest

import sbert_qdrant
from sbert_qdrant import errors, training

BRANCH = re.compile(r"^(?P<indent>(?:│   |    )*)(?P<branch>├── |└── )?(?P<name>\w+)(?:.*?\(also (?P<also>\w+)\))?")


def documented_tree() -> dict[str, tuple[str | None, str | None]]:
    """Each class of the docstring's tree: (the class it hangs under, the builtin it also is)."""
    doc = errors.__doc__ or ""
    lines = doc.split("```")[1].strip("\n").splitlines()
    tree: dict[str, tuple[str | None, str | None]] = {}
    path: list[str] = []
    for line in lines:
        found = BRANCH.match(line)
        assert found, line
        depth = len(found["indent"]) // 4 + (found["branch"] is not None)
        del path[depth:]
        tree[found["name"]] = (path[-1] if path else None, found["also"])
        path.append(found["name"])
    return tree


def error_class(name: str) -> type[Exception]:
    return getattr(errors, name, None) or getattr(training, name)


def test_the_documented_tree_is_the_real_one() -> None:
    tree = documented_tree()
    defined = {name for name, value in vars(errors).items() if isinstance(value, type)}
    assert set(tree) == defined | {"CheckpointError"}
    for name, (parent, also) in tree.items():
        cls = error_class(name)
        assert cls.__bases__[0].__name__ == (parent or "Exception"), name
        if also is not None:
            assert issubclass(cls, getattr(builtins, also)), name
        assert getattr(sbert_qdrant, name, cls) is cls  # the root package re-exports the same class


@pytest.mark.parametrize("name", ["UnsupportedError", "PartialWriteError"])
def test_what_is_not_an_engine_fault_is_not_a_store_error(name: str) -> None:
    """``except StoreError`` is for engine faults: a request no engine here can serve and an upsert that stopped
    part-way are raised past it."""
    cls = error_class(name)
    assert issubclass(cls, errors.SbertQdrantError) and not issubclass(cls, errors.StoreError)
