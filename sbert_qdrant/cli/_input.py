"""What the collection verbs read from the command line: records of a data file (counted for the progress bar),
``--where`` conditions as a Qdrant filter, and a cosine threshold."""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataFormatError, InvalidArgumentError, InvalidInputError
from ..files import count_rows, read_rows

if TYPE_CHECKING:  # imported when a command runs: --help loads no qdrant-client
    from qdrant_client import models

    from ..records import TextRecord

#: FIELD, an operator, VALUE: the longest operator first, so that ">=" is not read as ">".
_CONDITION = re.compile(r"^(?P<field>[^=<>]+?)(?P<op>>=|<=|=|>|<)(?P<value>.*)$")
_RANGES = {">=": "gte", ">": "gt", "<=": "lte", "<": "lt"}


def read_records(
    path: Path, file_format: str | None, text_field: str, id_field: str | None, payload_fields: Sequence[str] | None
) -> Iterator[TextRecord]:
    """Records of a data file (see :mod:`sbert_qdrant.files`); an unusable row raises an error naming file and line.

    The format, the file's existence and its fields (--text-field, --id-field: the header, or the first row) are
    checked now, before a model loads; the other rows as the records are consumed.
    """
    wanted = [text_field, *([id_field] if id_field is not None else [])]
    rows = read_rows(path, file_format, columns=wanted, fix="pass --text-field (and --id-field) naming its fields")
    first = next(rows, None)
    return _records(
        path, rows if first is None else itertools.chain([first], rows), text_field, id_field, payload_fields
    )


def check_fields(
    path: Path, file_format: str | None, named: Sequence[tuple[str, str]], every_row: Sequence[str] = ()
) -> None:
    """Refuse, before a model loads, a field a flag names (``named``: (flag, field) pairs) that no row of the file
    has, naming the fields its rows have; a flag of ``every_row`` (``--context-field``) needs its field from the
    first row on. The file is read only until each field is found."""
    seen: dict[str, None] = {}
    found: dict[str, int] = {}
    first: dict[str, Any] | None = None
    for number, row in read_rows(path, file_format):
        first = row if first is None else first
        seen |= dict.fromkeys(row)
        found |= {field: number for _, field in named if field in row and field not in found}
        if len(found) == len({field for _, field in named}):
            break
    for flag, field in named:
        if field not in found:
            raise InvalidArgumentError(
                f"{flag} {field!r}: no row of {path} has that field; its rows have: {', '.join(seen) or 'none'}."
            )
        if flag in every_row and first is not None and field not in first:
            raise DataFormatError(
                f"{flag} {field!r}: the first row of {path} has no such field (line {found[field]} has it), and "
                f'{flag} needs it in every row (null or "" for none); add it there, or drop {flag}.'
            )


def _records(
    path: Path,
    rows: Iterator[tuple[int, dict[str, Any]]],
    text_field: str,
    id_field: str | None,
    payload_fields: Sequence[str] | None,
) -> Iterator[TextRecord]:
    from ..records import TextRecord

    for number, row in rows:
        text = row.get(text_field)
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(
                f"{path}:{number}: no text in field {text_field!r} (fields: {sorted(row)}); fix the row or pass "
                "--text-field."
            )
        key = None
        if id_field is not None:
            key = row.get(id_field)
            if key is None or key == "":
                raise DataFormatError(f"{path}:{number}: no id in field {id_field!r}; fix the row or pass --id-field.")
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise DataFormatError(
                    f"{path}:{number}: the id {key!r} in field {id_field!r} is a {type(key).__name__}; ids are str "
                    'or int (CSV/TSV ids are always str, so JSONL ids 7 and "7" are different records).'
                )
        names = payload_fields if payload_fields is not None else [k for k in row if k not in (text_field, id_field)]
        yield TextRecord(text, {name: row.get(name) for name in names}, key)


class _Counted(Iterator["TextRecord"]):
    """Streamed records that say how many they are (``__length_hint__``): the write's progress bar shows a total
    and an ETA, and the file is still read once, batch by batch."""

    def __init__(self, records: Iterator[TextRecord], total: int) -> None:
        self.records, self.total = records, total

    def __next__(self) -> TextRecord:
        return next(self.records)

    def __length_hint__(self) -> int:
        return self.total


def counted(records: Iterator[TextRecord], path: Path, file_format: str | None) -> Iterator[TextRecord]:
    """``records`` of ``path`` with their count (its rows, counted first: a fast read without parsing)."""
    return _Counted(records, count_rows(path, file_format))


def _value(text: str) -> Any:
    """A --where value as JSON would type it: an integer, a number, true/false, else the text."""
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return {"true": True, "false": False}.get(text, text)


def check_where(conditions: Sequence[str]) -> tuple[dict[str, list[Any]], dict[str, dict[str, float]]]:
    """``--where`` conditions read (no qdrant-client): values each field must equal, and each field's range."""
    equal: dict[str, list[Any]] = {}
    ranges: dict[str, dict[str, float]] = {}
    for condition in conditions:
        found = _CONDITION.match(condition)
        if found is None or not found["field"].strip() or not found["value"]:
            raise InvalidInputError(
                f"--where {condition!r} must look like FIELD=VALUE, FIELD>=N, FIELD>N, FIELD<=N or FIELD<N."
            )
        field, op, value = found["field"].strip(), found["op"], found["value"]
        if op == "=":
            equal.setdefault(field, []).append(_value(value))
            continue
        try:
            ranges.setdefault(field, {})[_RANGES[op]] = float(value)
        except ValueError:
            message = f"--where {condition!r}: {op} compares numbers, and {value!r} is not one."
            raise InvalidInputError(message) from None
    return equal, ranges


def where_filter(conditions: Sequence[str]) -> models.Filter | None:
    """``--where`` conditions as one filter: FIELD=VALUE (the same field repeated: any of its values, MatchAny),
    FIELD>=N / >N / <=N / <N (a range); every field must match."""
    equal, ranges = check_where(conditions)
    if not equal and not ranges:
        return None
    from qdrant_client import models

    must: list[models.Condition] = []
    for field, values in equal.items():
        match: Any = models.MatchValue(value=values[0]) if len(values) == 1 else models.MatchAny(any=values)
        must.append(models.FieldCondition(key=field, match=match))
    must += [models.FieldCondition(key=field, range=models.Range(**bounds)) for field, bounds in ranges.items()]
    return models.Filter(must=must)


def cosine(text: str) -> float:
    """An argparse type: a cosine threshold, -1 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a cosine between -1 and 1.") from None
    if not -1.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a cosine; give one between -1 and 1 (e.g. 0.8).")
    return value
