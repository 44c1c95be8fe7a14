"""SIGKILL during ``sbert-qdrant index`` on embedded Qdrant Edge, then the same command again: every record is
stored exactly once, with the vector and payload of a clean run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from child import run_child

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.store import EdgeStore
from sbert_qdrant.store.calls import Scan

HARNESS = Path(__file__).parent / "crash_harness.py"
RECORDS = 2000
KILLS = 8  # two of them resuming runs (--on-conflict skip); more kill points prove no more


@pytest.mark.long
def test_killed_ingestion_resumes_without_loss_or_duplicates(tmp_path: Path, tiny_encoder: SentenceEncoder) -> None:
    model = tmp_path / "model"
    tiny_encoder.save(model)
    records = tmp_path / "records.jsonl"
    with records.open("w", encoding="utf-8") as f:
        for i in range(RECORDS):
            f.write(json.dumps({"id": i, "text": f"record {i} on topic {i % 23}: {'word ' * (i % 7)}", "n": i}) + "\n")
    work = tmp_path / "work"
    result = run_child(  # the harness reports each landed write: bounded by progress, not by the clock
        [sys.executable, str(HARNESS), str(records), str(model), str(work), "--kills", str(KILLS), "--batch-size", "25"]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["final"] == 0
    killed = [k for k in report["kills"] if k["outcome"] == -9]
    assert len(killed) == KILLS  # each run killed mid-way, after some of its writes had landed
    overwrites = sorted({k["after_writes"] for k in killed if k["on_conflict"] == "overwrite"})
    assert len(overwrites) >= 6, overwrites  # at points spread over the load, from its first write to its last part
    assert overwrites[0] <= report["batches"] // 8 and overwrites[-1] >= report["batches"] * 2 // 3, overwrites

    with (
        TextCollection("crash", tiny_encoder, location=work / "clean") as clean,
        TextCollection("crash", tiny_encoder, location=work / "crashed") as crashed,
    ):
        assert clean.count() == crashed.count() == RECORDS
        keys = list(range(RECORDS))
        expected = {t.id: t for t in clean.get(keys, with_vectors=True)}
        got = {t.id: t for t in crashed.get(keys, with_vectors=True)}
        assert set(got) == set(expected) == set(keys)
        for key in keys:
            assert (got[key].text, got[key].payload) == (expected[key].text, expected[key].payload)
            np.testing.assert_allclose(got[key].vector, expected[key].vector, atol=1e-6)  # type: ignore[arg-type]
    store = EdgeStore(work / "crashed")
    ids = [p.id for page in store.scroll("crash", Scan("text", batch_size=1000)) for p in page]
    store.close()
    assert len(ids) == len(set(ids)) == RECORDS
