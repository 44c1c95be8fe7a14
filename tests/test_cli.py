"""The ``sbert-qdrant encode`` command, run as a user would (real default model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.cli import main

TEXTS = ["How do I learn Python quickly?", "What is the best way to learn Python fast?", "Why is the sky blue?"]


def test_encode_file_to_npy_matches_the_api(tmp_path: Path, default_encoder: SentenceEncoder) -> None:
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n\n", encoding="utf-8")
    assert main(["encode", str(source), "-o", str(tmp_path / "v.npy"), "--device", "cpu", "--no-progress"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), default_encoder.encode(TEXTS), atol=1e-6)


def test_encode_stdin_to_jsonl_in_a_subprocess(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sbert_qdrant", "encode", "-o", "-", "--device", "cpu", "--max-seq-length", "4"],
        input="\n".join(TEXTS),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["text"] for r in rows] == TEXTS and len(rows[0]["embedding"]) == 384
    assert "3 truncated at 4 tokens" in result.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["encode", "missing.txt", "-o", "x.npy"], "missing.txt"),
        (["encode", "-o", "x.csv"], "must end in .npy or .jsonl"),
        (["encode", "--model", "./no/such/model", "-o", "x.npy"], "was not found"),
    ],
)
def test_encode_errors_are_one_clear_line(argv: list[str], message: str, capsys, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", open(__file__, encoding="utf-8"))  # noqa: SIM115
    try:
        code = main(argv)
    except SystemExit as exc:
        code, err = 2, str(exc)
    else:
        err = capsys.readouterr().err
    assert code == 2 and message in err
