"""Ctrl-C on a shared MCP server with agents still connected: seconds from SIGINT to the process's exit, median of
``--runs`` fresh servers (target: within 1 s, idle), ours beside mcp-server-qdrant 0.8.1 (its fastmcp 2.7 under
uvicorn) when ``--anchor-python`` names a venv that has it.

Each run starts a server over streamable HTTP on a free localhost port, connects ``--clients`` clients (each one
initializes a session, which opens its event stream, and stores and finds one note, so that the model is loaded and
the store open), keeps them connected, sends SIGINT and waits for the exit.

    python benchmarks/mcp_shutdown.py [--runs 5] [--clients 2]
        [--anchor-python VENV/bin/python --anchor-model benchmarks/peers/.cache/<model>/fastembed]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mcp
from _data import cpu_summary

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def listening(port: int, process: subprocess.Popen[bytes], limit: float = 300.0) -> None:
    """Wait until the server accepts connections on ``port`` (or fail if it exits first)."""
    ends = time.monotonic() + limit
    while time.monotonic() < ends:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before it listened")
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no server on port {port} after {limit} s")


async def one_run(command: list[str], env: dict[str, str], port: int, clients: int) -> float:
    """Seconds from SIGINT to the exit of a server with ``clients`` sessions open."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        await listening(port, process)
        async with contextlib.AsyncExitStack() as stack:
            sessions = [
                await stack.enter_async_context(mcp.Client(f"http://127.0.0.1:{port}/mcp")) for _ in range(clients)
            ]
            for i, session in enumerate(sessions):
                stored = await session.call_tool("qdrant-store", {"information": f"note {i}: the boiler is serviced"})
                assert not stored.is_error, stored.content
                found = await session.call_tool("qdrant-find", {"query": "boiler"})
                assert not found.is_error, found.content
            sent = time.monotonic()
            process.send_signal(signal.SIGINT)
            await asyncio.to_thread(process.wait, 60)
            took = time.monotonic() - sent
            # the clients are still "connected": leaving the stack closes them on a server that is gone
            with contextlib.suppress(BaseException):
                await stack.aclose()
    finally:
        if process.poll() is None:
            process.kill()
        err = process.stderr.read().decode() if process.stderr else ""
    if process.returncode not in (0, -signal.SIGINT, 130):
        raise RuntimeError(f"the server exited with {process.returncode}: {err[-2000:]}")
    return took


def runs_of(name: str, command: list[str], env: dict[str, str], runs: int, clients: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        port = free_port()
        seconds.append(
            asyncio.run(
                one_run(command, {**env, "FASTMCP_PORT": str(port), "FASTMCP_SERVER_PORT": str(port)}, port, clients)
            )
        )
    print(
        f"{name:<28} median {statistics.median(seconds):.2f} s  (runs: {', '.join(f'{s:.2f}' for s in seconds)})",
        flush=True,
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh servers (the median is reported)")
    parser.add_argument("--clients", type=int, default=2, help="sessions connected when Ctrl-C comes")
    parser.add_argument("--anchor-python", help="the interpreter of a venv with mcp-server-qdrant==0.8.1")
    parser.add_argument("--anchor-model", type=Path, help="the fastembed/ folder of the all-MiniLM-L6-v2 export")
    args = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # clients left connected say they could not end sessions
    print(cpu_summary())
    print(f"Ctrl-C with {args.clients} clients connected, streamable HTTP, seconds to exit (target: <= 1 s median)")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SBERT_QDRANT_LOCATION": str(Path(tmp) / "ours"), "COLLECTION_NAME": "notes"}
        ours = [sys.executable, "-m", "sbert_qdrant.integrations.mcp", "--transport", "streamable-http"]
        median = statistics.median(runs_of("sbert-qdrant (Edge)", ours, env, args.runs, args.clients))
        local = {**env, "QDRANT_LOCAL_PATH": str(Path(tmp) / "local")}
        del local["SBERT_QDRANT_LOCATION"]
        runs_of("sbert-qdrant (local folder)", ours, local, args.runs, args.clients)
        if args.anchor_python and args.anchor_model:
            anchor = [args.anchor_python, str(HERE / "peers" / "mcp_anchor.py"), str(args.anchor_model), "--http"]
            theirs = {**local, "QDRANT_LOCAL_PATH": str(Path(tmp) / "anchor")}
            runs_of("mcp-server-qdrant 0.8.1", anchor, theirs, args.runs, args.clients)
    print(f"verdict: ours {median:.2f} s, {'met' if median <= 1.0 else 'missed'} (<= 1 s)")


if __name__ == "__main__":
    main()
