"""Issue 64: a long write where no progress bar can be drawn (stderr not a terminal: a file, a pipe, a job's log)
says where it is in one log line every few seconds, instead of a bar whose carriage returns end no line."""

from __future__ import annotations

import io
import logging

import pytest
from tqdm.auto import tqdm

from sbert_qdrant._collection.progress import LoggedProgress, progress_bar


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
