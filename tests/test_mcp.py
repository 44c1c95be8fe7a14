"""The MCP server through the protocol: the SDK's in-memory ``mcp.Client(server)`` (list tools, call each one,
read-only and bound servers, errors as tool errors, a collection in another tool's layout) and one run of
``python -m sbert_qdrant.integrations.mcp`` over stdio with the SDK's stdio client."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import mcp
import pytest
import torch
from child import run_child
from conftest import DATA
from qdrant_client import QdrantClient, models

from sbert_qdrant import CrossEncoder, SentenceEncoder
from sbert_qdrant.integrations.mcp import McpSettings, create_server
from sbert_qdrant.testing import tiny_encoder

WRITES = {"qdrant-store", "qdrant-store-document", "qdrant-delete"}
READS = {"qdrant-find", "qdrant-find-documents", "qdrant-find-duplicates", "qdrant-count", "qdrant-list-collections"}
NOTES = [
    "My sister's birthday is on the 14th of March.",
    "The wifi password at the office is written on the fridge.",
    "I parked the car on level 3 of the airport garage.",
]


@pytest.fixture(scope="module")
def tiny() -> SentenceEncoder:
    return tiny_encoder()


@pytest.fixture(scope="module")
def abstracts() -> list[dict[str, str]]:
    """Two SciFact abstracts (2,000+ characters: several chunks each)."""
    rows = [json.loads(line) for line in (DATA / "scifact_sample.jsonl").read_text(encoding="utf-8").splitlines()]
    return sorted((r for r in rows if r["kind"] == "doc"), key=lambda r: -len(r["text"]))[:2]


def edge(tmp_path: Path, **options: Any) -> McpSettings:
    return McpSettings(location=str(tmp_path / "qdrant"), **options)


async def call(client: Any, tool: str, **arguments: Any) -> Any:
    """The tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert result.content[0].text  # readable text beside the structured content
    return result.structured_content


async def error(client: Any, tool: str, **arguments: Any) -> str:
    """The message of the tool error the call must return."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return str(result.content[0].text)


async def test_tools_keep_the_anchor_names_and_arguments_with_truthful_annotations(
    tmp_path: Path, tiny: SentenceEncoder
) -> None:
    async with mcp.Client(create_server(edge(tmp_path), encoder=tiny)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == READS | WRITES
    find, store = tools["qdrant-find"].input_schema, tools["qdrant-store"].input_schema
    assert {"query", "collection_name", "query_filter"} <= set(find["properties"])  # mcp-server-qdrant 0.8's
    assert {"mode", "rerank", "diversity", "limit"} <= set(find["properties"])
    assert {"information", "collection_name", "metadata"} <= set(store["properties"])
    assert find["required"] == ["query", "collection_name"] and store["required"] == ["information", "collection_name"]
    for name, tool in tools.items():
        assert tool.output_schema is not None and tool.annotations is not None, name
        assert tool.annotations.read_only_hint is (name in READS), name
        assert tool.annotations.destructive_hint is (True if name in WRITES else None), name


async def test_read_only_server_registers_no_write_tool(tmp_path: Path, tiny: SentenceEncoder) -> None:
    async with mcp.Client(create_server(edge(tmp_path, read_only=True), encoder=tiny)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == READS
        assert (
            client.instructions is not None
            and "read-only" in client.instructions
            and "store" not in client.instructions
        )
        message = await error(client, "qdrant-store", information=NOTES[0], collection_name="notes")
    assert "qdrant-store" in message


async def test_bound_collection_leaves_the_argument_out(tmp_path: Path, tiny: SentenceEncoder) -> None:
    async with mcp.Client(create_server(edge(tmp_path, collection_name="notes"), encoder=tiny)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == (READS | WRITES) - {"qdrant-list-collections"}
        assert all("collection_name" not in t.input_schema["properties"] for t in tools.values())
        first = await client.call_tool("qdrant-find", {"query": "birthday"})  # an agent's first run: no error
        assert not first.is_error and first.content[0].text.startswith("Nothing stored yet in collection notes")
        stored = await call(client, "qdrant-store", information=NOTES[0])
        assert stored["collection_name"] == "notes"
        assert (await call(client, "qdrant-count"))["count"] == 1


async def test_tools_list_answers_before_the_model_loads_and_a_load_failure_is_a_tool_error(tmp_path: Path) -> None:
    """The model loads in the background; a missing one fails each call that needs it, not the server."""
    missing = str(tmp_path / "no-such-model")
    server = create_server(edge(tmp_path, model=missing))
    async with mcp.Client(server) as client:
        assert {t.name for t in (await client.list_tools()).tools} == READS | WRITES
        message = await error(client, "qdrant-store", information=NOTES[0], collection_name="notes")
        assert "no-such-model" in message and "not found" in message
        assert (await call(client, "qdrant-list-collections"))["collections"] == []  # needs no model
        assert "no-such-model" in await error(client, "qdrant-find", query="birthday", collection_name="notes")


_COUNT_WITHOUT_TORCH = """
import asyncio, json, sys
import mcp
from sbert_qdrant.integrations.mcp import McpSettings, create_server

async def main():
    async with mcp.Client(create_server(McpSettings(location=sys.argv[1], preload=False))) as client:
        counted = await client.call_tool("qdrant-count", {"collection_name": "notes"})
        deleted = await client.call_tool("qdrant-delete", {"collection_name": "notes", "ids": ["n0", "gone"]})
        again = await client.call_tool("qdrant-count", {"collection_name": "notes"})
    print(json.dumps([counted.content[0].text, deleted.content[0].text, again.content[0].text,
                      sorted({"torch", "transformers"} & set(sys.modules))]))

asyncio.run(main())
"""


def test_count_and_delete_answer_without_the_model_or_torch(tmp_path: Path, tiny: SentenceEncoder) -> None:
    """A fresh server counts and deletes by id with torch never imported (the model is needed only to encode)."""
    from sbert_qdrant import TextCollection

    with TextCollection("notes", tiny, location=tmp_path / "qdrant") as collection:
        collection.upsert_texts(NOTES, ids=["n0", "n1", "n2"])
    run = run_child([sys.executable, "-c", _COUNT_WITHOUT_TORCH, str(tmp_path / "qdrant")])
    assert run.returncode == 0, run.stderr[-2000:]
    counted, deleted, again, imported = json.loads(run.stdout.splitlines()[-1])
    assert counted == "3 texts in collection notes" and again == "2 texts in collection notes"
    assert deleted.startswith("Deleted 1 of the 2 id(s)")
    assert imported == []


_FIND_WITHOUT_TORCH = """
import asyncio, json, sys
import mcp
from sbert_qdrant.integrations.mcp import McpSettings, create_server

async def main():
    async with mcp.Client(create_server(McpSettings(location=sys.argv[1]))) as client:
        found = await client.call_tool("qdrant-find", {"collection_name": "notes", "query": "where is my car?"})
        imported = sorted({"torch", "transformers"} & set(sys.modules))
        stored = await client.call_tool("qdrant-store", {"collection_name": "notes", "information": sys.argv[2]})
        again = await client.call_tool("qdrant-find", {"collection_name": "notes", "query": "the dentist appointment"})
    print(json.dumps([found.structured_content, imported, stored.is_error, again.structured_content]))

asyncio.run(main())
"""


def test_the_first_find_answers_without_torch_and_store_works_after(
    tmp_path: Path, default_encoder: SentenceEncoder
) -> None:
    """A fresh server with the default model answers its first find on NumPy, torch and transformers never
    imported, in a collection written by the torch encoder (the same identity); a note it stores is found."""
    from sbert_qdrant import TextCollection

    with TextCollection("notes", default_encoder, location=tmp_path / "qdrant") as collection:
        collection.upsert_texts(NOTES, ids=["n0", "n1", "n2"])
    note = "The dentist appointment is on Tuesday at 9."
    run = run_child([sys.executable, "-c", _FIND_WITHOUT_TORCH, str(tmp_path / "qdrant"), note])
    assert run.returncode == 0, run.stderr[-2000:]
    found, imported, store_failed, again = json.loads(run.stdout.splitlines()[-1])
    assert found["entries"][0]["text"] == NOTES[2] and imported == []
    assert not store_failed and again["entries"][0]["text"] == note
    with TextCollection("notes", default_encoder, location=tmp_path / "qdrant") as collection:
        assert collection.search_text("dentist", limit=1)[0].text == note  # the torch encoder reads it back


async def test_a_failure_while_loading_in_the_background_reaches_the_first_find_and_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever the background load raises is logged as it happens and comes back to each tool that needs the
    model as a tool error naming it; the tools that need none still answer."""
    from sbert_qdrant.integrations.mcp.backend import Backend

    def broken(self: Backend) -> SentenceEncoder:
        raise RuntimeError("CUDA out of memory (simulated)")

    monkeypatch.setattr(Backend, "_load_encoder", broken)
    async with mcp.Client(create_server(edge(tmp_path))) as client:
        assert (await call(client, "qdrant-count", collection_name="notes"))["count"] == 0
        for _ in range(2):
            message = await error(client, "qdrant-find", query="birthday", collection_name="notes")
            assert "the model (SBERT_QDRANT_MODEL, EMBEDDING_MODEL) failed to load" in message, message
            assert "RuntimeError: CUDA out of memory (simulated)" in message and "restart the server" in message
    logged = [r for r in caplog.records if r.levelname == "ERROR" and "failed to load" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None


def test_settings_read_mcp_server_qdrants_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    names = {
        "QDRANT_URL": ":memory:",
        "QDRANT_API_KEY": "secret",
        "COLLECTION_NAME": "memories",
        "QDRANT_SEARCH_LIMIT": "3",
        "QDRANT_READ_ONLY": "true",
        "EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
        "TOOL_FIND_DESCRIPTION": "find it",
        "TOOL_STORE_DESCRIPTION": "keep it",
        "SBERT_QDRANT_RERANK_MODEL": "my-cross-encoder",
    }
    for name, value in names.items():
        monkeypatch.setenv(name, value)
    settings = McpSettings()
    assert settings.qdrant_url == ":memory:" and settings.qdrant_api_key is not None
    assert settings.qdrant_api_key.get_secret_value() == "secret" and "secret" not in repr(settings)
    assert (settings.collection_name, settings.search_limit, settings.read_only) == ("memories", 3, True)
    assert settings.model == "sentence-transformers/all-MiniLM-L6-v2" and settings.rerank_model == "my-cross-encoder"
    assert (settings.tool_find_description, settings.tool_store_description) == ("find it", "keep it")
    monkeypatch.setenv("QDRANT_LOCAL_PATH", "/tmp/local")
    with pytest.raises(ValueError, match="QDRANT_LOCAL_PATH='/tmp/local' and QDRANT_URL=':memory:' are both set"):
        McpSettings()


async def test_qdrant_client_engine_lists_its_collections(tiny: SentenceEncoder) -> None:
    settings = McpSettings(qdrant_url=":memory:", search_limit=2)
    async with mcp.Client(create_server(settings, encoder=tiny)) as client:
        assert (await call(client, "qdrant-list-collections"))["collections"] == []
        for name in ("b-notes", "a-notes"):
            for text in NOTES:
                await call(client, "qdrant-store", information=text, collection_name=name)
        assert (await call(client, "qdrant-list-collections"))["collections"] == ["a-notes", "b-notes"]
        assert len((await call(client, "qdrant-find", query="car", collection_name="a-notes"))["entries"]) == 2


async def test_the_collection_list_and_stored_vectors_through_the_public_door(
    tmp_path: Path, tiny: SentenceEncoder
) -> None:
    """What the server lists and opens collections with: ``list_collections`` (both flavours, Edge and qdrant-client)
    and ``stored_vectors``, whatever the layout."""
    from sbert_qdrant import PointLayout, TextCollection
    from sbert_qdrant.aio import AsyncTextCollection
    from sbert_qdrant.aio import list_collections as list_async
    from sbert_qdrant.collection import list_collections

    assert list_collections(location=tmp_path / "nothing") == []
    for name in ("b", "a"):
        with TextCollection(name, tiny, location=tmp_path / "edge") as collection:
            collection.upsert_texts(NOTES)
    (tmp_path / "edge" / "not-a-collection").mkdir()
    assert list_collections(location=tmp_path / "edge") == ["a", "b"] == await list_async(location=tmp_path / "edge")
    client = QdrantClient(":memory:")
    theirs = TextCollection("m", tiny, client=client, layout=PointLayout.mcp_server_qdrant("all-MiniLM-L6-v2"))
    assert theirs.stored_vectors() == {}
    theirs.upsert_texts(NOTES)
    assert list_collections(client=client) == ["m"] and theirs.stored_vectors() == {"fast-all-minilm-l6-v2": 32}
    async with AsyncTextCollection("a", tiny, location=tmp_path / "edge") as ours:
        assert await ours.stored_vectors() == {"text": 32}
    client.close()


@pytest.mark.slow
async def test_store_find_count_duplicates_delete(tmp_path: Path, default_encoder: SentenceEncoder) -> None:
    async with mcp.Client(create_server(edge(tmp_path), encoder=default_encoder)) as client:
        ids = [
            (await call(client, "qdrant-store", information=text, collection_name="notes", metadata={"n": i}))["id"]
            for i, text in enumerate(NOTES)
        ]
        again = await call(client, "qdrant-store", information=NOTES[0], collection_name="notes", metadata={"n": 0})
        assert again["id"] == ids[0]
        assert (await call(client, "qdrant-count", collection_name="notes"))["count"] == 3  # the repeat: one point
        for mode in ("dense", "sparse", "hybrid"):
            found = await call(
                client, "qdrant-find", query="where did I leave the car?", collection_name="notes", mode=mode
            )
            assert found["entries"][0]["text"] == NOTES[2], mode
        found = await call(
            client,
            "qdrant-find",
            query="where did I leave the car?",
            collection_name="notes",
            query_filter={"must": [{"key": "n", "match": {"value": 1}}]},
            diversity=0.5,
            limit=2,
        )
        assert [(e["id"], e["payload"]) for e in found["entries"]] == [(ids[1], {"n": 1})]
        counted = await call(
            client, "qdrant-count", collection_name="notes", query_filter={"must": [{"key": "n", "range": {"gte": 1}}]}
        )
        assert counted["count"] == 2
        paraphrase = "When is my sister's birthday? The 14th of March."
        duplicates = await call(
            client, "qdrant-find-duplicates", information=paraphrase, collection_name="notes", threshold=0.6
        )
        assert [e["id"] for e in duplicates["entries"]] == [ids[0]]
        assert (await call(client, "qdrant-list-collections"))["collections"] == ["notes"]
        assert (await call(client, "qdrant-delete", ids=[ids[0], "unknown"], collection_name="notes"))["deleted"] == 1
        assert (await call(client, "qdrant-count", collection_name="notes"))["count"] == 2


@pytest.mark.slow
async def test_documents_come_back_one_hit_each_with_passages_to_cite(
    tmp_path: Path, default_encoder: SentenceEncoder, abstracts: list[dict[str, str]]
) -> None:
    async with mcp.Client(create_server(edge(tmp_path), encoder=default_encoder)) as client:
        for row in abstracts:
            stored = await call(
                client, "qdrant-store-document", document=row["text"], collection_name="papers", id=row["_id"],
                metadata={"title": row["title"]},
            )  # fmt: skip
            assert stored["id"] == row["_id"]
        assert (await call(client, "qdrant-count", collection_name="papers", kind="documents"))["count"] == 2
        assert (await call(client, "qdrant-count", collection_name="papers", kind="chunks"))["count"] > 2
        target = abstracts[0]
        query = target["title"]
        found = await call(client, "qdrant-find-documents", query=query, collection_name="papers", passages=2)
        documents = found["documents"]
        assert documents[0]["id"] == target["_id"] and len({d["id"] for d in documents}) == len(documents)
        assert documents[0]["payload"] == {"title": target["title"]}
        for passage in documents[0]["passages"]:
            assert target["text"][passage["start"] : passage["end"]] == passage["text"]
        await call(client, "qdrant-delete", ids=[target["_id"]], collection_name="papers")
        assert (await call(client, "qdrant-count", collection_name="papers", kind="documents"))["count"] == 1


@pytest.mark.slow
async def test_errors_an_agent_can_act_on(
    tmp_path: Path, default_encoder: SentenceEncoder, abstracts: list[dict[str, str]]
) -> None:
    async with mcp.Client(create_server(edge(tmp_path), encoder=default_encoder)) as client:
        assert (await call(client, "qdrant-find", query="x", collection_name="nowhere"))["entries"] == []
        await call(client, "qdrant-store", information=NOTES[0], collection_name="notes")
        bad = await error(client, "qdrant-find", query="x", collection_name="notes", query_filter={"must": 3})
        assert "query_filter is not a Qdrant filter" in bad
        assert "SBERT_QDRANT_RERANK_MODEL" in await error(
            client, "qdrant-find", query="x", collection_name="notes", rerank=True
        )
        assert "reserved key" in await error(
            client, "qdrant-store", information=NOTES[1], collection_name="notes", metadata={"text": "x"}
        )
        assert "limit" in await error(client, "qdrant-find", query="x", collection_name="notes", limit=0)
        assert "contains '/'" in await error(client, "qdrant-store", information=NOTES[1], collection_name="bad name/")
        assert (await call(client, "qdrant-count", collection_name="notes"))["count"] == 1  # nothing written


@pytest.mark.slow
async def test_a_note_or_query_longer_than_the_model_reads_is_taken_and_said(
    tmp_path: Path, default_encoder: SentenceEncoder, abstracts: list[dict[str, str]]
) -> None:
    """Never refused: a long note is one point holding all of it, its vector made from what the model reads, and
    the answer says so (and where all of it is searched); a long query is searched by its first tokens, said too."""
    long = abstracts[0]["text"]
    async with mcp.Client(create_server(edge(tmp_path), encoder=default_encoder)) as client:
        for text in NOTES:
            await call(client, "qdrant-store", information=text, collection_name="notes")
        result = await client.call_tool("qdrant-store", {"information": long, "collection_name": "notes"})
        assert not result.is_error and result.structured_content["truncated"]
        said = result.content[0].text
        assert "tokens long and the model reads 254" in said and "qdrant-store-document" in said, said
        assert (await call(client, "qdrant-count", collection_name="notes"))["count"] == 4
        found = await call(client, "qdrant-find", query=abstracts[0]["title"], collection_name="notes")
        assert found["entries"][0]["text"] == long and not found["truncated"]
        result = await client.call_tool("qdrant-find", {"query": long, "collection_name": "notes"})
        assert not result.is_error and result.structured_content["truncated"]
        assert result.structured_content["entries"][0]["text"] == long
        assert "The query is" in result.content[0].text and "its first 254 tokens" in result.content[0].text


@pytest.mark.slow
async def test_rerank_with_the_servers_cross_encoder(
    tmp_path: Path, default_encoder: SentenceEncoder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A tiny cross-encoder with a random head (its order is arbitrary): its scores replace the search's, or blend
    with them under ``rerank_weight``."""
    folder = tmp_path_factory.mktemp("tiny-cross")
    tiny_encoder().save(folder)
    cross = CrossEncoder.from_transformer(folder, seed=3)
    with torch.no_grad():
        cross.transformer.model.classifier.weight.mul_(1000)
    server = create_server(edge(tmp_path), encoder=default_encoder, cross_encoder=cross)
    query = "where did I leave the car?"
    async with mcp.Client(server) as client:
        for text in NOTES:
            await call(client, "qdrant-store", information=text, collection_name="notes")
        found = await call(client, "qdrant-find", query=query, collection_name="notes", rerank=True, limit=3)
    expected = cross.predict([(query, e["text"]) for e in found["entries"]]).tolist()
    assert [e["score"] for e in found["entries"]] == pytest.approx(expected, abs=1e-4)
    assert expected == sorted(expected, reverse=True)
    blending = create_server(edge(tmp_path, rerank_weight=0.5), encoder=default_encoder, cross_encoder=cross)
    async with mcp.Client(blending) as client:  # SBERT_QDRANT_RERANK_WEIGHT: each score a blend scaled to 0..1
        found = await call(client, "qdrant-find", query=query, collection_name="notes", rerank=True, limit=len(NOTES))
    scores = [e["score"] for e in found["entries"]]
    assert scores == sorted(scores, reverse=True) and 0 <= min(scores) < 0.5 < max(scores) <= 1
    with pytest.raises(ValueError, match="rerank_weight"):
        edge(tmp_path, rerank_weight=0)


def write_in_other_layout(path: Path, encoder: SentenceEncoder, vector_name: str, text_field: str) -> None:
    """A collection another tool wrote (local mode): its own vector name and text field, metadata nested, random
    ids (mcp-server-qdrant's own layout: tests/test_mcp_anchor.py)."""
    client = QdrantClient(path=str(path))
    client.create_collection(
        "memories", vectors_config={vector_name: models.VectorParams(size=384, distance=models.Distance.COSINE)}
    )
    vectors = encoder.encode_document(NOTES)
    client.upsert(
        "memories",
        points=[
            models.PointStruct(
                id=uuid.uuid4().hex,
                vector={vector_name: vector.tolist()},
                payload={text_field: text, "metadata": {"n": i}},
            )
            for i, (text, vector) in enumerate(zip(NOTES, vectors, strict=True))
        ],
    )
    client.close()


@pytest.mark.slow
async def test_another_layout_named_in_the_settings(tmp_path: Path, default_encoder: SentenceEncoder) -> None:
    write_in_other_layout(tmp_path / "local", default_encoder, vector_name="dense", text_field="content")
    settings = McpSettings(local_path=str(tmp_path / "local"), vector_name="dense", text_field="content")
    async with mcp.Client(create_server(settings, encoder=default_encoder)) as client:
        found = await call(client, "qdrant-find", query="where did I leave the car?", collection_name="memories")
        assert found["entries"][0]["text"] == NOTES[2]
        refused = await error(client, "qdrant-store", information="x", collection_name="memories")
        assert "written by another tool" in refused and "read-only" in refused


@pytest.mark.slow
async def test_stdio_subprocess(tmp_path: Path) -> None:
    """``python -m sbert_qdrant.integrations.mcp`` over stdio, as an agent runs it."""
    env = {"SBERT_QDRANT_LOCATION": str(tmp_path / "qdrant"), "COLLECTION_NAME": "notes", "QDRANT_SEARCH_LIMIT": "1"}
    params = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "sbert_qdrant.integrations.mcp"], env={**os.environ, **env}
    )
    async with mcp.Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == (READS | WRITES) - {"qdrant-list-collections"}
        for text in NOTES:
            await call(client, "qdrant-store", information=text)
        found = await call(client, "qdrant-find", query="where did I leave the car?")
    assert [e["text"] for e in found["entries"]] == [NOTES[2]]


def test_the_command_line_works_without_the_extra() -> None:
    """Without the SDK the command line builds, and ``sbert-qdrant mcp`` says what to install."""
    blocked = "import sys; sys.modules['mcp'] = None; from sbert_qdrant.cli import main; sys.exit(main(['mcp']))"
    run = run_child([sys.executable, "-c", blocked])
    assert run.returncode == 2 and "pip install 'sbert-qdrant[mcp]'" in run.stderr, run.stderr
