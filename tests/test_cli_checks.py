"""The command line checks what needs no model before it loads one (issue 56): a wrong --text-field, an unknown
--collection, a --location that is a file and a missing file are each refused at once, the model never loaded; a
hybrid search of a --no-sparse collection is refused in the command line's words."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sbert_qdrant import TextCollection, testing
from sbert_qdrant.cli import main
from sbert_qdrant.encoder import configured


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the command's checks")

    monkeypatch.setattr(configured.EncoderSpec, "load", load)
    monkeypatch.setattr(configured, "load_encoder", load)


def _cases(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    data, a_file, folder = tmp_path / "q.jsonl", tmp_path / "a-file", tmp_path / "qdrant"
    data.write_text(json.dumps({"question": "How do I learn Python?"}) + "\n", encoding="utf-8")
    a_file.write_text("not a folder", encoding="utf-8")
    folder.mkdir()
    here = ["--location", str(folder)]
    missing = "no collection 'nope' at --location"
    return {
        "index --text-field": (["index", str(data), *here], "has no column(s) ['text']"),
        "dedup --text-field": (["dedup", str(data), *here], "pass --text-field"),
        "search --collection": (["search", "python", "--collection", "nope", *here], missing),
        "search --documents --collection": (
            ["search", "python", "--documents", "--collection", "nope", *here],
            missing,
        ),
        "dedup --collection": (["dedup", "--collection", "nope", *here], missing),
        "index --location": (["index", str(data), "--text-field", "question", "--location", str(a_file)], "is a file"),
        "search --location": (["search", "python", "--location", str(a_file)], "is a file"),
        "index missing file": (["index", str(tmp_path / "missing.jsonl"), *here], "does not exist"),
    }


def test_each_error_comes_before_the_model_within_a_second(
    tmp_path: Path, no_model: None, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = _cases(tmp_path)
    main(cases["search --collection"][0])  # the imports a first command pays once
    for name, (argv, words) in cases.items():
        start = time.perf_counter()
        assert main(argv) == 2, name
        took = time.perf_counter() - start
        err = capsys.readouterr().err
        assert words in err, (name, err)
        assert took < 1.0, (name, took)


def test_hybrid_on_a_no_sparse_collection_answers_in_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder = testing.tiny_encoder()
    with TextCollection("faq", encoder, location=tmp_path, sparse=None) as coll:
        coll.upsert_texts(["How do I learn Python?"], ids=["q1"])
    monkeypatch.setattr(configured.EncoderSpec, "load", lambda self: encoder)
    argv = ["search", "python", "--collection", "faq", "--location", str(tmp_path), "--mode", "hybrid"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "indexed with --no-sparse" in err and "--mode hybrid cannot search it" in err and "--mode dense" in err
    assert "mode='hybrid'" not in err and "TextCollection(" not in err
    assert main([*argv[:-1], "dense"]) == 0
    assert "q1" in capsys.readouterr().out


def test_dedup_prints_each_pairs_ids_without_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder = testing.tiny_encoder()
    with TextCollection("faq", encoder, location=tmp_path) as coll:
        coll.upsert_texts(["How do I learn Python?", "How can I learn Python?"], ids=["q1", "q2"])
    monkeypatch.setattr(configured.EncoderSpec, "load", lambda self: encoder)
    assert main(["dedup", "--collection", "faq", "--location", str(tmp_path), "--threshold", "-1"]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert {first.split()[1], second.split()[0]} == {"q1", "q2"}
