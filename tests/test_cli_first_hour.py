"""A new user's first hour on the command line (issue 45): README's lines run as written, search says what it
found and how it scored, one progress bar with a total, and every refusal in the command line's words."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from child import run_child
from test_docs import ROOT, parse

from sbert_qdrant.cli import main

ROWS = [
    {"qid": "a", "question": "How do I learn Python quickly?", "lang": "en", "year": 2019},
    {"qid": "b", "question": "What is the best way to learn Python fast?", "lang": "en", "year": 2021},
    {"qid": "c", "question": "Pourquoi le ciel est-il bleu ?", "lang": "fr", "year": 2023},
]
#: README lines not run here, and why.
NOT_RUN = {"demo": "indexes ~4,000 questions: tests/test_cli_collections.py runs it (marked long)",
           "mcp": "a server reading stdin: tests/test_mcp.py runs it"}  # fmt: skip


def readme_lines() -> list[list[str]]:
    blocks = [b for b in parse(ROOT / "README.md")[0] if b.language == "bash"]
    lines = [shlex.split(line, comments=True) for b in blocks for line in b.code.splitlines()]
    return [argv[1:] for argv in lines if argv and argv[0] == "sbert-qdrant"]


def test_readme_cli_lines_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # a fresh clone's folder, with the data it ships
    monkeypatch.chdir(tmp_path)
    ran = []
    for argv in readme_lines():
        if argv[0] in NOT_RUN:
            continue
        assert main([*argv, "--no-progress"] if argv[0] != "encode" else argv) == 0, (argv, capsys.readouterr().err)
        ran.append(argv[0])
    assert ran == ["index", "search", "dedup", "encode"]
    assert (tmp_path / "vectors.npy").is_file()
    out = capsys.readouterr().out
    assert re.search(r"^\s+1\.\s+\S+\s+q\d+\s", out, re.M), out  # ids printed


def _file(tmp_path: Path) -> Path:
    source = tmp_path / "questions.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return source


def _engine(tmp_path: Path) -> list[str]:
    return ["--location", str(tmp_path / "qdrant"), "--collection", "faq", "--device", "cpu"]


def test_search_prints_ids_and_labels_its_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: a bar (elsewhere log lines)
    index = ["index", str(_file(tmp_path)), "--text-field", "question", "--id-field", "qid", *_engine(tmp_path)]
    assert main(index) == 0
    err = capsys.readouterr().err
    assert "3/3" in err and "Upserting" in err  # one bar, with the file's row count as its total
    for options, label in (([], "cosine"), (["--mode", "sparse"], "BM25"), (["--mode", "hybrid"], "hybrid, dbsf")):
        assert main(["search", "learn python", "--limit", "2", *options, *_engine(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert f"(scores: {label}" in out and re.search(r"^\s+1\.\s+-?\d\.\d{3}\s+[ab]\s+", out, re.M), out
    where = ["--where", "lang=en", "--where", "lang=fr", "--where", "year>=2020", "--json", "--limit", "5"]
    assert main(["search", "python", *where, *_engine(tmp_path)]) == 0  # lang any of en, fr; year from 2020
    assert sorted(json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()) == ["b", "c"]
    assert main(["search", "python", "--where", "year<2020", "--json", *_engine(tmp_path)]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["a"]
    assert main(["search", "python", "--where", "year>=soon", *_engine(tmp_path)]) == 2
    assert "compares numbers" in capsys.readouterr().err


def test_documents_search_keeps_diversity_and_a_text_search_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = "Sunlight scatters off the air's molecules, so the sky looks blue at noon."
    pages = [same, same + " Really.", "Bread rises because yeast makes gas in the dough."]
    source = tmp_path / "pages.jsonl"
    source.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(pages)), "utf-8")
    engine = [*_engine(tmp_path), "--no-progress"]
    assert main(["index", str(source), "--documents", "--id-field", "id", *engine]) == 0
    search = ["search", same, "--documents", "--limit", "2", "--json", *engine]
    assert main(search) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["p0", "p1"]
    assert main([*search, "--diversity", "1"]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["p0", "p2"]
    assert main(["search", "sky", *engine]) == 2
    assert "holds documents and no texts: add --documents" in capsys.readouterr().err


def test_errors_speak_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = [*_engine(tmp_path), "--no-progress"]
    assert main(["index", str(_file(tmp_path)), "--text-field", "question", *engine]) == 0
    capsys.readouterr()
    wrong = [*engine[:-1], "--collection", "fqa"]
    assert main(["search", "python", *wrong]) == 2
    err = capsys.readouterr().err
    assert f"no collection 'fqa' at --location {tmp_path / 'qdrant'} (collections there: faq)" in err
    assert "check --collection and --location" in err
    with pytest.raises(SystemExit) as usage:
        main(["dedup", "--threshold", "2", *engine])
    assert usage.value.code == 2 and "2.0 is not a cosine" in capsys.readouterr().err
    assert main(["encode", str(tmp_path / "none.txt"), "-o", "v.txt"]) == 2
    assert "--output 'v.txt' must end in .npy or .jsonl" in capsys.readouterr().err
    assert main(["dedup", "--limit", "1", *engine, "-v"]) == 0  # -v after the verb
    assert "pairs" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_location_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["index", str(_file(tmp_path)), "--text-field", "question", "--location", str(locked)]) == 2
    assert "cannot create collection 'texts'" in capsys.readouterr().err


def test_a_read_only_location_in_a_child_process(tmp_path: Path) -> None:
    """Also where the tests run as root: a location under a file cannot be created."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["index", str(_file(tmp_path)), "--text-field", "question", "--location", str(blocker / "data")]
    result = run_child([sys.executable, "-m", "sbert_qdrant", *argv, "--device", "cpu"], cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "cannot create collection 'texts'" in result.stderr and "--location" in result.stderr
