"""``sbert-qdrant index | search | dedup | demo`` on embedded Qdrant Edge, run as a user would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from child import run_child

from sbert_qdrant.cli import main

ROWS = [
    {"qid": "a", "question": "How do I learn Python quickly?", "topic": "code"},
    {"qid": "b", "question": "What is the best way to learn Python fast?", "topic": "code"},
    {"qid": "c", "question": "Why is the sky blue?", "topic": "science"},
]


def _engine(tmp_path: Path) -> list[str]:
    return ["--location", str(tmp_path / "qdrant"), "--collection", "faq", "--device", "cpu", "--no-progress"]


@pytest.mark.parametrize("kind", ["jsonl", "csv", "tsv"])
def test_index_then_search_and_resume(tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / f"questions.{kind}"
    if kind == "jsonl":
        source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    else:
        sep = "," if kind == "csv" else "\t"
        lines = [sep.join(ROWS[0])] + [sep.join(r.values()) for r in ROWS]
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = ["index", str(source), "--text-field", "question", "--id-field", "qid", *_engine(tmp_path)]
    assert main(index) == 0
    assert "3 written, 0 skipped, 0 failed; 3 texts stored" in capsys.readouterr().err
    assert main([*index, "--on-conflict", "skip"]) == 0
    assert "0 written, 3 skipped, 0 failed; 3 texts stored" in capsys.readouterr().err
    assert main(["search", "learning python", "--limit", "2", "--json", *_engine(tmp_path)]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {h["id"] for h in hits} == {"a", "b"} and hits[0]["payload"] == {"topic": "code"}  # the caller's ids
    assert main(["search", "learning", "--where", "topic=science", *_engine(tmp_path)]) == 0
    assert "Why is the sky blue?" in capsys.readouterr().out


def test_hybrid_search_and_a_dense_only_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "questions.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    index = ["index", str(source), "--text-field", "question", "--id-field", "qid"]
    assert main([*index, *_engine(tmp_path)]) == 0
    for options in (["--mode", "sparse"], ["--mode", "hybrid"], ["--mode", "hybrid", "--fusion", "dbsf"]):
        assert main(["search", "sky", "--limit", "1", "--json", *options, *_engine(tmp_path)]) == 0
        assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["c"]
    assert main(["search", "python", "--limit", "2", "--diversity", "0.5", "--json", *_engine(tmp_path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    tuned = ["--exact", "--quantization-rescore", "--oversampling", "2", "--limit", "1", "--json"]
    assert main(["search", "sky", *tuned, *_engine(tmp_path)]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["c"]
    old = ["--no-rescore", "--limit", "1", "--json"]  # the old spelling: still taken, with a deprecation message
    assert main(["search", "sky", *old, *_engine(tmp_path)]) == 0
    said = capsys.readouterr()
    assert [json.loads(line)["id"] for line in said.out.splitlines()] == ["c"]
    assert "--no-rescore is deprecated; use --no-quantization-rescore" in said.err
    dense_only = [*_engine(tmp_path), "--collection", "dense"]
    assert main([*index, "--no-sparse", *dense_only]) == 0
    assert main(["search", "sky", "--mode", "hybrid", *dense_only]) == 2
    assert "has no BM25 vectors" in capsys.readouterr().err


def test_documents_are_indexed_in_chunks_and_found_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages = [
        {"page": "paris", "body": "Paris is the capital of France. " * 30, "lang": "en", "title": "Capitals"},
        {
            "page": "sky",
            "body": "The sky is blue because of Rayleigh scattering. " * 30,
            "lang": "en",
            "title": "Weather",
        },
    ]
    source = tmp_path / "pages.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in pages), encoding="utf-8")
    index = ["index", str(source), "--documents", "--text-field", "body", "--id-field", "page", "--chunk-tokens", "32"]
    assert main([*index, "--context-field", "title", *_engine(tmp_path)]) == 0
    assert "2 records" in capsys.readouterr().err
    search = ["search", "why is the sky blue", "--documents", "--limit", "2", "--json", *_engine(tmp_path)]
    assert main(search) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [h["id"] for h in hits] == ["sky", "paris"] and hits[0]["payload"] == {"lang": "en", "title": "Weather"}
    chunk = hits[0]["chunks"][0]
    assert pages[1]["body"][chunk["start"] : chunk["end"]] == chunk["text"]
    by_title = ["search", "weather", "--documents", "--mode", "sparse", "--json", *_engine(tmp_path)]
    assert main(by_title) == 0  # the title was encoded with every chunk (BM25 too), though no chunk holds it
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["sky"]
    exact = ["search", "blue sky", "--documents", "--exact", "--hnsw-ef", "64", "--json", *_engine(tmp_path)]
    assert main(exact) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["id"] == "sky"


def test_dedup_mines_pairs_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "questions.txt"
    source.write_text("\n".join(r["question"] for r in ROWS) + "\n", encoding="utf-8")
    assert main(["dedup", str(source), "--threshold", "0.7", "--json", *_engine(tmp_path)]) == 0
    pairs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(pairs) == 1 and {pairs[0]["text_a"], pairs[0]["text_b"]} == {ROWS[0]["question"], ROWS[1]["question"]}


def test_bad_files_fail_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text('{"text": "fine"}\n{"body": "no text field"}\n', encoding="utf-8")
    assert main(["index", str(source), *_engine(tmp_path)]) == 2
    assert f"{source}:2: no text in field 'text'" in capsys.readouterr().err
    assert main(["index", str(tmp_path / "data.parquet"), *_engine(tmp_path)]) == 2
    assert "cannot tell the format" in (err := capsys.readouterr().err) and "--format" in err
    assert main(["index", str(tmp_path / "missing.tsv"), *_engine(tmp_path)]) == 2
    assert "missing.tsv does not exist" in capsys.readouterr().err
    floats = tmp_path / "float_ids.jsonl"
    floats.write_text('{"text": "fine", "qid": 1.5}\n', encoding="utf-8")
    assert main(["index", str(floats), "--id-field", "qid", *_engine(tmp_path)]) == 2
    assert f"{floats}:1: the id 1.5 in field 'qid' is a float" in capsys.readouterr().err
    assert main(["search", "x", *_engine(tmp_path)]) == 2  # nothing was written by the failed runs
    assert "no collection 'faq' at --location" in capsys.readouterr().err


@pytest.mark.long
def test_demo_finds_quora_duplicates_in_a_subprocess(tmp_path: Path) -> None:
    result = run_child(  # its progress bars (stderr) show it working, however busy the machine
        [sys.executable, "-m", "sbert_qdrant", "demo", "--queries", "3", "--device", "cpu"],
        cwd=tmp_path,  # not the checkout: the demo finds its sample from anywhere (editable install)
    )
    assert result.returncode == 0, result.stderr
    assert "Quora questions into Qdrant Edge" in result.stdout
    assert "the known duplicate came back first for 3 of 3 new questions" in result.stdout
