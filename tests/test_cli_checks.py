"""The command line checks what needs no model before it loads one (issue 56): a wrong --text-field, an unknown
--collection, a --location that is a file and a missing file are each refused at once, the model never loaded; a
hybrid search of a --no-sparse collection is refused in the command line's words."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from child import run_child

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


HEAVY = ("torch", "transformers", "qdrant_client", "qdrant_edge", "numpy")

_CHILD = """
import contextlib, io, json, sys
from sbert_qdrant.cli import main
said = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    said.append([code, err.getvalue()])
print(json.dumps({"said": said, "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


def test_every_flag_value_and_field_error_comes_before_any_heavy_import(tmp_path: Path) -> None:
    """Issue 64: each wrong flag value or field is refused, naming the flag, by a process that imported none of
    torch, transformers, qdrant-client, the engine or NumPy (benchmarks/cli_errors.py times each as a process)."""
    with TextCollection("texts", testing.tiny_encoder(), location=tmp_path / "store") as coll:
        coll.upsert_texts(["a cat sat on the mat"], ids=["c"])
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"text": "a cat", "title": "Cats"}) + "\n" + json.dumps({"text": "a dog"}) + "\n")
    late = tmp_path / "late.jsonl"
    late.write_text(json.dumps({"text": "a cat"}) + "\n" + json.dumps({"text": "a dog", "title": "Dogs"}) + "\n")
    engine = ["--location", str(tmp_path / "store")]
    search, index = ["search", "a cat", *engine], ["index", str(rows), *engine, "--collection", "new"]
    late_index = ["index", str(late), *engine, "--collection", "new"]
    cases = {
        "--limit=0 must be a positive integer": [*search, "--limit", "0"],
        "--candidates=2 must be an integer >= --limit": [*search, "--candidates", "2"],
        "--diversity=2.0 must be between 0": [*search, "--diversity", "2"],
        "--fusion='rrf' applies to --mode='hybrid' only": [*search, "--fusion", "rrf"],
        "--threshold=2 is outside the cosine score range [-1, 1] of collection 'texts'": [*search, "--threshold", "2"],
        "--rerank-weight=0.5 needs --rerank=": [*search, "--rerank-weight", "0.5"],
        f"--rerank '{tmp_path / 'nope'}': model": [*search, "--rerank", str(tmp_path / "nope")],
        f"--model '{tmp_path / 'nope'}': model": [*search, "--model", str(tmp_path / "nope")],
        "--where 'bad' must look like FIELD=VALUE": [*search, "--where", "bad"],
        "--hnsw-ef=0 must be a positive integer": [*search, "--hnsw-ef", "0"],
        "--oversampling=0.5 must be at least 1": [*search, "--oversampling", "0.5"],
        "--device 'gpu' is not a torch device": [*search, "--device", "gpu"],
        "--truncate-dim=0 must be a positive integer": [*search, "--truncate-dim", "0"],
        "--payload-fields 'titel': no row of": [*index, "--payload-fields", "text,titel"],
        "--context-field 'titel': no row of": [*index, "--documents", "--context-field", "titel"],
        "--context-field 'title': the first row of": [*late_index, "--documents", "--context-field", "title"],
        "--context-field 'title' is read from the payload, and --payload-fields 'text' leaves it out": [
            *index,
            "--documents",
            "--context-field",
            "title",
            "--payload-fields",
            "text",
        ],
        "--context-field apply to documents: add --documents": [*index, "--context-field", "title"],
        "--batch-size=0 must be a positive integer": [*index, "--batch-size", "0"],
        "--chunk-tokens=0 must be at least 8": [*index, "--documents", "--chunk-tokens", "0"],
        "--chunk-tokens=1000 is over the max_seq_length of the default model (256)": [
            *index,
            "--documents",
            "--chunk-tokens",
            "1000",
        ],
        "--overlap-tokens=-1 must be at least 0": [*index, "--documents", "--overlap-tokens", "-1"],
        "--first-stage-dim=0 must be a positive integer": [*index, "--first-stage-dim", "0"],
        "--top-k=0 must be a positive integer": ["dedup", *engine, "--top-k", "0"],
        "--limit=0 must be a positive integer.": ["dedup", *engine, "--limit", "0"],
    }
    ran = run_child([sys.executable, "-c", _CHILD, json.dumps(list(cases.values())), json.dumps(HEAVY)])
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    for (words, argv), (code, err) in zip(cases.items(), result["said"], strict=True):
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert result["heavy"] == [], result["heavy"]
    assert not (tmp_path / "store" / "new").exists()  # nothing written
