"""The benchmark scripts run as ``python benchmarks/<script>.py``: their folder comes first on ``sys.path``, so a
script named like a standard-library module (``collections.py``) would stand in for it and break every script."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_no_benchmark_script_shadows_a_standard_library_module() -> None:
    names = {path.stem for path in BENCHMARKS.glob("*.py")} | {
        path.name for path in BENCHMARKS.iterdir() if path.is_dir()
    }
    assert "host" in names  # the folder is found
    assert sorted(names & sys.stdlib_module_names) == []
