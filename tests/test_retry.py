"""The retry policy on the remote path, with injected faults; settings keep secrets out of reprs.

No Qdrant server runs here, so faults are injected two ways, each named for what it is:
``sbert_qdrant.testing.FaultInjectingClient`` wraps a real in-memory qdrant-client engine (sync or async) and raises
the exceptions qdrant-client raises for network faults before passing calls through; ``scripted_transport`` is an
httpx transport standing in for the network (a mock peer) that answers qdrant-client's real HTTP stack with faults,
then with a valid reply. The collection tests run on both flavours (sync, async).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from child import run_child
from flavours import FLAVOURS, Blocking
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from sbert_qdrant import (
    AsyncTextCollection,
    PartialWriteError,
    RetryPolicy,
    SentenceEncoder,
    Settings,
    StoreError,
    StoreUnavailableError,
    TextCollection,
)
from sbert_qdrant.records import text_id
from sbert_qdrant.store import AsyncClientStore, ClientStore
from sbert_qdrant.store.retry import is_transient, retry_after_seconds
from sbert_qdrant.testing import FaultInjectingClient

FAST = RetryPolicy(attempts=5, max_seconds=10, initial_backoff=0.001, max_backoff=0.01)


def _status(code: int, headers: dict[str, str] | None = None) -> UnexpectedResponse:
    return UnexpectedResponse(code, "fault", b'{"status":{"error":"injected"}}', httpx.Headers(headers or {}))


def _connection_refused() -> ResponseHandlingException:
    return ResponseHandlingException(httpx.ConnectError("connection refused"))


@pytest.fixture(params=FLAVOURS)
def faulty(request: pytest.FixtureRequest, tiny_encoder: SentenceEncoder) -> Iterator[Callable[..., Any]]:
    """Builds (collection, fault-injecting client) of one flavour over a real in-memory engine."""
    loop = asyncio.new_event_loop()

    def build(faults: dict[str, list[Exception | None]]) -> tuple[Any, FaultInjectingClient]:
        if request.param == "sync":
            client = FaultInjectingClient(QdrantClient(":memory:"), faults)
            store = ClientStore(client, FAST, close_client=False)  # type: ignore[arg-type]
            return TextCollection("faq", tiny_encoder, store=store), client
        client = FaultInjectingClient(AsyncQdrantClient(location=":memory:"), faults)
        async_store = AsyncClientStore(client, FAST, close_client=False)  # type: ignore[arg-type]
        return Blocking(AsyncTextCollection("faq", tiny_encoder, store=async_store), loop), client

    yield build
    loop.close()


def test_writes_and_searches_survive_transient_faults(
    faulty: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    coll, client = faulty(
        {
            "upsert": [_connection_refused(), _status(503), ResourceExhaustedResponse("slow down", "0")],
            "query_batch_points": [ResponseHandlingException(httpx.ReadTimeout("timed out")), _status(502)],
        }
    )
    with caplog.at_level(logging.WARNING, logger="sbert_qdrant"):
        ids = coll.upsert_texts(["one question", "another question"])
        hits = coll.search_text("one question", limit=1)
    assert client.calls["upsert"] == 4 and client.calls["query_batch_points"] == 3
    assert coll.count() == 2 and hits[0].id == ids[0]  # retried writes duplicated nothing
    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 5 and all(r.levelno == logging.WARNING for r in retries)


@pytest.mark.parametrize("code", [400, 401, 403, 404])
def test_permanent_faults_fail_at_once(faulty: Callable[..., Any], code: int) -> None:
    coll, client = faulty({"upsert": [_status(code)]})
    with pytest.raises(StoreError, match=f"HTTP {code}"):
        coll.upsert_texts(["a question"])
    assert client.calls["upsert"] == 1


def test_the_budget_is_bounded_in_attempts(faulty: Callable[..., Any]) -> None:
    coll, client = faulty({"count": [_status(503) for _ in range(10)]})
    coll.upsert_texts(["a question"])
    with pytest.raises(StoreUnavailableError, match="failed 5 times"):
        coll.count()
    assert client.calls["count"] == 5


def test_retry_after_is_honoured_and_capped_by_the_budget() -> None:
    assert retry_after_seconds(_status(429, {"Retry-After": "3"})) == 3.0
    assert retry_after_seconds(ResourceExhaustedResponse("x", "7")) == 7.0
    assert retry_after_seconds(_status(503)) is None

    def busy_for(seconds: str) -> Callable[[], None]:
        def call() -> None:
            raise _status(429, {"Retry-After": seconds})

        return call

    waits: list[float] = []
    with pytest.raises(StoreUnavailableError, match="failed 3 times"):
        RetryPolicy(attempts=3, max_seconds=10, sleep=waits.append).call("probe", busy_for("1"))
    assert waits == [1.0, 1.0]  # the server's hint, not our (much shorter) backoff
    waits.clear()
    with pytest.raises(StoreUnavailableError, match="failed 1 times"):
        RetryPolicy(attempts=3, max_seconds=2, sleep=waits.append).call("probe", busy_for("5"))
    assert waits == []  # waiting 5 s would cross the 2 s budget: give up at once


def test_transient_classification() -> None:
    assert is_transient(_connection_refused()) and is_transient(_status(500)) and is_transient(_status(429))
    assert not is_transient(_status(400)) and not is_transient(_status(404)) and not is_transient(ValueError("x"))


def scripted_transport(
    script: list[Callable[[httpx.Request], httpx.Response]],
) -> tuple[httpx.MockTransport, list[str]]:
    """An httpx transport (a mock network peer) that plays ``script`` then keeps answering with its last step."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return script[min(len(seen), len(script)) - 1](request)

    return httpx.MockTransport(handle), seen


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _exists_reply(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"result": {"exists": False}, "status": "ok", "time": 0.0})


def test_real_http_stack_faults_are_retried() -> None:
    transport, seen = scripted_transport(
        [
            _refuse,
            lambda r: httpx.Response(503, json={"status": {"error": "busy"}}),
            lambda r: httpx.Response(429, headers={"Retry-After": "0"}, json={"status": {"error": "slow"}}),
            _exists_reply,
        ]
    )
    client = QdrantClient(url="http://qdrant.test:6333", transport=transport, check_compatibility=False)
    assert ClientStore(client, FAST).describe("faq") is None
    assert seen == ["/collections/faq/exists"] * 4
    transport, seen = scripted_transport([lambda r: httpx.Response(403, json={"status": {"error": "forbidden"}})])
    client = QdrantClient(url="http://qdrant.test:6333", transport=transport, check_compatibility=False)
    with pytest.raises(StoreError, match="QDRANT_API_KEY"):
        ClientStore(client, FAST).describe("faq")
    assert len(seen) == 1


def test_settings_keep_secrets_out_of_reprs(monkeypatch: pytest.MonkeyPatch, tiny_encoder: SentenceEncoder) -> None:
    monkeypatch.setenv("QDRANT_URL", "https://admin:hunter2@cloud.example:6333")
    monkeypatch.setenv("QDRANT_API_KEY", "sk-very-secret")
    monkeypatch.setenv("SBERT_QDRANT_RETRY_ATTEMPTS", "3")
    settings = Settings()
    assert settings.qdrant_api_key is not None and settings.qdrant_api_key.get_secret_value() == "sk-very-secret"
    assert settings.retry_attempts == 3 and settings.safe_url == "https://***@cloud.example:6333"
    for text in (repr(settings), str(settings)):
        assert "sk-very-secret" not in text and "hunter2" not in text
    coll = TextCollection("faq", tiny_encoder, client=QdrantClient(":memory:"), settings=settings)
    assert "sk-very-secret" not in repr(coll)


def test_cli_errors_and_logs_never_show_secrets(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "QDRANT_URL": "http://admin:hunter2@127.0.0.1:9",  # nothing listens: every attempt is refused
        "QDRANT_API_KEY": "sk-very-secret",
        "SBERT_QDRANT_RETRY_ATTEMPTS": "2",
    }
    result = run_child(
        [sys.executable, "-m", "sbert_qdrant", "-v", "search", "hello", "--device", "cpu", "--no-progress"],
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "failed 2 times with transient faults" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout and "sk-very-secret" not in result.stderr + result.stdout


def test_a_batch_failing_for_good_reports_what_was_written(faulty: Callable[..., Any]) -> None:
    texts = [f"question number {i}" for i in range(10)]
    # the first call writes one point; then two batches land and the third fails past the retry budget
    coll, _ = faulty({"upsert": [None, None, None, *[_status(503)] * 10]})
    coll.upsert_texts(texts[:1])
    with pytest.raises(PartialWriteError, match="stopped after storing 6 records") as caught:
        coll.upsert_texts(texts, batch_size=3)
    stored = {t.id for t in coll.get([text_id(t) for t in texts])}
    assert set(caught.value.written_ids) <= stored and not set(caught.value.unwritten_ids) & stored
    assert len(caught.value.written_ids) == 6 and len(caught.value.unwritten_ids) == 4
