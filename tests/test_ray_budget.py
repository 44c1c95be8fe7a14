"""The workers' write path (``upsert_dataset(..., url=)``) with the actors holding every CPU and a small object store:
the write tasks ask no CPU, so they drain the actors' output as it comes and the run ends (it used to hang once the
output filled Ray Data's object-store budget). Its own Ray (small object store), in a subprocess: the other Ray tests
share one Ray for the whole run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="needs the ray extra: pip install 'sbert-qdrant[ray]'")

#: The run: 2 actors x 1 CPU on a 2-CPU Ray with Ray's smallest object store (75 MiB, Ray Data's budget about half),
#: 3,000 rows of ~24 kB each (a column not stored) through the encoder: ~72 MB of output, more than the budget. The
#: workers' collections are embedded Edge folders, one per write task (no server here), opened by the package's own
#: write path through its server seam (``open_on_server``).
_SCRIPT = """
import json, sys, uuid
from functools import partial
from pathlib import Path
import ray
from sbert_qdrant import SentenceEncoder, TextCollection, testing
from sbert_qdrant.integrations import ray as sbert_ray
from sbert_qdrant.integrations.ray import _upsert

root = Path(sys.argv[1])
ray.init(num_cpus=2, object_store_memory=75 * 1024 * 1024, include_dashboard=False, log_to_driver=False)
testing.tiny_encoder().save(root / "tiny")
encoder = SentenceEncoder.load(root / "tiny", device="cpu", precision="fp32")

def open_edge(target):  # each write task: a folder of its own (Edge allows one process a folder)
    folder = str(root / "parts" / uuid.uuid4().hex)
    return TextCollection(target.name, target.encoder, location=folder, layout=target.layout)

_upsert.open_on_server = open_edge
rows = [{"qid": f"q{i}", "text": f"row {i} of the budget test", "pad": "x" * 24_000} for i in range(3000)]
with TextCollection("budget", encoder, location=str(root / "driver")) as coll:
    result = sbert_ray.upsert_dataset(
        ray.data.from_items(rows, override_num_blocks=30), coll, id_column="qid", payload_columns=[],
        model=str(root / "tiny"), precision="fp32", actors=2, batch_size=100, url="http://workers-write-here",
    )
counts = []
for part in sorted((root / "parts").iterdir()):
    with TextCollection("budget", encoder, location=str(part)) as written:
        counts.append(written.count())
print(json.dumps({"ids": list(result) == [r["qid"] for r in rows], "written": result.written, "stored": sum(counts)}))
"""


def test_the_workers_write_while_the_actors_hold_every_cpu_with_a_small_object_store(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=400
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the run made no end in 400 s: the writes starved (no CPU left them by the actors)")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"ids": True, "written": 3000, "stored": 3000}
