"""The MCP server as an agent meets it, over stdio, each figure beside its anchor, in one run on this machine.

1. Start-up: a fresh ``python -m sbert_qdrant.integrations.mcp`` per run (median of ``--runs``): seconds from spawn
   to the answer to ``initialize``, then to ``tools/list`` (target: < 1 s; clients give up after 10-30 s). Anchors:
   what the process imports before it can answer (a bare ``python``, ``import mcp.server.mcpserver``,
   ``import sbert_qdrant``), each timed in a fresh process.
2. The first ``qdrant-find``, sent right after ``tools/list`` (the model loads in the background from the start, so
   what is left of its load is included), vs a fresh process importing and loading the model (what a server that
   loads its model before answering, as mcp-server-qdrant does, makes the client wait for).
3. Steady state: ``qdrant-find`` p50/p95 over ``--queries`` real questions on ``--points`` real sentences in
   embedded Qdrant Edge (the second pass: the first warms the encoder for each query's length), vs ``search_text``
   in-process on the same collection and model, same passes (the difference: the protocol's cost).
4. The same finds on the other setups: a qdrant-client local folder in mcp-server-qdrant's layout (over stdio), and
   one shared server over streamable HTTP (Edge); beside them mcp-server-qdrant 0.8.1 itself on the same local
   folder, when ``--anchor-python`` names a venv's interpreter that has it (``benchmarks/peers/mcp_anchor.py``: its
   FastEmbed loads the same all-MiniLM-L6-v2 ONNX export from ``--anchor-model``, since its download is offline).

0. First answers (``--first-only``: this section alone), one run: a fresh server per figure, on the local folder of
   section 4, as an agent meets it (spawn, ``initialize``, ``tools/list``, one call): spawn -> the first
   ``qdrant-count`` (also with ``SBERT_QDRANT_PRELOAD=false``: what the background load costs it) and spawn ->
   the first ``qdrant-find``, ours beside mcp-server-qdrant's first find (it has no
   count, and loads its model before ``initialize``), with the targets (<= 2 s, <= 1.2x the anchor), and where a
   first find's time goes (each import and the model's load, in turn, in a fresh process).

    python benchmarks/mcp_startup.py --data ../shared/data [--points 2000] [--queries 50] [--runs 3] [--first-only]
        [--anchor-python VENV/bin/python --anchor-model benchmarks/peers/.cache/<model>/fastembed]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mcp
import numpy as np
from _data import cpu_summary, read_corpus
from mcp.client.stdio import stdio_client
from qdrant_client import QdrantClient, models

from sbert_qdrant.aio import AsyncTextCollection
from sbert_qdrant.collection import TextCollection
from sbert_qdrant.encoder import SentenceEncoder

COLLECTION = "bench"


def fresh_process_seconds(code: str, runs: int) -> float:
    """Median wall time of a fresh ``python -c code``."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


SERVER = [sys.executable, "-m", "sbert_qdrant.integrations.mcp"]


async def one_server(
    location: Path, queries: list[str], steady: bool, env: dict[str, str] | None = None, command: list[str] = SERVER
) -> dict[str, Any]:
    """Spawn the server, time initialize, tools/list, the first find and (``steady``) every query after it."""
    env = {**os.environ, "COLLECTION_NAME": COLLECTION, **(env or {"SBERT_QDRANT_LOCATION": str(location)})}
    params = mcp.StdioServerParameters(command=command[0], args=command[1:], env=env)
    figures: dict[str, Any] = {}
    with open(os.devnull, "w") as quiet:
        start = time.perf_counter()
        async with mcp.Client(stdio_client(params, errlog=quiet), mode="legacy", cache=None) as client:
            figures["initialize"] = time.perf_counter() - start
            tools = await client.list_tools()
            figures["tools/list"] = time.perf_counter() - start
            figures["tools"] = len(tools.tools)
            began = time.perf_counter()
            first = await client.call_tool("qdrant-find", {"query": queries[0]})
            figures["first find"] = time.perf_counter() - began
            if first.is_error:
                raise SystemExit(f"qdrant-find failed: {first.content[0].text}")
            latencies = []
            for timed in (False, True) if steady else ():  # a first pass warms the encoder for each query's length
                for query in queries[1:]:
                    began = time.perf_counter()
                    await client.call_tool("qdrant-find", {"query": query})
                    if timed:
                        latencies.append(time.perf_counter() - began)
            figures["latencies"] = latencies
    return figures


async def in_process(location: Path, queries: list[str]) -> list[float]:
    """search_text latencies in this process, on the collection the server used, through the same
    AsyncTextCollection the server calls."""
    encoder = SentenceEncoder.load()
    latencies = []
    async with AsyncTextCollection(COLLECTION, encoder, location=location) as collection:
        for timed in (False, True):  # the same passes as over stdio
            for query in queries[1:]:
                began = time.perf_counter()
                await collection.search_text(query)
                if timed:
                    latencies.append(time.perf_counter() - began)
    return latencies


async def finds(client: Any, queries: list[str]) -> list[float]:
    """Two passes of finds (the first warms up), the second timed."""
    latencies = []
    for timed in (False, True):
        for query in queries[1:]:
            began = time.perf_counter()
            result = await client.call_tool("qdrant-find", {"query": query})
            if result.is_error:
                raise SystemExit(f"qdrant-find failed: {result.content[0].text}")
            if timed:
                latencies.append(time.perf_counter() - began)
    return latencies


async def shared_server(location: Path, queries: list[str]) -> list[float]:
    """Finds through one shared server over streamable HTTP (a child process on a free port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "SBERT_QDRANT_LOCATION": str(location), "COLLECTION_NAME": COLLECTION}
    env["FASTMCP_PORT"], env["FASTMCP_LOG_LEVEL"] = str(port), "WARNING"
    server = subprocess.Popen([*SERVER, "--transport", "streamable-http"], env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # up to a minute for the server to listen
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        async with mcp.Client(f"http://127.0.0.1:{port}/mcp") as client:
            return await finds(client, queries)
    finally:
        server.terminate()
        server.wait(timeout=30)


async def first_answer(
    command: list[str], env: dict[str, str], tool: str, arguments: dict[str, Any]
) -> dict[str, float]:
    """One fresh server, as an agent meets it: seconds from spawn to ``initialize`` answered, ``tools/list``, and
    the answer to its first call, ``tool`` (checked not to be an error)."""
    params = mcp.StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, **env})
    with open(os.devnull, "w") as quiet:
        start = time.perf_counter()
        async with mcp.Client(stdio_client(params, errlog=quiet), mode="legacy", cache=None) as client:
            figures = {"initialize": time.perf_counter() - start}
            await client.list_tools()
            figures["tools/list"] = time.perf_counter() - start
            result = await client.call_tool(tool, arguments)
            figures[tool] = time.perf_counter() - start
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text}")
    return figures


#: Where a first find's time goes, in a fresh process, one step after the other (the server imports the first two
#: and ours before it answers ``initialize``; then the model's load and the collections' import run in two worker
#: threads from its start).
SPLIT = """
import time
start = last = time.perf_counter()
def lap(what):
    global last
    now = time.perf_counter()
    print(f"{what}\t{now - last:.3f}")
    last = now
import mcp.server.mcpserver; lap("import mcp.server.mcpserver (the SDK)")
import sbert_qdrant.integrations.mcp.server; lap("import the server's own modules (settings, tools)")
import qdrant_client; lap("import qdrant_client")
import sbert_qdrant.aio; lap("import the collections (sbert_qdrant.aio)")
from sbert_qdrant.encoder import EncoderSpec; from sbert_qdrant.integrations.mcp import McpSettings
encoder = EncoderSpec.of(McpSettings()).load_numpy(); lap("load the model on NumPy (tokenizers, safetensors, weights)")
encoder.encode_query(["where did I park the car?"]); lap("encode the first query")
print(f"total\t{time.perf_counter() - start:.3f}")
print(f"torch or transformers imported\t{len({'torch', 'transformers'} & set(__import__('sys').modules))}")
"""


def first_answers(local: Path, query: str, anchor: list[str] | None) -> None:
    """Section 0: the first answers of ours and the anchor on the same local folder, each from a fresh spawn."""
    env = {"QDRANT_LOCAL_PATH": str(local), "COLLECTION_NAME": COLLECTION}
    ours_count = asyncio.run(first_answer(SERVER, env, "qdrant-count", {}))
    alone = asyncio.run(first_answer(SERVER, {**env, "SBERT_QDRANT_PRELOAD": "false"}, "qdrant-count", {}))
    ours_find = asyncio.run(first_answer(SERVER, env, "qdrant-find", {"query": query}))
    theirs = None if anchor is None else asyncio.run(first_answer(anchor, env, "qdrant-find", {"query": query}))
    print("\n0. first answers, fresh server over stdio each, one run, same local folder (mcp-server-qdrant's layout)")
    print(f"   {'spawn ->':34s} {'sbert-qdrant':>12s} {'mcp-server-qdrant 0.8.1':>24s}")
    other = "-" if theirs is None else f"{theirs['initialize']:.2f} s"
    print(f"   {'initialize answered':34s} {ours_find['initialize']:10.2f} s {other:>24s}")
    print(f"   {'first qdrant-count answered':34s} {ours_count['qdrant-count']:10.2f} s {'(no count tool)':>24s}")
    print(f"   {'  the same, no model loading':34s} {alone['qdrant-count']:10.2f} s   (SBERT_QDRANT_PRELOAD=false)")
    other = "-" if theirs is None else f"{theirs['qdrant-find']:.2f} s"
    print(f"   {'first qdrant-find answered':34s} {ours_find['qdrant-find']:10.2f} s {other:>24s}")
    for what, seconds in (("count", ours_count["qdrant-count"]), ("find", ours_find["qdrant-find"])):
        verdict = f"   first {what}: {seconds:.2f} s, target <= 2 s: {'met' if seconds <= 2 else 'missed'}"
        if theirs is not None:
            ratio = seconds / theirs["qdrant-find"]
            verdict += f"; {ratio:.2f}x the anchor's first find, target <= 1.2x: {'met' if ratio <= 1.2 else 'missed'}"
        print(verdict)
    split = subprocess.run([sys.executable, "-c", SPLIT], check=True, capture_output=True, text=True).stdout
    print("   where a first find's time goes, a fresh process doing each step in turn:")
    for line in split.splitlines():
        what, seconds = line.split("\t")
        shown = seconds if what.startswith("torch") else f"{float(seconds):6.2f} s"
        print(f"     {what:62s} {shown}")


def alternating(local: Path, query: str, anchor: list[str], rounds: int, load: int) -> None:
    """Section 0b: first finds of ours and the anchor's, alternating ``rounds`` times from fresh spawns, idle and
    beside ``load`` CPU-bound processes (each a Python busy loop), so that both meet the same moment of the machine."""
    env = {"QDRANT_LOCAL_PATH": str(local), "COLLECTION_NAME": COLLECTION}
    burn = [sys.executable, "-c", "while True: pass"]
    for busy in (0, load):
        burners = [subprocess.Popen(burn) for _ in range(busy)]
        try:
            time.sleep(2 if busy else 0)  # the load established before the first spawn
            pairs = []
            for _ in range(rounds):
                ours = asyncio.run(first_answer(SERVER, env, "qdrant-find", {"query": query}))["qdrant-find"]
                theirs = asyncio.run(first_answer(anchor, env, "qdrant-find", {"query": query}))["qdrant-find"]
                pairs.append((ours, theirs))
            average = os.getloadavg()[0]
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
        shown = " | ".join(f"{o:.2f} / {t:.2f} s ({o / t:.2f}x)" for o, t in pairs)
        ours_median, theirs_median = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
        print(
            f"\n0b. first qdrant-find, ours / the anchor's, alternating, {busy} CPU-bound processes beside "
            f"(load average {average:.2f} at the end)"
        )
        print(f"   {shown}")
        print(
            f"   median {ours_median:.2f} / {theirs_median:.2f} s: {ours_median / theirs_median:.2f}x, target <= 1.0x"
        )


def write_anchor_layout(path: Path, texts: list[str], encoder: SentenceEncoder) -> None:
    """The sentences as mcp-server-qdrant writes memories: vector ``fast-all-minilm-l6-v2``, the text under
    ``document``, metadata nested, random ids (qdrant-client local mode)."""
    client = QdrantClient(path=str(path))
    name = "fast-all-minilm-l6-v2"
    client.create_collection(COLLECTION, vectors_config={name: models.VectorParams(size=384, distance="Cosine")})
    vectors = encoder.encode_document(texts, batch_size=64)
    points = [
        models.PointStruct(id=uuid.uuid4().hex, vector={name: v.tolist()}, payload={"document": t, "metadata": None})
        for t, v in zip(texts, vectors, strict=True)
    ]
    for start in range(0, len(points), 256):
        client.upsert(COLLECTION, points=points[start : start + 256])
    client.close()


def ms(values: list[float], q: float) -> str:
    return f"{1000 * float(np.quantile(values, q)):7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (quora, nli, stsb)")
    parser.add_argument("--points", type=int, default=2000, help="sentences in the collection")
    parser.add_argument("--queries", type=int, default=50, help="finds for the steady-state latency")
    parser.add_argument("--runs", type=int, default=3, help="server start-ups (medians reported)")
    parser.add_argument("--anchor-python", help="the interpreter of a venv with mcp-server-qdrant==0.8.1")
    parser.add_argument("--anchor-model", type=Path, help="the fastembed/ folder of the all-MiniLM-L6-v2 export")
    parser.add_argument(
        "--first-only", action="store_true", help="section 0 only: the first answers, ours beside the anchor's"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating first finds, ours and the anchor's")
    parser.add_argument("--load", type=int, default=2, help="CPU-bound processes beside the loaded rounds")
    args = parser.parse_args()
    print(f"CPU: {cpu_summary()}; python {sys.version.split()[0]}, mcp {version('mcp')}; load {os.getloadavg()}")
    sentences = read_corpus(args.data, args.points + args.queries)
    texts, queries = sentences[: args.points], sentences[args.points :]
    anchor_command = None
    if args.anchor_python and args.anchor_model:
        script = str(Path(__file__).parent / "peers" / "mcp_anchor.py")
        anchor_command = [args.anchor_python, script, str(args.anchor_model)]
    with tempfile.TemporaryDirectory() as folder:
        location = Path(folder)
        local = location / "local"
        write_anchor_layout(local, texts, SentenceEncoder.load())
        first_answers(local, queries[0], anchor_command)
        if anchor_command is not None and args.rounds:
            alternating(local, queries[0], anchor_command, args.rounds, args.load)
        if args.first_only:
            return
        with TextCollection(COLLECTION, SentenceEncoder.load(), location=location) as collection:
            collection.upsert_texts(texts)
            collection.optimize()
        runs = [asyncio.run(one_server(location, queries, steady=i == 0)) for i in range(args.runs)]
        direct = asyncio.run(in_process(location, queries))
        shared = asyncio.run(shared_server(location, queries))
        on_local = asyncio.run(one_server(location, queries, True, {"QDRANT_LOCAL_PATH": str(local)}))["latencies"]
        anchor = None
        if anchor_command is not None:
            anchor = asyncio.run(one_server(location, queries, True, {"QDRANT_LOCAL_PATH": str(local)}, anchor_command))
    bare = fresh_process_seconds("pass", args.runs)
    sdk = fresh_process_seconds("import mcp.server.mcpserver", args.runs)
    package = fresh_process_seconds("import sbert_qdrant", args.runs)
    eager = fresh_process_seconds("from sbert_qdrant.encoder import SentenceEncoder; SentenceEncoder.load()", args.runs)

    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"\n1. start-up over stdio, median of {args.runs} fresh servers ({runs[0]['tools']} tools listed)")
    print(f"   spawn -> initialize answered   {median('initialize'):6.2f} s   (target < 1 s)")
    print(f"   spawn -> tools/list answered   {median('tools/list'):6.2f} s")
    print(f"   anchors, fresh process: python {bare:.2f} s | import mcp.server.mcpserver {sdk:.2f} s | ", end="")
    print(f"import sbert_qdrant {package:.2f} s")
    print("\n2. first qdrant-find after tools/list (rest of the background model load included)")
    print(f"   first find {median('first find'):6.2f} s   ", end="")
    print(f"vs a fresh process importing and loading the model (an eager server's wait) {eager:.2f} s")
    steady = runs[0]["latencies"]
    print(f"\n3. steady state, {len(steady)} finds on {len(texts)} sentences (Qdrant Edge)")
    print(f"   qdrant-find over stdio   p50 {ms(steady, 0.5)}   p95 {ms(steady, 0.95)}")
    print(f"   search_text in-process   p50 {ms(direct, 0.5)}   p95 {ms(direct, 0.95)}")
    print(f"   protocol cost at p50: {1000 * (np.median(steady) - np.median(direct)):+.1f} ms")
    print(f"\n4. qdrant-find on the other setups, {len(steady)} finds each")
    print(f"   local folder (mcp-server-qdrant's layout), stdio   p50 {ms(on_local, 0.5)}   p95 {ms(on_local, 0.95)}")
    print(f"   shared server, streamable HTTP (Edge)             p50 {ms(shared, 0.5)}   p95 {ms(shared, 0.95)}")
    if anchor is None:
        print("   anchor mcp-server-qdrant: not run (--anchor-python and --anchor-model not given)")
    else:
        latencies = anchor["latencies"]
        print(f"   mcp-server-qdrant 0.8.1, same folder, stdio    p50 {ms(latencies, 0.5)}   p95 {ms(latencies, 0.95)}")
        print(f"   anchor spawn -> initialize {anchor['initialize']:.2f} s (it loads its model first)")


if __name__ == "__main__":
    main()
