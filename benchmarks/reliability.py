"""Reliability report: crash safety, fault tolerance and bad-input refusal, each counted on this machine in one run.

1. SIGKILL ``sbert-qdrant index`` on embedded Qdrant Edge at --kills points (tests/crash_harness.py), re-run it,
   and compare with a clean run: records lost, duplicated, or stored with another vector or payload.
2. --faults random transient faults (connection refused/reset, read timeout, 429 with Retry-After, 502, 503) injected
   into qdrant-client calls of upserts and searches, within the retry budget; then permanent faults (400, 401,
   403, 404). Counts operations that failed although they should have succeeded, and the reverse.
3. Bad inputs against a collection holding data: counts inputs accepted, and collections changed, wrongly.

    python benchmarks/reliability.py [--kills 30] [--faults 200]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from qdrant_client import QdrantClient
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from sbert_qdrant import RetryPolicy, SbertQdrantError, SentenceEncoder, TextCollection
from sbert_qdrant.store import ClientStore, EdgeStore
from sbert_qdrant.store.calls import Scan
from sbert_qdrant.testing import FaultInjectingClient, tiny_encoder

ROOT = Path(__file__).parent.parent


def crash_safety(kills: int, records: int, work: Path) -> None:
    encoder = tiny_encoder()
    encoder.save(work / "model")
    source = work / "records.jsonl"
    with source.open("w", encoding="utf-8") as f:
        for i in range(records):
            f.write(json.dumps({"id": i, "text": f"record {i} on topic {i % 23}: {'word ' * (i % 7)}"}) + "\n")
    start = time.perf_counter()
    harness = ROOT / "tests" / "crash_harness.py"
    out = subprocess.run(
        [sys.executable, str(harness), str(source), str(work / "model"), str(work), "--kills", str(kills)],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    killed = [k for k in report["kills"] if k["outcome"] == -9]
    points = sorted({k["after_writes"] for k in killed})
    with (
        TextCollection("crash", encoder, location=work / "clean") as clean,
        TextCollection("crash", encoder, location=work / "crashed") as crashed,
    ):
        keys = list(range(records))
        expected = {t.id: t for t in clean.get(keys, with_vectors=True)}
        got = {t.id: t for t in crashed.get(keys, with_vectors=True)}
    wrong = sum(
        not np.allclose(got[k].vector, expected[k].vector, atol=1e-6)  # type: ignore[arg-type]
        or (got[k].text, got[k].payload) != (expected[k].text, expected[k].payload)
        for k in got
    )
    store = EdgeStore(work / "crashed")  # every point as stored, to count duplicates
    ids = [p.id for page in store.scroll("crash", Scan("text", batch_size=1000)) for p in page]
    store.close()
    print(f"\n== 1. crash safety: {records} records, sbert-qdrant index on Qdrant Edge, SIGKILL then re-run ==")
    spread = f"after {len(points)} distinct write counts from {points[0]} to {points[-1]}" if points else "none"
    print(
        f"kill points tried: {len(report['kills'])}, killed mid-run: {len(killed)} "
        f"({spread} of {report['batches']} batches)"
    )
    print(
        f"records lost: {records - len(got)}   duplicated: {len(ids) - len(set(ids))}   wrong vector/payload: {wrong}"
    )
    print(f"({time.perf_counter() - start:.0f} s; a clean run took {report['clean_seconds']:.1f} s)")


def _transient(rng: random.Random) -> Exception:
    kind = rng.choice(["refused", "reset", "timeout", "429", "502", "503"])
    if kind == "refused":
        return ResponseHandlingException(httpx.ConnectError("connection refused"))
    if kind == "reset":
        return ResponseHandlingException(httpx.RemoteProtocolError("connection reset by peer"))
    if kind == "timeout":
        return ResponseHandlingException(httpx.ReadTimeout("timed out"))
    if kind == "429":
        return ResourceExhaustedResponse("slow down", "0")
    return UnexpectedResponse(int(kind), "fault", b"", httpx.Headers())


def fault_tolerance(faults: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    policy = RetryPolicy(attempts=6, max_seconds=30, initial_backoff=0.001, max_backoff=0.01)
    client = FaultInjectingClient(QdrantClient(":memory:"))
    store = ClientStore(client, policy, close_client=False)  # type: ignore[arg-type]  # the test double, at the seam
    coll = TextCollection("faults", tiny_encoder(), store=store)
    injected = failed_wrongly = operations = 0
    texts = [f"question {i} about subject {i % 11}" for i in range(400)]
    coll.upsert_texts(texts[:8])  # the collection exists before faults start
    while injected < faults:
        operation = rng.choice(["upsert", "query_batch_points"])
        burst = [_transient(rng) for _ in range(rng.randint(0, policy.attempts - 1))]
        client.faults[operation] = burst
        injected += len(burst)
        operations += 1
        try:
            if operation == "upsert":
                batch = rng.sample(texts, 8)
                coll.upsert_texts(batch)
            else:
                coll.search_text(rng.choice(texts), limit=3)
        except SbertQdrantError:
            failed_wrongly += 1
    coll.upsert_texts(texts, on_conflict="skip")
    duplicates = coll.count() - len(texts)
    permanent_ok = 0
    for code in (400, 401, 403, 404):
        client.faults["count"] = [UnexpectedResponse(code, "fault", b"", httpx.Headers())]
        try:
            coll.count()
            permanent_ok += 1
        except SbertQdrantError:
            pass
    print(
        f"\n== 2. fault tolerance: qdrant-client calls with injected faults, retry budget {policy.attempts} attempts =="
    )
    print(f"transient faults injected: {injected} over {operations} operations")
    print(f"operations failed wrongly: {failed_wrongly}")
    print(f"points duplicated by retried writes: {duplicates}")
    print(f"permanent faults (400/401/403/404) injected: 4; operations that succeeded wrongly: {permanent_ok}")


def bad_inputs() -> None:
    encoder = tiny_encoder()
    client = QdrantClient(":memory:")
    coll = TextCollection("bad", encoder, client=client)
    kept = coll.upsert_texts(["kept one", "kept two"], payloads=[{"n": 1}, {"n": 2}])
    before = [(t.id, t.text, t.payload) for t in coll.get(kept)]
    cases = [
        lambda: coll.upsert_texts(None),  # type: ignore[arg-type]
        lambda: coll.upsert_texts("one string"),  # type: ignore[arg-type]
        lambda: coll.upsert_texts(["ok", None]),  # type: ignore[list-item]
        lambda: coll.upsert_texts(["ok", 42]),  # type: ignore[list-item]
        lambda: coll.upsert_texts(["ok", ""]),
        lambda: coll.upsert_texts(["ok", " \n\t"]),
        lambda: coll.upsert_texts(["ok", "bad \udc80 surrogate"]),
        lambda: coll.upsert_texts(["a", "b"], ids=[1]),
        lambda: coll.upsert_texts(["a", "b"], payloads=[{}]),
        lambda: coll.upsert_texts(["a", "b"], ids=[1, 1]),
        lambda: coll.upsert_texts(["a"], ids=[1.5]),
        lambda: coll.upsert_texts(["a"], ids=[None]),  # type: ignore[list-item]
        lambda: coll.upsert_texts(["a"], ids=[(1, 2)]),  # type: ignore[list-item]
        lambda: coll.upsert_texts(["a"], payloads=[{"x": object()}]),
        lambda: coll.upsert_texts(["a"], payloads=[{"x": float("nan")}]),
        lambda: coll.upsert_texts(["a"], payloads=[{"x": float("inf")}]),
        lambda: coll.upsert_texts(["a"], payloads=[{"x": 2**70}]),
        lambda: coll.upsert_texts(["a"], payloads=[{"text": "reserved"}]),
        lambda: coll.upsert_texts(["a"], payloads=[{"key": "reserved"}]),
        lambda: coll.upsert_texts(["a"], payloads=[{1: "non-str key"}]),
        lambda: coll.upsert_texts(["a"], payloads=["not a dict"]),  # type: ignore[list-item]
        lambda: coll.upsert_texts(["a", "a"], payloads=[{"v": 1}, {"v": 2}]),
        lambda: coll.upsert_texts(["a"], batch_size=0),
        lambda: coll.upsert_texts(["a"], on_conflict="merge"),  # type: ignore[arg-type]
        lambda: coll.search_text("x", limit=0),
        lambda: coll.search_text("x", limit=-1),
        lambda: coll.search_text("x", score_threshold=1.5),
        lambda: coll.search_text("x", score_threshold=-2.0),
        lambda: coll.search_text(""),
        lambda: coll.search_text("x", query_filter="topic = a"),  # type: ignore[arg-type]
        lambda: coll.delete_texts(),
        lambda: coll.get(ids="one id"),  # type: ignore[arg-type]
        lambda: TextCollection("bad", SentenceEncoder.load(device="cpu"), client=client).count(),
        lambda: TextCollection("bad", encoder, client=client, distance="dot").count(),
        lambda: TextCollection("../x", encoder, client=QdrantClient(":memory:")),
        lambda: TextCollection("", encoder, client=QdrantClient(":memory:")),
        lambda: TextCollection("missing", encoder, client=QdrantClient(":memory:")).search_text("x"),
    ]
    accepted = 0
    for case in cases:
        try:
            case()
            accepted += 1
        except (SbertQdrantError, ValueError):
            pass
    after = [(t.id, t.text, t.payload) for t in coll.get(kept)]
    print(f"\n== 3. bad input: {len(cases)} bad inputs tried against a collection holding 2 points ==")
    print(f"accepted wrongly: {accepted}   stored points changed: {int(after != before)}   count: {coll.count()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--faults", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        crash_safety(args.kills, args.records, Path(work))
    fault_tolerance(args.faults)
    bad_inputs()


if __name__ == "__main__":
    main()
