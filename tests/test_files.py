"""The one data-file reader: each format, gzip, blank lines, line numbers, and errors naming file, line and fix."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from sbert_qdrant import DataFormatError, InvalidArgumentError, InvalidInputError
from sbert_qdrant.files import detect_format, read_columns, read_rows
from sbert_qdrant.training import DataFormatError as TrainingDataFormatError
from sbert_qdrant.types import FILE_FORMATS


def _write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def _rows(path: Path, **kwargs: object) -> list[tuple[int, dict]]:
    return list(read_rows(path, **kwargs))  # type: ignore[arg-type]


CONTENTS = {
    "jsonl": '{"text": "a b", "label": 1}\n\n{"text": "c", "label": 0}\n',
    "csv": 'text,label\n"a b",1\n\nc,0\n',
    "tsv": "text\tlabel\na b\t1\n\nc\t0\n",
    "txt": "a b\n\nc\n",
}


@pytest.mark.parametrize("kind", FILE_FORMATS)
@pytest.mark.parametrize("gz", [False, True])
def test_each_format_plain_and_gzipped(tmp_path: Path, kind: str, gz: bool) -> None:
    path = _write(tmp_path / f"data.{kind}{'.gz' if gz else ''}", CONTENTS[kind])
    rows = _rows(path)
    assert [row["text"] for _, row in rows] == ["a b", "c"]
    assert [number for number, _ in rows] == ([1, 3] if kind in ("jsonl", "txt") else [2, 4])  # blank line 3 skipped
    if kind == "jsonl":
        assert rows[0][1]["label"] == 1  # JSON values keep their type
    elif kind != "txt":
        assert rows[0][1]["label"] == "1"
    assert read_columns(path) == (["text"] if kind == "txt" else ["text", "label"])


def test_format_from_suffix_or_given(tmp_path: Path) -> None:
    assert detect_format("x.JSON") == "jsonl" and detect_format("x.ndjson.gz") == "jsonl"
    assert detect_format("a.b.tsv.gz") == "tsv" and detect_format("notes.text") == "txt"
    assert detect_format("x.parquet", "csv") == "csv"
    path = _write(tmp_path / "pairs.dat", "q,d\nhow?,why?\n")
    assert _rows(path, file_format="csv") == [(2, {"q": "how?", "d": "why?"})]
    with pytest.raises(InvalidArgumentError, match=r"file_format='xml' is not one of jsonl, csv, tsv, txt"):
        read_rows(path, "xml")


def test_gzip_is_recognised_by_content_and_bom_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"  # gzipped, but named without .gz
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\ufefftext\nhello\n")
    assert _rows(path) == [(2, {"text": "hello"})]


def test_tsv_has_no_quoting_and_csv_has_standard_quoting(tmp_path: Path) -> None:
    tsv = _write(tmp_path / "a.tsv", 's1\ts2\n"A man" said\t"quoted, too"\n')
    assert _rows(tsv) == [(2, {"s1": '"A man" said', "s2": '"quoted, too"'})]
    csv = _write(tmp_path / "a.csv", 's1,s2\n"A man, smiling.","two\nlines ""q"""\nnext,row\n')
    assert _rows(csv) == [(2, {"s1": "A man, smiling.", "s2": 'two\nlines "q"'}), (4, {"s1": "next", "s2": "row"})]


def test_txt_keeps_inner_whitespace_and_header_names_are_stripped(tmp_path: Path) -> None:
    txt = _write(tmp_path / "a.txt", "  indented text \r\n   \n")
    assert _rows(txt) == [(1, {"text": "  indented text "})]
    csv = _write(tmp_path / "b.csv", "\n text , label\na,1\nb\n")
    assert _rows(csv) == [(3, {"text": "a", "label": "1"}), (4, {"text": "b"})]  # a short row lacks its last column


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", '{"text": "a"}\n{oops\n', r"bad.jsonl:2: not valid JSON .*; fix or remove the line"),
        ("list.jsonl", '{"text": "a"}\n\n[1, 2]\n', r"list.jsonl:3: expected a JSON object, got list"),
        ("wide.tsv", "a\tb\nx\ty\n1\t2\t3\n", r"wide.tsv:3: 3 fields but the header has 2 .*a tab inside a text"),
        ("quote.csv", 'a,b\nx,y\n"open,z\n', r"quote.csv:3: unexpected end of data; fix the line"),
        ("twice.csv", "a,b,a\n1,2,3\n", r"twice.csv:1: the header repeats column\(s\) \['a'\]"),
    ],
)
def test_bad_lines_name_file_line_and_fix(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = _write(tmp_path / name, content)
    with pytest.raises(DataFormatError, match=message) as info:
        _rows(path)
    assert str(path) in str(info.value)


def test_one_error_class_everywhere(tmp_path: Path) -> None:
    assert TrainingDataFormatError is DataFormatError and issubclass(DataFormatError, InvalidInputError)
    with pytest.raises(DataFormatError, match=r"cannot tell the format of .*data.parquet.*--format .*file_format="):
        read_rows(tmp_path / "data.parquet")
    with pytest.raises(DataFormatError, match=r"data file .*none.tsv does not exist"):
        read_rows(tmp_path / "none.tsv")  # checked on the call, before any row is read
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin.txt: not UTF-8 text after line 0 .*save the file as UTF-8"):
        _rows(latin)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"text": "a"}\n' * 1000)[:60])
    with pytest.raises(DataFormatError, match=r"broken.jsonl.gz: the gzip stream is damaged"):
        _rows(broken)


def test_missing_columns_are_named_before_any_row(tmp_path: Path) -> None:
    tsv = _write(tmp_path / "nli.tsv", "sentence1\tsentence2\tlabel\n")  # header only: still checked
    with pytest.raises(DataFormatError) as info:
        _rows(tsv, columns=["premise", "label"], fix="pass --columns")
    message = str(info.value)
    assert f"{tsv} has no column(s) ['premise']" in message and "['sentence1', 'sentence2', 'label']" in message
    assert message.endswith("Fix: pass --columns.")
    jsonl = _write(tmp_path / "q.jsonl", '{"question": "a"}\n{"text": "b"}\n')
    with pytest.raises(DataFormatError, match=r"no column\(s\) \['text'\]; its first object \(line 1\) has keys"):
        _rows(jsonl, columns=["text"])
    txt = _write(tmp_path / "t.txt", "a\n")
    with pytest.raises(DataFormatError, match=r"no column\(s\) \['question'\]; its columns are \['text'\]"):
        _rows(txt, columns=["question"])
    assert _rows(_write(tmp_path / "ok.jsonl", '{"text": "a"}\n{"other": 1}\n'), columns=["text"])[1] == (
        2,
        {"other": 1},
    )  # later objects are the caller's to check
