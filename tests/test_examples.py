"""Every script in examples/ runs to the end on the committed samples (the Quora and STS ones cut to their first
lines: every step of the script, on less data) and prints what its docstring promises."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from child import run_child

EXAMPLES = Path(__file__).parent.parent / "examples"
QUORA = EXAMPLES / "data" / "quora_pairs_sample.jsonl"
STS = Path(__file__).parent / "data" / "stsb_dev_sample.tsv"

pytestmark = [pytest.mark.slow, pytest.mark.long]


def _run(script: str, *args: str, cwd: Path | None = None) -> str:
    result = run_child([sys.executable, str(EXAMPLES / script), *args], cwd=cwd or EXAMPLES.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _head(source: Path, folder: Path, lines: int) -> Path:
    """The first ``lines`` lines of a sample (a TSV's header included): the script's every step on less data."""
    head = folder / source.name
    with source.open(encoding="utf-8") as f:
        head.write_text("".join(line for _, line in zip(range(lines), f, strict=False)), encoding="utf-8")
    return head


def test_rag_retrieval_cites_its_sources() -> None:
    out = _run("rag_retrieval.py", "How do I resume an interrupted load?", "--top", "2")
    assert "indexed" in out and "Q: How do I resume an interrupted load?" in out
    assert re.search(r"\[[\w.-]+\.md \d+:\d+, ", out)  # each quote cites its file and character offsets


@pytest.mark.parametrize("engine", ["edge", "memory"])
def test_filtered_search_on_both_engines(engine: str, tmp_path: Path) -> None:
    script = tmp_path / "examples" / "filtered_search.py"  # a copy beside the first lines of its sample
    script.parent.mkdir()
    script.write_bytes((EXAMPLES / script.name).read_bytes())
    (script.parent / "data").mkdir()
    _head(QUORA, script.parent / "data", 400)
    out = _run(str(script), "--engine", engine)
    assert "questions match the filter" in out and " words]  " in out


def test_quora_duplicates_calibrates_and_reports(tmp_path: Path) -> None:
    out = _run("quora_duplicates.py", "--data", str(_head(QUORA, tmp_path, 400)))
    assert "F1" in out and "AP" in out


def test_quora_similar_pairs_prints_labelled_pairs(tmp_path: Path) -> None:
    out = _run("quora_similar_pairs.py", "--top", "3", "--data", str(_head(QUORA, tmp_path, 400)))
    assert "Quora label" in out and "encoded" in out


def test_train_nli_reports_start_and_end(tmp_path: Path) -> None:
    sts = str(_head(STS, tmp_path, 101))
    out = _run("train_nli.py", "--output", str(tmp_path / "nli"), "--max-steps", "4", "--sts", sts)
    assert "start: STS Spearman" in out and "end: STS Spearman" in out
    assert (tmp_path / "nli" / "modules.json").is_file()


def test_train_quora_duplicates_reports_before_and_after(tmp_path: Path) -> None:
    pairs = str(_head(QUORA, tmp_path, 300))
    out = _run("train_quora_duplicates.py", "--output", str(tmp_path / "quora"), "--max-steps", "4", "--pairs", pairs)
    assert "ap:" in out and "->" in out
