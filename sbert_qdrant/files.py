"""Data files in, rows out: the one reader of JSONL, CSV, TSV and TXT files, each optionally gzipped.

Every file the package reads as data goes through here (``sbert-qdrant index``/``dedup``/``demo``, ``train``/
``evaluate`` and the training readers): :func:`read_rows` yields its rows, :func:`read_columns` names its columns,
:func:`detect_format` tells its format, :func:`count_rows` counts them for a progress bar. One set of rules:

- **Format**: ``file_format=`` when given, else the name's suffix, ignoring a trailing ``.gz``: ``.jsonl``,
  ``.json``, ``.ndjson`` -> jsonl; ``.csv`` -> csv; ``.tsv`` -> tsv; ``.txt``, ``.text`` -> txt.
- **Compression**: a gzip file is recognised by its first bytes (whatever its name; ``x.tsv.gz`` is the usual one).
- **Text**: UTF-8; a leading byte-order mark is ignored.
- **Blank lines** (nothing but whitespace) are skipped everywhere, before a header too.
- **JSONL**: one JSON object per line; anything else on a line is an error.
- **CSV**: a header row, then comma-separated rows with standard double-quote quoting (a quoted field may hold
  commas, doubled quotes and newlines).
- **TSV**: a header row, then tab-separated rows **without quoting** (``csv.QUOTE_NONE``): quotes are part of the
  text, so a field cannot hold a tab or a newline. This is the convention of STS-B, SNLI/MNLI and
  sentence-transformers' data files, whose texts hold unbalanced quotes that a quoting reader would run together.
- **CSV/TSV header**: names are stripped of surrounding whitespace; a name may not repeat. A row with more fields
  than the header is an error (a stray delimiter, or a tab inside a TSV text, would shift every column after it);
  a row with fewer lacks the trailing columns (they are absent from its dict).
- **TXT**: every non-blank line is one row ``{"text": line}``, the line ending removed and other whitespace kept.
- **Rows** come as ``(line_number, dict)``: 1-based physical lines of the (decompressed) file, the header counting
  as a line; a CSV record spanning lines is numbered by its first line. CSV/TSV values are strings, JSONL values
  whatever the JSON holds.
- **Columns**: ``columns=`` names columns that must exist; they are checked against the header (TXT: ``text``), or
  for JSONL against the first object, before any row is yielded. A later JSONL object lacking one is the caller's to
  report per row.
- **Errors**: the file's content, name or absence raises :class:`DataFormatError` (an ``InvalidInputError``) whose
  message names the file, the line where there is one, and the fix. An unknown ``file_format=`` value raises
  ``InvalidArgumentError``. The format and the file's existence are checked when :func:`read_rows` is called, the
  content as the rows are read.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import zlib
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from .errors import DataFormatError, InvalidArgumentError
from .types import FILE_FORMATS, FileFormat

#: The one column of a TXT file's rows.
TEXT_COLUMN = "text"
_SUFFIXES: dict[str, FileFormat] = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "txt",
    ".text": "txt",
}
_GZIP_MAGIC = b"\x1f\x8b"


def detect_format(path: str | os.PathLike[str], file_format: str | None = None) -> FileFormat:
    """The format of ``path``: ``file_format`` when given, else from the name's suffix (before an optional .gz)."""
    if file_format is not None:
        if file_format not in FILE_FORMATS:
            raise InvalidArgumentError(f"file_format={file_format!r} is not one of {', '.join(FILE_FORMATS)}.")
        return file_format
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    suffix = suffixes[-1] if suffixes else ""
    if suffix not in _SUFFIXES:
        raise DataFormatError(
            f"cannot tell the format of {os.fspath(path)} from its name (suffix {suffix or 'none'!r}); name it "
            ".jsonl, .csv, .tsv or .txt (optionally + .gz), or give the format (--format on the command line, "
            f"file_format= in Python): one of {', '.join(FILE_FORMATS)}."
        )
    return _SUFFIXES[suffix]


def read_rows(
    path: str | os.PathLike[str],
    file_format: str | None = None,
    *,
    columns: Sequence[str] = (),
    fix: str = "name columns the file has",
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` for every record of a data file, under the rules of this module.

    columns: names the file must have, checked before the first row is yielded. fix: what the missing-columns
    error tells the reader to do (e.g. "pass --text-field").
    """
    kind = detect_format(path, file_format)
    source = _existing(path)
    return _read(source, kind, tuple(columns), fix)


def read_columns(path: str | os.PathLike[str], file_format: str | None = None) -> list[str]:
    """The columns of a data file: its header (CSV/TSV), ``["text"]`` (TXT) or its first object's keys (JSONL).

    An empty file has none.
    """
    kind = detect_format(path, file_format)
    source = _existing(path)
    if kind == "txt":
        return [TEXT_COLUMN]
    rows = _read(source, kind, (), "", header_only=True)
    try:
        return list(next(rows, (0, {}))[1])
    finally:
        rows.close()


def _existing(path: str | os.PathLike[str]) -> Path:
    source = Path(path)
    if not source.is_file():
        what = "is not a file" if source.exists() else "does not exist"
        raise DataFormatError(f"data file {source} {what}; check the path.")
    return source


def count_rows(path: str | os.PathLike[str], file_format: str | None = None) -> int:
    """About how many rows a file holds, read once without parsing (a progress bar's total): its non-blank lines,
    less a CSV/TSV header (a CSV record spanning lines counts each of its lines)."""
    kind = detect_format(path, file_format)
    with _open(_existing(path)) as f:
        lines = sum(1 for line in f if line.strip())
    return max(0, lines - 1) if kind in ("csv", "tsv") else lines


def _open(source: Path) -> TextIO:
    try:
        with source.open("rb") as probe:
            compressed = probe.read(2) == _GZIP_MAGIC
        if compressed:
            return gzip.open(source, "rt", encoding="utf-8-sig", newline="")
        return source.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DataFormatError(
            f"data file {source} cannot be read ({exc.strerror or exc}); check its permissions."
        ) from exc


def _read(
    source: Path, kind: FileFormat, columns: tuple[str, ...], fix: str, header_only: bool = False
) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """The rows; with ``header_only``, one row whose keys are the CSV/TSV header (or the first JSONL object)."""
    last = 0  # the last line read, for errors the decoder raises between lines
    try:
        with _open(source) as f:
            rows: Iterator[tuple[int, dict[str, Any]]]
            if kind == "jsonl":
                rows = _jsonl(source, f)
            elif kind == "txt":
                rows = ((n, {TEXT_COLUMN: line.rstrip("\r\n")}) for n, line in enumerate(f, 1) if line.strip())
            else:
                rows = _table(source, f, kind, columns, fix, header_only)
            for number, row in rows:
                if last == 0 and kind != "tsv" and kind != "csv":
                    _check_columns(source, number, kind, list(row), columns, fix)
                last = number
                yield number, row
    except UnicodeDecodeError as exc:
        raise DataFormatError(
            f"{source}: not UTF-8 text after line {last} ({exc.reason}); save the file as UTF-8."
        ) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataFormatError(
            f"{source}: the gzip stream is damaged after line {last} ({exc}); re-download or re-compress the file."
        ) from None


def _jsonl(source: Path, f: TextIO) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataFormatError(
                f"{source}:{number}: not valid JSON ({exc}); fix or remove the line (JSONL holds one object a line)."
            ) from None
        if not isinstance(row, dict):
            raise DataFormatError(
                f"{source}:{number}: expected a JSON object, got {type(row).__name__}; write one object a line."
            )
        yield number, row


def _table(
    source: Path, f: TextIO, kind: FileFormat, columns: tuple[str, ...], fix: str, header_only: bool
) -> Iterator[tuple[int, dict[str, Any]]]:
    header: list[str] | None = None
    for number, fields in _records(source, f, kind):
        if header is None:
            header = [name.strip() for name in fields]
            repeated = sorted({name for name in header if header.count(name) > 1})
            if repeated:
                raise DataFormatError(
                    f"{source}:{number}: the header repeats column(s) {repeated}; give each column its own name."
                )
            _check_columns(source, number, kind, header, columns, fix)
            if header_only:
                yield number, dict.fromkeys(header, "")
                return
            continue
        if len(fields) > len(header):
            cause = "a comma in an unquoted field" if kind == "csv" else "a tab inside a text"
            raise DataFormatError(
                f"{source}:{number}: {len(fields)} fields but the header has {len(header)} (a stray delimiter, "
                f"or {cause}); fix the line."
            )
        yield number, dict(zip(header, fields, strict=False))  # short rows: absent columns


def _records(source: Path, f: TextIO, kind: FileFormat) -> Iterator[tuple[int, list[str]]]:
    """(first line, fields) of each non-blank CSV/TSV record."""
    tsv = kind == "tsv"
    reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if tsv else csv.reader(f, strict=True)
    previous = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataFormatError(f"{source}:{previous + 1}: {exc}; fix the line (check its quotes).") from None
        start, previous = previous + 1, reader.line_num
        if len(fields) <= 1 and not "".join(fields).strip():
            continue  # a blank line
        yield start, fields


def _check_columns(
    source: Path, number: int, kind: FileFormat, found: list[str], columns: tuple[str, ...], fix: str
) -> None:
    missing = [c for c in columns if c not in found]
    if missing:
        where = f"its first object (line {number}) has keys" if kind == "jsonl" else "its columns are"
        raise DataFormatError(f"{source} has no column(s) {missing}; {where} {found}. Fix: {fix}.")
