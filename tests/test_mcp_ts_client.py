"""A real client nobody here wrote: the MCP TypeScript SDK (``Client`` + ``StdioClientTransport``) drives
``sbert-qdrant mcp`` over stdio: store -> find -> documents -> read-only. The SDK is installed with npm into
tests/js/node_modules once (git-ignored, kept between runs); without node or npm, or when the install fails
(offline), the test is skipped, saying why."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from child import run_child

JS = Path(__file__).parent / "js"
SDK = JS / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


def typescript_sdk() -> None:
    """Install the SDK once, or skip the test saying why."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the MCP TypeScript SDK")
    if SDK.is_file():
        return
    install = run_child([npm, "install", "--no-audit", "--no-fund", "--no-save"], cwd=JS)
    if install.returncode != 0 or not SDK.is_file():
        pytest.skip(f"npm could not install @modelcontextprotocol/sdk (offline?): {install.stderr[-500:]}")


@pytest.mark.slow
def test_the_typescript_sdk_stores_finds_documents_and_meets_read_only(tmp_path: Path) -> None:
    typescript_sdk()
    run = run_child(["node", str(JS / "mcp_client.mjs"), sys.executable, str(tmp_path / "store")])
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    writes = {"qdrant-store", "qdrant-store-document", "qdrant-delete"}
    assert "qdrant-find" in seen["tools"] and writes <= set(seen["tools"])
    assert not seen["empty"]["isError"] and seen["empty"]["text"].startswith("Nothing stored yet")
    assert not seen["stored"]["isError"] and seen["stored"]["structured"]["id"]
    assert seen["found"]["structured"]["entries"][0]["text"].startswith("I parked the car")
    assert seen["found"]["structured"]["entries"][0]["id"] == seen["stored"]["structured"]["id"]
    assert seen["document"]["structured"]["id"] == "boiler-manual"
    document = seen["documents"]["structured"]["documents"][0]
    assert document["id"] == "boiler-manual" and "October" in document["passages"][0]["text"]
    assert seen["unknown"]["isError"] and "takes no argument 'colour'" in seen["unknown"]["text"]
    assert not set(seen["readOnlyTools"]) & writes and "qdrant-find" in seen["readOnlyTools"]
    assert seen["readOnlyFound"]["structured"]["entries"][0]["text"].startswith("My sister's birthday")
    assert seen["readOnlyStore"]["isError"]
