"""Issue 64: a long write where no progress bar can be drawn (stderr not a terminal: a file, a pipe, a job's log)
says where it is in one log line every few seconds, instead of a bar whose carriage returns end no line."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import pytest
from tqdm.auto import tqdm

from sbert_qdrant._collection.progress import LoggedProgress, progress_bar
from sbert_qdrant._collection.vectors import slices


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_few_seconds_of_work_and_a_last_one(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    caplog.set_level(logging.INFO, logger="sbert_qdrant._collection.progress")
    with LoggedProgress("Upserting", "document", 1000, every=5.0, clock=clock) as bar:
        for _ in range(10):  # 10 batches of 100 documents, 2 s each: a line at 6 s, 12 s and 18 s, then the last
            clock.now += 2.0
            bar.update(100)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Upserting: 300/1,000 documents (30%), 50.0/s, about 14 s left",
        "Upserting: 600/1,000 documents (60%), 50.0/s, about 8 s left",
        "Upserting: 900/1,000 documents (90%), 50.0/s, about 2 s left",
        "Upserting: 1,000/1,000 documents (100%), 50.0/s, done in 20 s",
    ]


def test_short_work_logs_nothing_and_an_unknown_total_counts(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    caplog.set_level(logging.INFO, logger="sbert_qdrant._collection.progress")
    with LoggedProgress("Upserting", "text", None, clock=clock) as bar:
        bar.update(5)
    assert caplog.records == []
    with LoggedProgress("Upserting", "text", None, clock=clock) as bar:
        clock.now += 6
        bar.update(12)
    assert caplog.records[0].getMessage() == "Upserting: 12 texts, 2.0/s"


def test_a_bar_on_a_terminal_lines_elsewhere_nothing_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert isinstance(progress_bar("Upserting", "text", 3, show=True), LoggedProgress)
    hidden = progress_bar("Upserting", "text", 3, show=False)
    assert isinstance(hidden, tqdm) and hidden.disable
    monkeypatch.setattr("sys.stderr", Terminal())
    shown = progress_bar("Upserting", "text", 3, show=True)
    assert isinstance(shown, tqdm) and not shown.disable
    shown.close()


def test_asked_for_with_no_logging_set_up_the_lines_go_to_stderr() -> None:
    """``show_progress_bar=True`` in a script that set up no logging (INFO would be dropped): stderr, line by line."""
    script = (
        "from sbert_qdrant._collection.progress import LoggedProgress\n"
        "with LoggedProgress('Upserting', 'document', 10, every=0.0) as bar:\n"
        "    bar.update(4)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert ran.stderr.splitlines()[0].startswith("Upserting: 4/10 documents (40%), "), ran.stderr
    assert ran.stderr.splitlines()[-1].startswith("Upserting: 4/10 documents (40%), ") and "done in" in ran.stderr


def test_a_write_is_encoded_in_slices_of_bounded_count_and_characters() -> None:
    """Long texts make smaller slices, so that a batch of abstracts moves the progress as often as short texts."""
    texts = ["short"] * 5 + ["x" * 40] * 3 + ["y" * 100, "z"]
    parts = list(slices(texts, most=4, chars=80))
    assert [texts[p] for p in parts] == [
        ["short"] * 4,
        ["short", "x" * 40],
        ["x" * 40] * 2,
        ["y" * 100],  # one text over the budget is a slice of its own
        ["z"],
    ]
    assert list(slices([], most=4, chars=80)) == []
