"""examples/langchain_rag.py runs offline to the end and prints the prompt with its retrieved, cited context."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from child import run_child

pytest.importorskip("langchain_core")

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
@pytest.mark.long
def test_langchain_rag_example_builds_a_cited_prompt() -> None:
    result = run_child(
        [sys.executable, str(ROOT / "examples" / "langchain_rag.py"), "How do I run the tests?", "--k", "2"], cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "paragraphs (" in out and "--- system" in out and "--- human\nHow do I run the tests?" in out
    assert len(re.findall(r"\[[\w.-]+\.md #\d+\]", out)) == 2  # each paragraph cites its page: README or docs/
