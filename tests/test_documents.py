"""Documents: token-aware chunks with exact offsets, whole-document replacement on every engine (also after SIGKILL),
and search with one hit per document."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from child import run_child
from conftest import DATA
from flavours import Engines
from qdrant_client import models

from sbert_qdrant import InvalidArgumentError, InvalidInputError, SentenceEncoder
from sbert_qdrant.documents import split_document
from sbert_qdrant.store import EdgeStore
from sbert_qdrant.store.calls import Scan
from sbert_qdrant.testing import tiny_encoder

HARNESS = Path(__file__).parent / "crash_harness.py"


@pytest.fixture(scope="module")
def abstracts() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (DATA / "scifact_sample.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["kind"] == "doc"]


@pytest.fixture(scope="module")
def offsets() -> Any:
    tokenizer = tiny_encoder().transformer.tokenizer

    def spans(text: str) -> list[tuple[int, int]]:
        return [
            tuple(s) for s in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        ]

    return spans


TRICKY = [
    "Short.",
    "   padded   \n\n  text with   odd    spacing \t\n",
    "naïve café — déjà vu; 日本語のテキストは空白なしで続きます。次の文です\uff01 emoji 🙂🙂 and e\u0301 combining.",
    "supercalifragilisticexpialidocious" * 40,  # one very long word: cut inside it
    "A sentence. " * 200,
]


@pytest.mark.parametrize("budget, overlap", [(16, 0), (32, 8), (64, 16)])
def test_chunks_cover_every_token_fit_the_limit_and_map_back(
    abstracts: list[dict[str, Any]], offsets: Any, budget: int, overlap: int
) -> None:
    for text in [a["title"] + "\n\n" + a["text"] for a in abstracts[:15]] + TRICKY:
        chunks = split_document(text, offsets, budget, overlap)
        assert [c.index for c in chunks] == list(range(len(chunks)))
        for chunk in chunks:
            assert text[chunk.start : chunk.end] == chunk.text and chunk.text.strip()
            assert chunk.tokens == len(offsets(chunk.text)) <= budget  # never truncated by the encoder
        for start, end in offsets(text):  # every token lands in some chunk
            assert any(c.start <= start and end <= c.end for c in chunks), (text[:40], start, end)
        for before, after in itertools.pairwise(chunks):
            assert before.start < after.start <= before.end  # in order, touching or overlapping
            if overlap == 0:
                assert after.start == before.end


def test_chunks_prefer_sentence_ends(offsets: Any) -> None:
    text = " ".join(f"Sentence number {i} says something short." for i in range(30))
    chunks = split_document(text, offsets, 40, 0)
    assert len(chunks) > 3 and all(c.text.rstrip().endswith(".") for c in chunks)


def test_a_short_document_is_one_chunk_and_bad_settings_are_refused(offsets: Any) -> None:
    assert [(c.start, c.end, c.text) for c in split_document("  hello world  ", offsets, 32)] == [
        (2, 13, "hello world")
    ]
    with pytest.raises(InvalidArgumentError, match="chunk_tokens=4"):
        split_document("x", offsets, 4)
    with pytest.raises(InvalidArgumentError, match="overlap_tokens=20"):
        split_document("x", offsets, 32, 20)


def _docs(abstracts: list[dict[str, Any]], n: int) -> tuple[list[str], list[str]]:
    return [a["title"] + "\n\n" + a["text"] for a in abstracts[:n]], [a["_id"] for a in abstracts[:n]]


def test_replacing_a_document_replaces_all_its_chunks(
    make: Engines, tiny_encoder: SentenceEncoder, abstracts: list[dict[str, Any]]
) -> None:
    coll = make.open(tiny_encoder)
    texts, ids = _docs(abstracts, 6)
    result = coll.upsert_documents(texts, ids=ids, payloads=[{"n": i} for i in range(6)], chunk_tokens=24)
    assert list(result) == ids and (result.written, result.skipped) == (6, 0)
    before = coll.count(kind="chunks")
    long_doc = coll.get_document(ids[0])
    assert long_doc is not None and long_doc.text == texts[0].strip() and len(long_doc.chunks) > 3
    assert long_doc.payload == {"n": 0}

    again = coll.upsert_documents(texts, ids=ids, payloads=[{"n": i} for i in range(6)], chunk_tokens=24)
    assert (again.written, again.skipped, coll.count(kind="chunks")) == (0, 6, before)  # unchanged: nothing re-encoded

    coll.upsert_documents(["Now a single short sentence."], ids=[ids[0]], payloads=[{"n": 0}], chunk_tokens=24)
    short = coll.get_document(ids[0])
    assert short is not None and short.text == "Now a single short sentence." and len(short.chunks) == 1
    assert coll.count(kind="chunks") == before - len(long_doc.chunks) + 1  # no stale chunk of the old version
    grown = texts[1] + "\n\n" + texts[2]
    coll.upsert_documents([grown], ids=[ids[1]], payloads=[{"n": 1}], chunk_tokens=24)
    assert coll.get_document(ids[1]).text == grown.strip()
    coll.upsert_documents([texts[2]], ids=[ids[2]], payloads=[{"n": "edited"}], chunk_tokens=24)  # payload only
    edited = coll.get_document(ids[2])
    assert edited is not None and edited.payload == {"n": "edited"}
    assert [c.index for c in edited.chunks] == list(range(len(edited.chunks)))
    mine = models.Filter(must=[models.FieldCondition(key="document.id", match=models.MatchValue(value=ids[2]))])
    assert coll.count(mine, kind="chunks") == len(edited.chunks)

    coll.delete_documents([ids[1], "unknown"])
    assert coll.get_document(ids[1]) is None and coll.get_document("unknown") is None


def test_skip_leaves_any_stored_version_alone(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    coll.upsert_documents(["first version of the page"], ids=["page"])
    result = coll.upsert_documents(["second version", "another page"], ids=["page", "other"], on_conflict="skip")
    assert (result.written, result.skipped) == (1, 1)
    assert coll.get_document("page").text == "first version of the page"


def test_bad_documents_write_nothing(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    with pytest.raises(InvalidInputError, match=r"payloads\[1\] uses the reserved key\(s\) \['document'\]"):
        coll.upsert_documents(["fine", "also fine"], payloads=[None, {"document": 1}])
    with pytest.raises(InvalidInputError, match=r"texts\[1\]"):
        coll.upsert_documents(["fine", "   "])
    with pytest.raises(InvalidArgumentError, match="chunk_tokens=9999"):
        coll.upsert_documents(["fine"], chunk_tokens=9999)
    assert not coll.exists()


def test_search_returns_each_document_once_with_its_best_chunks(
    make: Engines, default_encoder: SentenceEncoder, abstracts: list[dict[str, Any]]
) -> None:
    coll = make.open(default_encoder)
    texts, ids = _docs(abstracts, 12)
    crowd = " ".join(["Zebra stripes confuse biting flies."] * 60)  # one document, many near-identical chunks
    coll.upsert_documents([*texts, crowd], ids=[*ids, "zebras"], chunk_tokens=40, overlap_tokens=8)
    for mode in ("dense", "sparse", "hybrid"):
        hits = coll.search_documents("why do zebras have stripes", limit=4, mode=mode, chunks=2)
        assert len({h.id for h in hits}) == len(hits), mode
        assert len(hits) == (1 if mode == "sparse" else 4), mode  # no other document has the words; no crowding
        assert hits[0].id == "zebras" and len(hits[0].chunks) == 2
        for hit in hits:
            text = crowd if hit.id == "zebras" else texts[ids.index(hit.id)]
            assert all(text[c.start : c.end] == c.text for c in hit.chunks)  # quotes map back to the document
            assert [c.score for c in hit.chunks] == sorted((c.score for c in hit.chunks), reverse=True)
            assert hit.score == hit.chunks[0].score
    summed = coll.search_documents("why do zebras have stripes", limit=4, chunks=2, score="sum")
    assert all(h.score == pytest.approx(sum(c.score for c in h.chunks)) for h in summed)
    with pytest.raises(InvalidArgumentError, match="chunks=0"):
        coll.search_documents("x", chunks=0)


@pytest.mark.long
def test_sigkill_during_replacement_then_a_rerun_leaves_exactly_the_new_chunks(
    tmp_path: Path, tiny_encoder: SentenceEncoder
) -> None:
    model = tmp_path / "model"
    tiny_encoder.save(model)
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    with old.open("w", encoding="utf-8") as f_old, new.open("w", encoding="utf-8") as f_new:
        for i in range(60):
            body = " ".join(f"Document {i} sentence {j} about topic {i % 7}." for j in range(12))
            f_old.write(json.dumps({"id": i, "text": body, "n": i}) + "\n")
            changed = body[: len(body) // 3] if i % 2 else body + " An added closing sentence."
            f_new.write(json.dumps({"id": i, "text": changed, "n": i}) + "\n")
    work = tmp_path / "work"
    command = [sys.executable, str(HARNESS), str(new), str(model), str(work), "--kills", "8"]
    result = run_child([*command, "--batch-size", "30", "--documents", "--replace", str(old)])  # bounded by progress
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    kills = report["kills"]
    assert sum(k["outcome"] == -9 for k in kills) == 8 and all(k["final"] == 0 for k in kills)
    points = sorted({k["after_writes"] for k in kills})
    assert len(points) >= 6, points  # at points spread over the replacement, from its first write to its last part
    assert points[0] <= report["batches"] // 8 and points[-1] >= report["batches"] * 2 // 3, points

    def chunks(folder: Path) -> dict[str, Any]:
        store = EdgeStore(folder)
        try:
            return {r.id: r.payload for page in store.scroll("crash", Scan("text", batch_size=1000)) for r in page}
        finally:
            store.close()

    expected = chunks(work / "clean")
    assert len(expected) > 120
    for kill in kills:
        assert chunks(work / kill["folder"]) == expected, kill


def test_chunk_context_is_encoded_with_every_chunk_never_stored(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    body = " ".join(f"Sentence {i} says how the herd moves across the plain at dawn." for i in range(8))
    plain, titled = make.open(tiny_encoder, "plain"), make.open(tiny_encoder, "titled")
    plain.upsert_documents([body], ids=["d"], payloads=[{"title": "Zebra stripes"}], chunk_tokens=12)
    result = titled.upsert_documents(
        [body], ids=["d"], payloads=[{"title": "Zebra stripes"}], chunk_tokens=12, context_field="title"
    )
    assert result.written == 1
    a, b = plain.get_document("d"), titled.get_document("d")
    assert a is not None and b is not None and len(b.chunks) > 2
    assert (b.text, b.payload) == (body, {"title": "Zebra stripes"})
    assert [(c.start, c.end, c.text) for c in a.chunks] == [(c.start, c.end, c.text) for c in b.chunks]
    assert plain.search_documents("zebra", mode="sparse") == []  # the title is not in the text...
    hit = titled.search_documents("zebra", mode="sparse", chunks=50)  # ...but every chunk was encoded with it
    assert len(hit) == 1 and len(hit[0].chunks) == len(b.chunks)
    again = titled.upsert_documents([body], ids=["d"], payloads=[{"title": "Zebra stripes"}], chunk_tokens=12)
    assert again.written == 1  # without the context the chunks are encoded otherwise: a new version
    assert titled.search_documents("zebra", mode="sparse") == []


def test_bad_chunk_context_writes_nothing(make: Engines, tiny_encoder: SentenceEncoder) -> None:
    coll = make.open(tiny_encoder)
    with pytest.raises(InvalidInputError, match=r"payloads\[1\]\['title'\] is int, not str"):
        coll.upsert_documents(["fine", "fine too"], payloads=[{"title": "ok"}, {"title": 3}], context_field="title")
    with pytest.raises(InvalidInputError, match=r"payloads\[0\]\['title'\] has \d+ tokens"):
        coll.upsert_documents(["fine"], payloads=[{"title": "word " * 40}], context_field="title")
    with pytest.raises(InvalidArgumentError, match="context_field=''"):
        coll.upsert_documents(["fine"], context_field="")
    with pytest.raises(InvalidInputError, match=r"payloads\[1\]\['title'\] is missing: context_field='title'"):
        coll.upsert_documents(["fine", "fine too"], payloads=[{"title": "ok"}, {"topic": "x"}], context_field="title")
    assert not coll.exists()
    assert coll.upsert_documents(["fine"], payloads=[{"title": None}], context_field="title").written == 1  # none


def test_a_long_context_takes_its_tokens_from_the_chunk(offsets: Any) -> None:
    from sbert_qdrant.documents import Chunking
    from sbert_qdrant.records import CheckedRecord

    text = " ".join(f"word{i}" for i in range(200))
    record = CheckedRecord(0, "d", text, {"title": "a title of some words"}, explicit_id=True)
    context = len(offsets("a title of some words"))
    whole = Chunking(offsets, 30, 4, 30, "title").prepare(record)
    assert max(c.tokens for c in whole.chunks) <= 30 - context  # chunk and context fit what the encoder reads
    short = Chunking(offsets, 12, 2, 30, "title").prepare(record)
    assert max(c.tokens for c in short.chunks) == 12  # room for both: the chunk keeps its size
    assert {p.text.split("\n")[0] for p in short.points()} == {"a title of some words"}
