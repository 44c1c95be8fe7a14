"""The ``sbert-qdrant encode`` command, run as a user would (real default model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from child import run_child

from sbert_qdrant import SentenceEncoder, __version__
from sbert_qdrant.cli import main

TEXTS = ["How do I learn Python quickly?", "What is the best way to learn Python fast?", "Why is the sky blue?"]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"sbert-qdrant {__version__}\n"


def test_encode_file_to_npy_matches_the_api(tmp_path: Path, default_encoder: SentenceEncoder) -> None:
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n\n", encoding="utf-8")
    assert (
        main(
            [
                "encode",
                str(source),
                "-o",
                str(tmp_path / "v.npy"),
                "--device",
                "cpu",
                "--precision",
                "fp32",
                "--no-progress",
            ]
        )
        == 0
    )
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), default_encoder.encode(TEXTS), atol=1e-6)


def test_encode_stdin_to_jsonl_in_a_subprocess(tmp_path: Path) -> None:
    result = run_child(
        [sys.executable, "-m", "sbert_qdrant", "encode", "-o", "-", "--device", "cpu", "--max-seq-length", "4"],
        input="\n".join(TEXTS),
    )
    assert result.returncode == 0, result.stderr
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


def test_demo_finds_its_sample_from_any_directory(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from sbert_qdrant.cli import demo

    monkeypatch.chdir(tmp_path)  # not the checkout: found through the package's own place (editable install)
    found = demo.find_data()
    assert found == Path(__file__).resolve().parent.parent / "examples" / "data" / "quora_pairs_sample.jsonl"
    assert found.is_file()
    here = tmp_path / demo.SAMPLE
    here.parent.mkdir(parents=True)
    here.write_text('{"question1": "a", "question2": "b", "is_duplicate": 1}\n', encoding="utf-8")
    assert demo.find_data() == here  # the current directory's sample comes first
    assert demo.find_data("my/pairs.jsonl") == Path("my/pairs.jsonl")  # --data wins

    monkeypatch.chdir(tmp_path / "examples")  # neither here nor in a checkout (an installed wheel)
    monkeypatch.setattr(demo, "CHECKOUT", tmp_path / "site-packages")
    assert main(["demo", "--device", "cpu"]) == 2  # fails before loading a model
    err = capsys.readouterr().err
    assert "the demo's Quora sample was not found" in err and "pass --data PATH" in err
    assert main(["demo", "--data", "missing.jsonl"]) == 2
    assert "missing.jsonl does not exist" in capsys.readouterr().err


def test_help_imports_no_torch_or_transformers() -> None:
    """``--help``, every verb's ``--help`` and ``--version`` answer without torch or transformers (nor qdrant-client,
    which the verbs need only once they run): a command line that starts at once."""
    code = """
import sys
from sbert_qdrant.cli import main
verbs = ["encode", "index", "search", "dedup", "demo", "train", "mine-negatives", "adapt-corpus", "evaluate",
         "build-kernels", "quantize", "mcp"]
for argv in [["--help"], ["--version"], *([verb, "--help"] for verb in verbs)]:
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code == 0, (argv, exc.code)
print(sorted({name.partition(".")[0] for name in sys.modules} & {"torch", "transformers", "qdrant_client"}))
"""
    result = run_child([sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


def test_encode_truncate_dim_cuts_the_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sbert_qdrant import testing

    testing.tiny_encoder().save(tmp_path / "tiny")
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS), encoding="utf-8")
    monkeypatch.setenv("SBERT_QDRANT_TRUNCATE_DIM", "16")
    argv = ["encode", str(tmp_path / "texts.txt"), "--model", str(tmp_path / "tiny"), "--no-progress", "-o"]
    assert main([*argv, str(tmp_path / "env.npy")]) == 0
    assert main([*argv, str(tmp_path / "flag.npy"), "--truncate-dim", "8"]) == 0  # the flag wins over the setting
    assert np.load(tmp_path / "env.npy").shape == (3, 16)
    vectors = np.load(tmp_path / "flag.npy")
    assert vectors.shape == (3, 8)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert main([*argv, str(tmp_path / "bad.npy"), "--truncate-dim", "0"]) == 2  # one clear line, no traceback
