"""What a long write says (issue 56): one truncation warning per call, with the count, however many encode calls
the write takes; a progress bar when asked for (``show_progress_bar=True``) or when logging is at INFO, as
sentence-transformers' ``encode`` decides (on a terminal; elsewhere log lines: test_write_progress_log.py)."""

from __future__ import annotations

import logging
import sys

import pytest
from flavours import Engines

from sbert_qdrant import testing

#: More than one encode call's worth of texts (the collection encodes a write's batch in slices of 1,024).
LONG = [f"{'word ' * 60}{i}" for i in range(1100)]


def test_one_truncation_warning_per_write_with_the_count(make: Engines, caplog: pytest.LogCaptureFixture) -> None:
    coll = make.open(testing.tiny_encoder(), encode_batch_size=8)
    with caplog.at_level(logging.WARNING):
        coll.upsert_texts([*LONG, "short"])
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("1100 texts of this write") and "max_seq_length=32" in warnings[0]


def test_a_progress_bar_when_asked_or_at_info(
    make: Engines, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: a bar (elsewhere log lines, issue 64)
    coll = make.open(testing.tiny_encoder())
    coll.upsert_texts(LONG[:40], show_progress_bar=True)
    assert "Upserting" in capsys.readouterr().err
    coll.upsert_texts(LONG[40:80])  # None: logging at WARNING, as in a script that sets none
    assert "Upserting" not in capsys.readouterr().err
    logging.getLogger("sbert_qdrant.collection").setLevel(logging.INFO)
    try:
        coll.upsert_texts(LONG[80:120])
    finally:
        logging.getLogger("sbert_qdrant.collection").setLevel(logging.NOTSET)
    assert "Upserting" in capsys.readouterr().err
