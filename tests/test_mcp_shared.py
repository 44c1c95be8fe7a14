"""Several agents, one store: a store held by another process is a tool error that says what to do, and one shared
server over streamable HTTP (or SSE; a real server in a child process, on a free localhost port) serves two
clients that store and find at the same time."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp
import pytest
from child import Child, run_child
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from sbert_qdrant.integrations.mcp import McpSettings, create_server
from sbert_qdrant.testing import tiny_encoder

_HOLD = textwrap.dedent(
    """
    import sys, time
    kind, where = sys.argv[1], sys.argv[2]
    if kind == "edge":
        from sbert_qdrant import TextCollection
        from sbert_qdrant.testing import tiny_encoder
        TextCollection("notes", tiny_encoder(), location=where).upsert_texts(["held"])
    else:
        from qdrant_client import QdrantClient
        client = QdrantClient(path=where)
    print("holding", flush=True)
    time.sleep(3600)  # until the test kills it
    """
)


@pytest.mark.parametrize("kind", ["edge", "local"])
async def test_a_store_held_by_another_process_says_to_share_one_server(tmp_path: Path, kind: str) -> None:
    where = str(tmp_path / "store")
    settings = McpSettings(location=where) if kind == "edge" else McpSettings(local_path=where)
    with Child([sys.executable, "-c", _HOLD, kind, where]) as holder:
        holder.wait_for("holding")
        async with mcp.Client(create_server(settings, encoder=tiny_encoder())) as client:
            result = await client.call_tool("qdrant-count", {"collection_name": "notes"})
    assert result.is_error
    message = result.content[0].text
    assert "open in another process" in message and "--transport streamable-http" in message, message
    assert "close()" not in message and "TextCollection" not in message


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def connect(url: str) -> mcp.Client:
    """A client of the server at ``url``: streamable HTTP at /mcp, the older SSE transport at /sse."""
    return mcp.Client(sse_client(url), mode="legacy") if url.endswith("/sse") else mcp.Client(url)


async def agent(url: str, name: str, notes: list[str]) -> list[str]:
    """One agent: stores its notes, then finds each of them (and sees the other agent's too)."""
    async with connect(url) as client:
        for note in notes:
            result = await client.call_tool("qdrant-store", {"information": note, "metadata": {"agent": name}})
            assert not result.is_error, result.content[0].text
        found: list[str] = []
        for note in notes:
            result = await client.call_tool("qdrant-find", {"query": note})
            assert not result.is_error, result.content[0].text
            found.append(result.structured_content["entries"][0]["text"])
        return found


@pytest.mark.slow
@pytest.mark.parametrize(("transport", "path"), [("streamable-http", "mcp"), ("sse", "sse")])
async def test_two_clients_store_and_find_concurrently_on_one_shared_server(
    tmp_path: Path, transport: str, path: str
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "SBERT_QDRANT_LOCATION": str(tmp_path / "store"),
        "COLLECTION_NAME": "notes",
        "FASTMCP_PORT": str(port),
    }
    command = [sys.executable, "-m", "sbert_qdrant.integrations.mcp", "--transport", transport]
    notes: dict[str, list[Any]] = {
        "a": ["The boiler is serviced every October.", "Our cat's vet is Dr. Rossi on Elm Street."],
        "b": ["The train to Milan leaves at 7:40 from platform 9.", "Grandma's recipe uses two spoons of honey."],
    }
    with Child(command, env=env) as server:
        server.wait_for(f"http://127.0.0.1:{port}", stream="stderr")  # uvicorn: listening
        url = f"http://127.0.0.1:{port}/{path}"
        found = await asyncio.gather(*(agent(url, name, texts) for name, texts in notes.items()))
        async with connect(url) as client:
            counted = await client.call_tool("qdrant-count", {})
    assert found == [notes["a"], notes["b"]]
    assert counted.structured_content["count"] == 4


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}


async def test_a_token_is_asked_over_http_and_no_address_beyond_loopback_without_one(tmp_path: Path) -> None:
    """With ``SBERT_QDRANT_MCP_TOKEN`` set, a request without ``Authorization: Bearer <token>`` (or with another
    token) is refused with 401 and one with it answered; without a token the server will not listen beyond
    loopback, and says how to set one; the Host check stays on; Ctrl-C ends it at once."""
    port = free_port()
    env = {
        **os.environ,
        "SBERT_QDRANT_LOCATION": str(tmp_path / "store"),
        "FASTMCP_PORT": str(port),
        "SBERT_QDRANT_MCP_TOKEN": "s3cret-token",
        "SBERT_QDRANT_PRELOAD": "false",
    }
    command = [sys.executable, "-m", "sbert_qdrant.integrations.mcp", "--transport", "streamable-http"]
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    url = f"http://127.0.0.1:{port}/mcp"
    with Child(command, env=env) as server:
        server.wait_for(f"http://127.0.0.1:{port}", stream="stderr")
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.post(url, json=_INITIALIZE, headers=headers)).status_code == 401
            wrong = {**headers, "Authorization": "Bearer s3cret-tokeN"}
            assert (await http.post(url, json=_INITIALIZE, headers=wrong)).status_code == 401
            right = {**headers, "Authorization": "Bearer s3cret-token"}
            answered = await http.post(url, json=_INITIALIZE, headers=right)
            assert answered.status_code == 200 and "sbert-qdrant" in answered.text
            forged = await http.post(url, json=_INITIALIZE, headers={**right, "Host": "evil.example"})
            assert forged.status_code == 421
            sent = time.monotonic()
            server.process.send_signal(signal.SIGINT)
            ended = await asyncio.to_thread(server.finish)
        assert ended.returncode == 0 and time.monotonic() - sent < 5, ended.stderr[-2000:]  # Ctrl-C: out at once
    del env["SBERT_QDRANT_MCP_TOKEN"]
    refused = run_child([*command, "--host", "0.0.0.0"], env=env)
    assert refused.returncode != 0
    assert "SBERT_QDRANT_MCP_TOKEN" in refused.stderr and "--token-file" in refused.stderr, refused.stderr


def test_the_token_file_holds_the_token_and_an_unusable_one_is_named(tmp_path: Path) -> None:
    from sbert_qdrant import InvalidArgumentError
    from sbert_qdrant.integrations.mcp.access import read_token_file

    (tmp_path / "token").write_text("s3cret-token\n")
    assert read_token_file(str(tmp_path / "token")).get_secret_value() == "s3cret-token"
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InvalidArgumentError, match=r"--token-file '.*empty' is empty"):
        read_token_file(str(tmp_path / "empty"))
    with pytest.raises(InvalidArgumentError, match="cannot be read"):
        read_token_file(str(tmp_path / "missing"))


async def test_the_read_only_token_finds_and_counts_and_may_not_write(tmp_path: Path) -> None:
    """Over streamable HTTP, a client with ``SBERT_QDRANT_MCP_READ_TOKEN`` counts, and its delete is refused with a
    tool error that says why; one with ``SBERT_QDRANT_MCP_TOKEN`` deletes (neither waits for the model)."""
    port = free_port()
    env = {
        **os.environ,
        "SBERT_QDRANT_LOCATION": str(tmp_path / "store"),
        "COLLECTION_NAME": "notes",
        "FASTMCP_PORT": str(port),
        "SBERT_QDRANT_MCP_TOKEN": "write-token",
        "SBERT_QDRANT_MCP_READ_TOKEN": "read-token",
        "SBERT_QDRANT_PRELOAD": "false",
    }
    command = [sys.executable, "-m", "sbert_qdrant.integrations.mcp", "--transport", "streamable-http"]
    url = f"http://127.0.0.1:{port}/mcp"

    def client(token: str) -> mcp.Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        return mcp.Client(streamable_http_client(url, http_client=http))

    with Child(command, env=env) as server:
        server.wait_for(f"http://127.0.0.1:{port}", stream="stderr")
        async with client("read-token") as reader:
            assert (await reader.call_tool("qdrant-count", {})).structured_content["count"] == 0
            refused = await reader.call_tool("qdrant-delete", {"ids": ["a"]})
        async with client("write-token") as writer:
            deleted = await writer.call_tool("qdrant-delete", {"ids": ["a"]})
    assert refused.is_error and "read-only" in refused.content[0].text, refused.content[0].text
    assert "SBERT_QDRANT_MCP_TOKEN" in refused.content[0].text
    assert not deleted.is_error and deleted.structured_content["deleted"] == 0, deleted.content[0].text


def test_the_read_token_must_differ_from_the_other() -> None:
    with pytest.raises(ValueError, match="READ_TOKEN equals"):
        McpSettings(mcp_token="same", mcp_read_token="same")
