"""Issue 64: a user's type checker sees the package, its py.typed and its option types, from the editable install
``make install`` makes (setuptools' compat mode: a .pth, which mypy follows) and from a wheel; our own sources give
no missing-stub error there (an installed package's are not the user's to fix)."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from child import run_child

pytest.importorskip("mypy")

APP = '''"""A user's script."""

from sbert_qdrant import SentenceEncoder, TextCollection

encoder = SentenceEncoder.load()
with TextCollection("faq", encoder=encoder, location="./data") as coll:
    hits = coll.search_text("learning Python", limit=5, mode="hybrid")
    print([h.id for h in hits])
    coll.search_text("learning Python", limt=5)
    coll.search_text("learning Python", mode="hybird")
'''
ROOT = Path(__file__).resolve().parents[1]


def mypy(folder: Path, *options: str) -> str:
    (folder / "app.py").write_text(APP, encoding="utf-8")
    command = [sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary", *options, "app.py"]
    ran = run_child(command, cwd=folder)  # outside the repository: the package is found as installed
    assert ran.returncode == 1, ran.stdout + ran.stderr
    return ran.stdout


def assert_the_two_mistakes_only(said: str) -> None:
    errors = [line for line in said.splitlines() if ": error:" in line]
    assert len(errors) == 2, said
    assert 'app.py:9: error: Unexpected keyword argument "limt"' in errors[0] and 'did you mean "limit"' in errors[0]
    assert "app.py:10: error:" in errors[1] and "Literal['hybird']" in errors[1], said


@pytest.mark.long
def test_mypy_sees_the_package_from_the_editable_install(tmp_path: Path) -> None:
    assert_the_two_mistakes_only(mypy(tmp_path))


@pytest.mark.long
def test_mypy_sees_the_package_from_a_wheel(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.skip(f"no wheel could be built here: {built.stderr.strip().splitlines()[-1:]}")
    (wheel,) = tmp_path.glob("sbert_qdrant-*.whl")
    venv.create(tmp_path / "venv", with_pip=False)
    (site,) = (tmp_path / "venv").glob("lib/python*/site-packages")
    with zipfile.ZipFile(wheel) as archive:  # a pure wheel installs by unpacking (no dependencies: none needed)
        names = archive.namelist()
        archive.extractall(site)
    assert "sbert_qdrant/py.typed" in names and "sbert_qdrant/__init__.pyi" in names
    project = tmp_path / "project"
    project.mkdir()
    assert_the_two_mistakes_only(mypy(project, "--python-executable", str(tmp_path / "venv" / "bin" / "python")))
