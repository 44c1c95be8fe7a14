"""The collection behaviour suite against a real Qdrant server (``docker compose up -d``), when QDRANT_URL is set.

QDRANT_URL=http://localhost:6333 python -m pytest tests/test_server.py
QDRANT_CLUSTER_URL=http://localhost:6433 ...   # also the sharded, replicated case on the 3-node profile
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from child import run_child
from flavours import FLAVOURS, Engines
from test_bulk import test_a_bulk_load_stores_what_a_plain_one_does  # noqa: F401  (re-run here)
from test_collection import (  # noqa: F401  (re-run here against the server)
    test_a_uuid_id_is_its_own_point_id,
    test_bad_input_writes_nothing,
    test_duplicates_calibration_and_mining,
    test_existing_collection_is_checked_never_replaced,
    test_filters_work_the_same_on_every_engine,
    test_get_returns_unit_vectors_in_the_asked_order,
    test_identical_texts_in_one_call_are_stored_once,
    test_reads_of_a_missing_collection_fail_clearly,
    test_records_stream_from_an_iterable,
    test_search_finds_paraphrases_with_typed_hits,
    test_skip_leaves_stored_points_alone_and_encodes_only_new_ones,
    test_upsert_is_idempotent_and_ids_are_deterministic,
    test_your_ids_are_the_ids_everywhere,
)

from sbert_qdrant import RetryPolicy, SentenceEncoder, TextCollection

URL = os.environ.get("QDRANT_URL")
pytestmark = pytest.mark.skipif(
    not URL, reason="QDRANT_URL is not set; run `docker compose up -d` and export QDRANT_URL=http://localhost:6333"
)


@pytest.fixture(params=FLAVOURS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engines]:
    """Collections of one flavour on the server under a per-test prefix, dropped afterwards."""
    engines = Engines(request.param, "server", tmp_path, url=URL)
    yield engines
    engines.close()


@pytest.mark.skipif(not os.environ.get("QDRANT_CLUSTER_URL"), reason="QDRANT_CLUSTER_URL is not set")
def test_sharded_replicated_collection_on_the_cluster(tiny_encoder: SentenceEncoder) -> None:
    name = f"sbq_cluster_{uuid.uuid4().hex[:8]}"
    url = os.environ["QDRANT_CLUSTER_URL"]
    with TextCollection(name, tiny_encoder, url=url, shard_number=3, replication_factor=2) as coll:
        ids = coll.upsert_texts([f"question number {i}" for i in range(300)])
        coll.optimize()
        assert coll.count() == 300 and coll.search_text("question number 7", limit=1)[0].id == ids[7]
        coll.delete_collection()


@pytest.mark.skipif(
    not os.environ.get("SBERT_QDRANT_TEST_RESTART"),
    reason="set SBERT_QDRANT_TEST_RESTART=1 (with QDRANT_URL pointing at `docker compose up -d`) to restart the server",
)
def test_ingestion_survives_a_server_restart(tiny_encoder: SentenceEncoder) -> None:
    name = f"sbq_restart_{uuid.uuid4().hex[:8]}"
    texts = [f"question number {i} about topic {i % 13}" for i in range(20_000)]
    patient = RetryPolicy(attempts=30, max_seconds=120, initial_backoff=0.5, max_backoff=5)
    with TextCollection(name, tiny_encoder, url=URL, retry=patient) as coll:
        coll.upsert_texts(texts[:100])
        writer = threading.Thread(target=lambda: coll.upsert_texts(texts, batch_size=100))
        writer.start()
        time.sleep(1.0)
        compose = Path(__file__).parent.parent / "docker-compose.yml"
        restart = run_child(["docker", "compose", "-f", str(compose), "restart", "qdrant"])
        assert restart.returncode == 0, restart.stderr
        writer.join(timeout=600)
        assert not writer.is_alive() and coll.count() == len(texts)
        coll.delete_collection()


def test_a_bulk_load_pauses_the_servers_indexing_and_restores_it(tiny_encoder: SentenceEncoder) -> None:
    from qdrant_client import QdrantClient

    name = f"sbq_test_bulk_{uuid.uuid4().hex[:8]}"
    client = QdrantClient(url=URL)
    try:
        with TextCollection(name, tiny_encoder, url=URL) as coll:
            coll.upsert_texts(["first"])
            before = client.get_collection(name).config.optimizer_config.indexing_threshold
            result = coll.upsert_texts([f"text {i}" for i in range(3000)], batch_size=500, bulk=True)
            assert result.written == 3000 and coll.count() == 3001
            info = client.get_collection(name)
            assert info.config.optimizer_config.indexing_threshold == before
            assert info.status == "green"
    finally:
        client.delete_collection(name)
        client.close()
