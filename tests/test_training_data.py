"""Training data readers: formats, column and label mapping, malformed rows reported with file and line."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest

from sbert_qdrant import InvalidInputError
from sbert_qdrant.training import (
    NLI_LABELS,
    DataFormatError,
    Example,
    read_binary_pairs,
    read_examples,
    read_nli,
    read_scored_pairs,
    read_texts,
)

DATA = Path(__file__).parent / "data"


def test_nli_sample_maps_label_names_to_class_indices() -> None:
    examples = read_nli(DATA / "nli_train_sample.tsv")
    assert len(examples) == 60
    assert examples[0] == Example(
        (
            "An older gentleman stands along the shore of an immense lake with a cityscape across the water.",
            "The man is gazing over the water thinking about his life.",
        ),
        NLI_LABELS.index("neutral"),
    )
    assert {e.label for e in examples} == {0, 1, 2}


def test_quora_jsonl_binary_labels_and_triplets() -> None:
    pairs = read_binary_pairs(DATA / "quora_train_sample.jsonl")
    assert len(pairs) == 60 and {p.label for p in pairs} == {0, 1}
    triplets = read_texts(DATA / "nli_triplets_sample.tsv")
    assert len(triplets) == 40 and all(len(t.texts) == 3 and t.label is None for t in triplets)


def test_scores_are_scaled_and_gzip_and_csv_are_read(tmp_path: Path) -> None:
    path = tmp_path / "sts.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write('sentence1,sentence2,score\n"A man, smiling.",A man smiles.,4.5\nA cat.,A car.,0\n')
    rows = read_scored_pairs(path)
    assert rows == [Example(("A man, smiling.", "A man smiles."), 0.9), Example(("A cat.", "A car."), 0.0)]


def test_column_mapping_and_explicit_label_map(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("q\td\tverdict\nhow?\twhy?\tsame\nwho?\twhen?\tdifferent\n", encoding="utf-8")
    rows = read_examples(path, ["q", "d"], "verdict", "binary", label_map={"same": 1, "different": 0})
    assert [r.label for r in rows] == [1, 0]


@pytest.mark.parametrize(
    ("content", "kwargs", "message"),
    [
        ("premise\thypothesis\tlabel\na\tb\tentailment\nc\td\tmaybe\n", {}, ":3: label 'maybe' is not in the"),
        ("premise\thypothesis\tlabel\na\t\tneutral\n", {}, ":2: column 'hypothesis' is ''"),
        ("sentence1\tsentence2\tlabel\na\tb\tneutral\n", {}, "has no column(s) ['premise', 'hypothesis']"),
    ],
)
def test_nli_errors_name_file_line_and_value(tmp_path: Path, content: str, kwargs: dict, message: str) -> None:
    path = tmp_path / "nli.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        read_nli(path, **kwargs)
    assert message in str(info.value) and str(path) in str(info.value)
    assert isinstance(info.value, InvalidInputError)


def test_score_out_of_range_and_bad_json(tmp_path: Path) -> None:
    sts = tmp_path / "sts.tsv"
    sts.write_text("sentence1\tsentence2\tscore\na\tb\t7\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"sts.tsv:2: score 7.0 is outside 0..max_score=5.0"):
        read_scored_pairs(sts)
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"question1": "a", "question2": "b", "is_duplicate": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"q.jsonl:2: not valid JSON"):
        read_binary_pairs(bad)
    yes_no = tmp_path / "yn.jsonl"
    yes_no.write_text('{"question1": "a", "question2": "b", "is_duplicate": "perhaps"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"yn.jsonl:1: binary label 'perhaps'"):
        read_binary_pairs(yes_no)


def test_warn_mode_reports_each_skipped_row(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "nli.tsv"
    path.write_text("premise\thypothesis\tlabel\na\tb\tentailment\nc\td\t-\ne\tf\tneutral\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        rows = read_nli(path, errors="warn")
    assert len(rows) == 2
    assert f"{path}:3: label '-' is not in the label map" in caplog.text
    assert "skipped 1 malformed rows, kept 2" in caplog.text


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot tell the format"):
        read_nli(tmp_path / "data.parquet")
    with pytest.raises(ValueError, match=r"does not exist"):
        read_nli(tmp_path / "none.tsv")
