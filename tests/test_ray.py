"""Ray Data ingestion (sbert_qdrant.integrations.ray) on a local Ray (2 CPUs, one instance for the whole run):
what a dataset encoded by actors stores equals what ``upsert_texts`` / ``upsert_documents`` store from the same rows,
a worker dying mid-run loses and duplicates nothing, bad rows stop the run, another model is refused."""

from __future__ import annotations

import csv
import json
import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flavours import Engines
from qdrant_client import QdrantClient

from sbert_qdrant import (
    CollectionMismatchError,
    DataFormatError,
    EncoderSpec,
    InvalidArgumentError,
    InvalidInputError,
    PartialWriteError,
    SentenceEncoder,
    TextCollection,
    testing,
)

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'sbert-qdrant[ray]'")
sbert_ray = pytest.importorskip("sbert_qdrant.integrations.ray")
actor_options = pytest.importorskip("sbert_qdrant.integrations.ray._upsert").actor_options

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    """One local Ray instance (2 CPUs) for the whole test run."""
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random encoder saved where the actors load it."""
    folder = tmp_path_factory.mktemp("models") / "tiny-bert"
    testing.tiny_encoder().save(folder)
    return folder


@pytest.fixture(scope="module")
def encoder(model_dir: Path) -> SentenceEncoder:
    return SentenceEncoder.load(model_dir, device="cpu", precision="fp32")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with (DATA / "stsb_dev_sample.tsv").open(encoding="utf-8") as f:
        pairs = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    texts = list(dict.fromkeys(p["sentence1"] for p in pairs))[:40]  # distinct: text-derived ids differ
    return [{"qid": f"q{i}", "text": text, "score": i / 8} for i, text in enumerate(texts)]


@pytest.fixture
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engines]:
    made = Engines("sync", request.param, tmp_path)
    yield made
    made.close()


def upsert(rows: list[dict[str, Any]], coll: Any, model_dir: Path, **options: Any) -> Any:
    options = {"model": model_dir, "precision": "fp32", "batch_size": 16, **options}
    return sbert_ray.upsert_dataset(ray.data.from_items(rows), coll, **options)


def stored(coll: Any, ids: list[Any]) -> dict[Any, tuple[Any, ...]]:
    return {t.id: (t.text, t.payload, t.vector) for t in coll.get(ids, with_vectors=True)}


@pytest.mark.parametrize(("engines", "id_column"), [("edge", "qid"), ("memory", None)], indirect=["engines"])
def test_dataset_stores_what_upsert_texts_stores(
    local_ray: None,
    engines: Engines,
    encoder: SentenceEncoder,
    model_dir: Path,
    rows: list[Any],
    id_column: Any,
    capfd: pytest.CaptureFixture[str],
) -> None:
    own, ray_coll = engines.open(encoder, "own"), engines.open(encoder, "ray")
    ids = own.upsert_texts(
        [r["text"] for r in rows],
        ids=[r["qid"] for r in rows] if id_column else None,
        payloads=[{"score": r["score"]} if id_column else {"qid": r["qid"], "score": r["score"]} for r in rows],
    )
    capfd.readouterr()
    result = upsert(
        rows, ray_coll, model_dir, id_column=id_column, actors=2, bulk=id_column is None, show_progress_bar=True
    )
    assert list(result) == list(ids) and (result.written, result.skipped) == (len(rows), 0)
    bars = capfd.readouterr().err
    assert "Encoding: 100%" in bars and f"{len(rows)}/{len(rows)}" in bars  # one bar, its total known
    assert ray_coll.count() == own.count() == len(rows)
    mine, theirs = stored(own, ids), stored(ray_coll, ids)
    for key in ids:
        assert mine[key][:2] == theirs[key][:2]
        assert np.allclose(mine[key][2], theirs[key][2], atol=1e-5)


@pytest.mark.parametrize("engines", ["edge", "memory"], indirect=True)
def test_documents_dataset_stores_what_upsert_documents_stores(
    local_ray: None, engines: Engines, encoder: SentenceEncoder, model_dir: Path
) -> None:
    with (DATA / "scifact_sample.jsonl").open(encoding="utf-8") as f:
        docs = [json.loads(line) for line in f][:12]
    docs = [
        {"doc": d["_id"], "text": d["text"], "title": " ".join(d["title"].split()[:5])}
        for d in docs
        if d["text"].strip()
    ]
    options: dict[str, Any] = {"chunk_tokens": 24, "context_field": "title"}
    own, ray_coll = engines.open(encoder, "own"), engines.open(encoder, "ray")
    ids = own.upsert_documents(
        [d["text"] for d in docs],
        ids=[d["doc"] for d in docs],
        payloads=[{"title": d["title"]} for d in docs],
        **options,
    )
    result = sbert_ray.upsert_documents_dataset(
        ray.data.from_items(docs), ray_coll, id_column="doc", model=model_dir, precision="fp32", batch_size=4, **options
    )
    assert list(result) == list(ids) and result.written == len(docs)
    for kind in ("documents", "chunks"):
        assert ray_coll.count(kind=kind) == own.count(kind=kind)
    assert own.count(kind="chunks") > 2 * len(docs)  # documents of several chunks each
    for key in ids:
        assert ray_coll.get_document(key) == own.get_document(key)
    query = "stem cells tracked with nanoparticles"
    hits = [{h.id: h.score for h in c.search_documents(query, limit=5)} for c in (own, ray_coll)]
    assert hits[0].keys() == hits[1].keys()
    assert all(abs(hits[0][k] - hits[1][k]) < 1e-4 for k in hits[0])


class DieOnce:
    """A pipeline stage whose worker process dies (os._exit) on its second batch, the first time only."""

    def __init__(self, marker: str) -> None:
        self.marker, self.calls = Path(marker), 0

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 2 and not self.marker.exists():
            self.marker.touch()
            os._exit(1)
        return batch


@pytest.mark.parametrize("engines", ["edge"], indirect=True)
def test_a_worker_dying_mid_run_loses_and_duplicates_nothing_and_a_rerun_writes_nothing(
    local_ray: None, engines: Engines, encoder: SentenceEncoder, model_dir: Path, rows: list[Any], tmp_path: Path
) -> None:
    coll = engines.open(encoder)
    marker = tmp_path / "died"
    ray.cloudpickle.register_pickle_by_value(sys.modules[DieOnce.__module__])  # workers cannot import tests/
    dying = ray.data.from_items(rows, override_num_blocks=5).map_batches(
        DieOnce,
        fn_constructor_args=(str(marker),),
        compute=ray.data.ActorPoolStrategy(size=1),
        batch_size=8,
    )
    result = sbert_ray.upsert_dataset(dying, coll, id_column="qid", model=model_dir, precision="fp32", batch_size=8)
    assert marker.exists()  # the worker did die
    assert list(result) == [r["qid"] for r in rows] and result.written == len(rows)
    assert coll.count() == len(rows)
    assert sorted(t.id for t in coll.get([r["qid"] for r in rows])) == sorted(r["qid"] for r in rows)
    again = upsert(rows, coll, model_dir, id_column="qid", on_conflict="skip")
    assert (again.written, again.skipped, list(again)) == (0, len(rows), [r["qid"] for r in rows])
    assert coll.count() == len(rows)


@pytest.mark.parametrize("engines", ["edge"], indirect=True)
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"qid": "q30", "text": "   "}, r"row 30 \(qid='q30'\): column 'text' is empty"),
        ({"qid": "q30", "text": None}, r"row 30 \(qid='q30'\): column 'text' is NoneType"),
    ],
)
def test_a_bad_row_stops_the_run_naming_it_and_keeps_what_was_written(
    local_ray: None,
    engines: Engines,
    encoder: SentenceEncoder,
    model_dir: Path,
    rows: list[Any],
    bad: dict[str, Any],
    match: str,
) -> None:
    coll = engines.open(encoder)
    broken = [{"qid": r["qid"], "text": r["text"]} for r in rows[:30]] + [bad]
    with pytest.raises((InvalidInputError, PartialWriteError), match=match) as caught:
        upsert(broken, coll, model_dir, id_column="qid", batch_size=8)
    assert isinstance(caught.value, PartialWriteError) and caught.value.written_ids == [r["qid"] for r in rows[:24]]
    assert coll.count() == 24  # the three whole batches before the bad one
    if bad["text"] is None:  # once: the fixed rows resume where the run stopped
        fixed = upsert(broken[:30], coll, model_dir, id_column="qid", on_conflict="skip")
        assert (fixed.written, fixed.skipped, coll.count()) == (6, 24, 30)


def test_arguments_are_checked_before_any_work(local_ray: None, tmp_path: Path, encoder: SentenceEncoder) -> None:
    engines = Engines("sync", "edge", tmp_path)
    try:
        coll, dataset = engines.open(encoder), ray.data.from_items([{"text": "a"}])
        for options, match in [
            ({"url": "http://localhost:6333", "bulk": True}, "bulk=True needs one writer"),
            ({"actors": 0}, "actors=0 must be a positive integer"),
            ({"gpus_per_actor": -1}, "gpus_per_actor=-1 must be a number >= 0"),
            ({"text_column": "body"}, r"no column\(s\) \['body'\]"),
        ]:
            with pytest.raises(InvalidArgumentError, match=match):
                sbert_ray.upsert_dataset(dataset, coll, **options)
        assert not coll.exists()
    finally:
        engines.close()


def test_actors_load_the_encoder_a_collection_loads_from_the_settings(
    monkeypatch: pytest.MonkeyPatch, model_dir: Path
) -> None:
    """SBERT_QDRANT_MODEL / _DEVICE / _PRECISION / _TRUNCATE_DIM reach the actors as they reach a collection opened
    without an encoder: one EncoderSpec, read in the driver (the actor is built here, from what the driver sends)."""
    monkeypatch.setenv("SBERT_QDRANT_MODEL", str(model_dir))
    monkeypatch.setenv("SBERT_QDRANT_DEVICE", "cpu")
    monkeypatch.setenv("SBERT_QDRANT_PRECISION", "fp32")  # not the default ("auto"): proves the setting is read
    monkeypatch.setenv("SBERT_QDRANT_TRUNCATE_DIM", "16")
    loads: list[dict[str, Any]] = []
    load = SentenceEncoder.load

    def recorded(*args: Any, **kwargs: Any) -> SentenceEncoder:
        loads.append(kwargs)
        return load(*args, **kwargs)

    monkeypatch.setattr(SentenceEncoder, "load", recorded)
    with TextCollection("settings", client=QdrantClient(":memory:")) as coll:
        assert coll.encoder.precision == "fp32"
    options = actor_options(sbert_ray.Columns(), EncoderSpec.of())
    actor = sbert_ray.EncodeTexts(**pickle.loads(pickle.dumps(options)))  # as Ray ships them to the actors
    assert loads == [{"model": str(model_dir), "device": "cpu", "precision": "fp32", "truncate_dim": 16}] * 2
    assert actor.encoder.dimension == 16
    assert actor.identity == coll.encoder.identity


def test_vectors_of_another_model_are_refused_by_name(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, rows: list[Any]
) -> None:
    other = tmp_path / "other-bert"
    testing.tiny_encoder(seed=1).save(other)
    engines = Engines("sync", "edge", tmp_path)
    try:
        coll = engines.open(encoder)
        with pytest.raises(CollectionMismatchError, match=r"other-bert@\w+.*tiny-bert@\w+"):
            upsert(rows, coll, other)
        assert not coll.exists()
    finally:
        engines.close()


@pytest.mark.skipif(not os.environ.get("QDRANT_URL"), reason="writes from the workers need a Qdrant server: QDRANT_URL")
def test_workers_write_into_a_server_in_parallel(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any]
) -> None:
    url = os.environ["QDRANT_URL"]
    engines = Engines("sync", "server", tmp_path, url)
    try:
        own, ray_coll = engines.open(encoder, "own"), engines.open(encoder, "ray")
        ids = own.upsert_texts([r["text"] for r in rows], ids=[r["qid"] for r in rows])
        result = upsert(rows, ray_coll, model_dir, id_column="qid", payload_columns=[], actors=2, url=url)
        assert sorted(result) == sorted(ids) and result.written == len(rows)
        mine, theirs = stored(own, ids), stored(ray_coll, ids)
        assert all(np.allclose(mine[k][2], theirs[k][2], atol=1e-5) and mine[k][:2] == theirs[k][:2] for k in ids)
    finally:
        engines.close()


def test_cli_index_reads_files_with_ray_and_resumes(
    local_ray: None, tmp_path: Path, model_dir: Path, rows: list[Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """``--no-progress`` shows no bar, the package's or Ray's (nor Ray's notice that its bars are off)."""
    from sbert_qdrant.cli import main

    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path, part in zip(files, (rows[:25], rows[25:]), strict=True):
        path.write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    engine = ["--location", str(tmp_path / "qdrant"), "--model", str(model_dir), "--precision", "fp32", "--no-progress"]
    index = ["index", *map(str, files), "--id-field", "qid", *engine, "--ray", "--actors", "1"]
    assert main(index) == 0
    err = capfd.readouterr().err
    assert f"{len(rows)} written, 0 skipped, 0 failed; {len(rows)} texts stored." in err
    assert main([*index, "--on-conflict", "skip"]) == 0
    err += capfd.readouterr().err
    assert f"0 written, {len(rows)} skipped, 0 failed; {len(rows)} texts stored." in err
    assert "Encoding" not in err and "Progress bars" not in err and "it/s" not in err


@pytest.mark.parametrize(
    ("paths", "match"),
    [
        (["a.jsonl", "b.csv"], r"of formats \['csv', 'jsonl'\]"),
        (["notes.txt"], "notes.txt: cannot tell its format"),
        ([], "non-empty list"),
    ],
)
def test_read_files_tells_the_format_by_name_or_says_how(paths: list[str], match: str) -> None:
    with pytest.raises(DataFormatError, match=match):
        sbert_ray.read_files(paths)


def finished(run: Any, limit: float = 300) -> Any:
    """``run()`` in a thread, its result; a run still going after ``limit`` seconds (a hang) fails the test instead
    of hanging the suite (the tiny model stores 40 rows in seconds)."""
    from concurrent.futures import ThreadPoolExecutor, TimeoutError

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(run).result(timeout=limit)
    except TimeoutError:
        pytest.fail(f"the run made no end in {limit:g} s: a CPU-budget deadlock (ray-project/ray#44687)")
    finally:
        pool.shutdown(wait=False)


@pytest.mark.parametrize(("actors", "cpus_per_actor"), [(2, 1), (1, 2)])
def test_files_read_while_the_actors_hold_every_cpu_store_every_row(
    local_ray: None,
    tmp_path: Path,
    encoder: SentenceEncoder,
    model_dir: Path,
    rows: list[Any],
    actors: int,
    cpus_per_actor: float,
) -> None:
    assert ray.cluster_resources()["CPU"] == actors * cpus_per_actor  # the pool holds every CPU of the cluster
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    engines = Engines("sync", "edge", tmp_path)
    try:
        coll = engines.open(encoder)
        options = {"id_column": "qid", "actors": actors, "cpus_per_actor": cpus_per_actor}
        result = finished(lambda: upsert_files([str(path)], coll, model_dir, **options))
        assert (list(result), result.written, coll.count()) == ([r["qid"] for r in rows], len(rows), len(rows))
    finally:
        engines.close()


def upsert_files(paths: list[str], coll: Any, model_dir: Path, **options: Any) -> Any:
    options = {"model": model_dir, "precision": "fp32", "batch_size": 8, **options}
    return sbert_ray.upsert_dataset(sbert_ray.read_files(paths), coll, **options)


def test_a_pool_that_cannot_fit_next_to_its_reads_is_refused_with_the_numbers(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, rows: list[Any]
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    engines = Engines("sync", "edge", tmp_path)
    try:
        coll = engines.open(encoder)
        read_on_a_cpu = ray.data.read_json(str(path), lines=True)  # Ray's default: each read task asks 1 CPU
        for dataset, options, match in [
            (read_on_a_cpu, {"actors": 2}, r"actors=2 x cpus_per_actor=1 holds 2 of the Ray cluster's 2 CPUs"),
            (read_on_a_cpu, {"cpus_per_actor": 2}, r"cpus_per_actor=2 holds 2 .*\(ReadPandasJSON.* 1 a task"),
            (ray.data.from_items(rows), {"actors": 3}, r"actors=3 x cpus_per_actor=1 asks 3 CPUs, .* has 2"),
            (ray.data.from_items(rows), {"gpus_per_actor": 1}, r"asks 1 GPUs, the Ray cluster has 0"),
        ]:
            with pytest.raises(InvalidArgumentError, match=match):
                sbert_ray.upsert_dataset(dataset, coll, id_column="qid", **options)
        assert not coll.exists()
    finally:
        engines.close()


def write_from_workers(
    items: list[dict[str, Any]], open_collection: Any, columns: Any, model_dir: Path, **chunking: Any
) -> Any:
    """``items`` encoded by an actor and written by ``QdrantDatasink``'s tasks, each opening ``open_collection`` in
    its worker (one at a time: one embedded writer); ``on_conflict="skip"``, the stored ids looked up first as
    ``upsert_dataset`` does (the stored rows dropped before the actor). Documents where ``chunking`` is given."""
    from sbert_qdrant.integrations.ray._cluster import Pool
    from sbert_qdrant.integrations.ray._upsert import _unstored, find_stored, write_from_workers

    documents = bool(chunking)
    dataset = ray.data.from_items(items, override_num_blocks=5)
    with open_collection() as coll:  # the driver looks up what is stored, then lets the workers open the folder
        resume = find_stored(dataset, coll, columns, "skip", documents=documents)
    encoded = _unstored(dataset, columns, resume, Pool(1, 1, 0, 8)).map_batches(
        sbert_ray.EncodeDocuments if documents else sbert_ray.EncodeTexts,
        fn_constructor_kwargs=actor_options(columns, EncoderSpec(str(model_dir), precision="fp32"), **chunking),
        compute=ray.data.ActorPoolStrategy(size=1),
        batch_size=8 if not documents else 2,
        batch_format="numpy",
    )
    sink = sbert_ray.QdrantDatasink(open_collection, columns, "skip", documents, chunking, resume)
    return write_from_workers(encoded, sink, concurrency=1)


def test_the_workers_write_path_stops_at_a_bad_row_and_resumes_without_a_server(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any]
) -> None:
    """``QdrantDatasink`` (the write path of ``url=``) on an embedded collection each write task opens in its worker:
    a bad row stops its task and is named by its number in the dataset; the re-run with ``on_conflict="skip"``
    writes only the rest (the rows stored before are not sent) and the collection equals ``upsert_texts``'s."""
    from functools import partial

    columns = sbert_ray.Columns("text", "qid")
    open_collection = partial(TextCollection, "ray", encoder, location=str(tmp_path / "edge"))
    qids = [r["qid"] for r in rows]
    broken = [*rows[:30], {"qid": "q30", "text": None, "score": 0.0}, *rows[31:]]
    with pytest.raises(PartialWriteError, match=r"row 30 \(qid='q30'\): column 'text' is NoneType") as caught:
        write_from_workers(broken, open_collection, columns, model_dir)
    written, unwritten = caught.value.written_ids, caught.value.unwritten_ids
    assert "q30" in unwritten and sorted(written + unwritten) == sorted(qids)  # every row accounted for, once
    assert written == [q for q in qids if q in written]  # in the dataset's order
    with open_collection() as coll:
        assert coll.count() == len(written)
    result = write_from_workers(rows, open_collection, columns, model_dir)
    assert (list(result), result.written, result.skipped) == (qids, len(unwritten), len(written))
    again = write_from_workers(rows, open_collection, columns, model_dir)
    assert (again.written, again.skipped) == (0, len(rows))
    with TextCollection("own", encoder, client=QdrantClient(":memory:")) as own, open_collection() as coll:
        own.upsert_texts([r["text"] for r in rows], ids=qids, payloads=[{"score": r["score"]} for r in rows])
        mine, theirs = stored(own, qids), stored(coll, qids)
        assert coll.count() == len(rows)
        for key in qids:
            assert mine[key][:2] == theirs[key][:2]
            assert np.allclose(mine[key][2], theirs[key][2], atol=1e-5)


def test_the_workers_write_path_resumes_documents(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path
) -> None:
    """Documents through ``QdrantDatasink``: part written, the rest resumed with ``on_conflict="skip"`` (the stored
    documents not sent: no ``(0, d)`` matrices), the collection equal to ``upsert_documents``'s."""
    from functools import partial

    with (DATA / "scifact_sample.jsonl").open(encoding="utf-8") as f:
        docs = [{"doc": d["_id"], "text": d["text"]} for d in map(json.loads, f) if d["text"].strip()][:10]
    chunking: dict[str, Any] = {"chunk_tokens": 24}
    columns = sbert_ray.Columns("text", "doc")
    open_collection = partial(TextCollection, "ray", encoder, location=str(tmp_path / "edge"))
    first = write_from_workers(docs[:4], open_collection, columns, model_dir, **chunking)
    assert (first.written, first.skipped) == (4, 0)
    result = write_from_workers(docs, open_collection, columns, model_dir, **chunking)
    assert (list(result), result.written, result.skipped) == ([d["doc"] for d in docs], 6, 4)
    with TextCollection("own", encoder, client=QdrantClient(":memory:")) as own, open_collection() as coll:
        ids = own.upsert_documents([d["text"] for d in docs], ids=[d["doc"] for d in docs], **chunking)
        for kind in ("documents", "chunks"):
            assert coll.count(kind=kind) == own.count(kind=kind)
        for key in ids:
            assert coll.get_document(key) == own.get_document(key)


def test_the_sink_numbers_rows_across_its_tasks_and_lists_every_unwritten_row(
    tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any]
) -> None:
    """``QdrantDatasink.write`` called as Ray calls it, here in-process: two write tasks finishing out of order, a
    blank text in the second block of the first; the error numbers the row in the dataset, the other task's rows are
    written, and ``unwritten_ids`` lists the rest of the stopped task too."""
    from functools import partial
    from types import SimpleNamespace

    from ray.data.block import BlockAccessor
    from ray.data.datasource.datasink import WriteResult

    columns = sbert_ray.Columns("text", "qid")
    actor = sbert_ray.EncodeTexts(**actor_options(columns, EncoderSpec(str(model_dir), precision="fp32")))
    items = [*rows[:10], {"qid": "q10", "text": "  ", "score": 0.0}, *rows[11:24]]
    qids = [r["qid"] for r in items]

    def block(part: list[dict[str, Any]]) -> Any:
        return BlockAccessor.batch_to_block(
            actor({k: np.array([r[k] for r in part]) for k in ("qid", "text", "score")})
        )

    open_collection = partial(TextCollection, "sink", encoder, location=str(tmp_path / "edge"))
    sink = sbert_ray.QdrantDatasink(open_collection, columns, "overwrite", documents=False)
    late = sink.write([block(items[20:])], SimpleNamespace(task_idx=1))
    early = sink.write([block(items[:8]), block(items[8:16]), block(items[16:20])], SimpleNamespace(task_idx=0))
    numbered = r"stopped at row 10 .*row 10 \(qid='q10'\): column 'text' is empty"
    with pytest.raises(PartialWriteError, match=numbered) as caught:
        sink.on_write_complete(WriteResult(num_rows=len(items), size_bytes=0, write_returns=[late, early]))
    assert caught.value.written_ids == qids[:8] + qids[20:]
    assert caught.value.unwritten_ids == qids[8:20]
    with open_collection() as coll:
        assert coll.count() == 12


def test_a_stopped_run_lists_every_row_of_the_dataset_as_written_or_not(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any]
) -> None:
    """The driver's write path: ``PartialWriteError`` names every row, the rows stored before the run among the
    written ones and the rows never read (after the bad one) among the unwritten ones, in the dataset's order."""
    engines = Engines("sync", "edge", tmp_path)
    try:
        coll = engines.open(encoder)
        qids = [r["qid"] for r in rows]
        upsert(rows[:10], coll, model_dir, id_column="qid")
        broken = [*rows[:30], {"qid": "q30", "text": "   ", "score": 0.0}, *rows[31:]]
        with pytest.raises(PartialWriteError, match=r"row 30 \(qid='q30'\)") as caught:
            upsert(broken, coll, model_dir, id_column="qid", batch_size=8, on_conflict="skip")
        written, unwritten = caught.value.written_ids, caught.value.unwritten_ids
        assert written == qids[: len(written)] and unwritten == qids[len(written) :]  # all 40, in order
        assert 10 < len(written) <= 30 and coll.count() == len(written)
    finally:
        engines.close()


def test_an_id_repeated_across_the_sinks_tasks_is_refused_naming_both_rows(
    tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any]
) -> None:
    """Each write task writes its own rows, so a repeated explicit id in another task is seen by the driver only:
    the run still stops with an error naming the row and the row it repeats, by their numbers in the dataset."""
    from functools import partial
    from types import SimpleNamespace

    from ray.data.block import BlockAccessor
    from ray.data.datasource.datasink import WriteResult

    columns = sbert_ray.Columns("text", "qid")
    actor = sbert_ray.EncodeTexts(**actor_options(columns, EncoderSpec(str(model_dir), precision="fp32")))
    items = [*rows[:20], {"qid": "q3", "text": "a repeated id", "score": 0.0}, *rows[21:24]]

    def block(part: list[dict[str, Any]]) -> Any:
        return BlockAccessor.batch_to_block(
            actor({k: np.array([r[k] for r in part]) for k in ("qid", "text", "score")})
        )

    open_collection = partial(TextCollection, "sink", encoder, location=str(tmp_path / "edge"))
    sink = sbert_ray.QdrantDatasink(open_collection, columns, "overwrite", documents=False)
    parts = [sink.write([block(items[:12])], SimpleNamespace(task_idx=0))]
    parts.append(sink.write([block(items[12:])], SimpleNamespace(task_idx=1)))
    with pytest.raises(PartialWriteError, match=r"row 20 repeats row 3 \('q3', the same point\); ids must be unique"):
        sink.on_write_complete(WriteResult(num_rows=len(items), size_bytes=0, write_returns=parts))


def test_a_resumed_run_that_stores_nothing_new_still_lists_what_is_stored(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any]
) -> None:
    """The driver's path: the first row not stored before the run is bad, so nothing new is stored; the error is
    still a ``PartialWriteError`` listing the rows stored before among the written ones."""
    engines = Engines("sync", "edge", tmp_path)
    try:
        coll = engines.open(encoder)
        qids = [r["qid"] for r in rows]
        upsert(rows[:10], coll, model_dir, id_column="qid")
        broken = [*rows[:10], {"qid": "q10", "text": "   ", "score": 0.0}, *rows[11:]]
        with pytest.raises(PartialWriteError, match=r"row 10 \(qid='q10'\)") as caught:
            upsert(broken, coll, model_dir, id_column="qid", batch_size=8, on_conflict="skip")
        assert (caught.value.written_ids, caught.value.unwritten_ids) == (qids[:10], qids[10:])
        assert coll.count() == 10
    finally:
        engines.close()


def test_the_workers_collection_is_created_by_the_driver_and_another_model_writes_nothing(
    tmp_path: Path, encoder: SentenceEncoder, rows: list[Any]
) -> None:
    """Before the workers write, the driver creates the collection from its own encoder (``create``: no row of the
    dataset is run for it) and leaves an existing one as it is; a write task holding another model's vectors is
    refused by name before it writes anything."""
    from functools import partial
    from types import SimpleNamespace

    from ray.data.block import BlockAccessor
    from ray.data.datasource.datasink import WriteResult

    other = tmp_path / "other-bert"
    testing.tiny_encoder(seed=1).save(other)
    columns = sbert_ray.Columns("text", "qid")
    actor = sbert_ray.EncodeTexts(**actor_options(columns, EncoderSpec(str(other), precision="fp32")))
    block = BlockAccessor.batch_to_block(actor({k: np.array([r[k] for r in rows[:8]]) for k in ("qid", "text")}))
    open_collection = partial(TextCollection, "sink", encoder, location=str(tmp_path / "edge"))
    with open_collection() as coll:
        coll.create()
        assert coll.exists() and coll.count() == 0
        coll.upsert_texts(["stored"])
        coll.create()
        assert coll.count() == 1
    sink = sbert_ray.QdrantDatasink(open_collection, columns, "overwrite", documents=False)
    part = sink.write([block], SimpleNamespace(task_idx=0))
    with pytest.raises(CollectionMismatchError, match=r"other-bert@\w+.*tiny-bert@\w+"):
        sink.on_write_complete(WriteResult(num_rows=8, size_bytes=0, write_returns=[part]))
    with open_collection() as coll:
        assert coll.count() == 1


def test_a_materialized_dataset_of_files_asks_no_read_cpu(local_ray: None, tmp_path: Path, rows: list[Any]) -> None:
    """Read already: no task waits for a CPU, so a pool may hold every CPU (what a stage asks is Ray's own plan's)."""
    from sbert_qdrant.integrations.ray._cluster import Pool, stage_cpus

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    lazy = ray.data.read_json(str(path), lines=True)
    materialized = lazy.materialize()
    assert list(stage_cpus(lazy).values()) == [1] and stage_cpus(materialized) == {}
    Pool(2, 1, 0, 8).check_fits(materialized)


def test_the_actors_look_stored_ids_up_in_one_shared_read_only_array(local_ray: None) -> None:
    """Resume memory: the ids stored before the run reach a worker as a reference to one sorted array in Ray's object
    store, mapped read-only (not a copy, not a set per actor); the lookup is exact."""
    from sbert_qdrant.integrations.ray._stored import StoredIds, points
    from sbert_qdrant.records import id_mark

    keys: list[Any] = [f"q{i}" for i in range(3000)] + list(range(100))
    stored = StoredIds(points(map(id_mark, keys[::3])))
    assert len(pickle.dumps(stored.__getstate__()["count"])) < 100 and stored.count == 1034

    @ray.remote
    def look_up(ids: StoredIds, asked: list[Any]) -> tuple[list[bool], bool]:
        return ids.marks(asked).tolist(), ids._points is not None and ids._points.flags.writeable

    asked = [*keys, "q1", 3, "3", None, 1.5]
    found, writeable = ray.get(look_up.remote(stored, asked))
    assert found == [i % 3 == 0 for i in range(len(keys))] + [False, True, False, False, False]
    assert not writeable  # mapped from the object store


#: Drivers that start Ray through the package: ``connect()``; a bare ``ray.init()`` (its dashboard and agents
#: included), then a run of the package (here refused at once: the watcher starts before any check).
_DRIVERS = {
    "connect": "connect()\n",
    "ray.init then a run": (
        "ray.init(num_cpus=2)\n"
        "from sbert_qdrant import TextCollection, testing\n"
        "with TextCollection('w', testing.tiny_encoder(), location=sys.argv[1]) as coll:\n"
        "    try:\n"
        "        upsert_dataset(ray.data.from_items([{'text': 'a'}]), coll, actors=3)\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, file=sys.stderr)\n"
    ),
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watcher reads /proc (Linux)")
@pytest.mark.parametrize("start", list(_DRIVERS))
def test_ray_started_through_the_package_ends_with_a_killed_driver(start: str, tmp_path: Path) -> None:
    """SIGKILL leaves no atexit to run: every process below the driver (GCS, raylet, Ray's agents, workers) is
    gone soon after it, ended by the watcher that ``connect`` and every run of the package start where Ray runs
    below the driver."""
    import subprocess
    import time

    script = (
        "import json, os, sys, time, ray\n"
        "from sbert_qdrant.integrations.ray import connect, upsert_dataset\n"
        "from sbert_qdrant.integrations.ray._reaper import descendants\n"
        + _DRIVERS[start]
        + "ray.get(ray.remote(lambda: 1).remote())\n"
        "time.sleep(2)\n"
        "print(json.dumps(descendants(os.getpid())), flush=True)\n"
        "time.sleep(600)\n"
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "edge")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        below = [tuple(p) for p in json.loads(driver.stdout.readline())]  # type: ignore[union-attr]
        watchers = [p for p in below if "_reaper.py" in _command(p[0])]
    finally:
        driver.kill()
        driver.wait()
    assert len(below) >= 3  # GCS, raylet, agents, a worker, the watcher
    assert len(watchers) == 1, f"one watcher expected below the driver, found {len(watchers)}"
    deadline = time.monotonic() + 30
    while (alive := [p for p in below if _start(p[0]) == p[1]]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not alive, f"still running after the driver was killed: {alive}"


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _start(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def test_a_resume_drops_the_stored_rows_before_the_actors_and_refuses_a_repeated_id(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any]
) -> None:
    """``on_conflict="skip"``: the stored rows are dropped before the actors (only the missing rows reach them); a
    run with nothing missing starts no actor (a model that does not exist is never loaded); a repeated id is
    refused before any work, as ``upsert_texts`` refuses it, where it used to pass as skipped."""
    from sbert_qdrant.integrations.ray._cluster import Pool
    from sbert_qdrant.integrations.ray._upsert import _unstored, find_stored

    engines = Engines("sync", "edge", tmp_path)
    try:
        coll = engines.open(encoder)
        qids = [r["qid"] for r in rows]
        upsert(rows[:30], coll, model_dir, id_column="qid")
        nowhere = tmp_path / "no-such-model"
        done = upsert(rows[:30], coll, nowhere, id_column="qid", on_conflict="skip")
        assert (list(done), done.written, done.skipped) == (qids[:30], 0, 30)
        repeated = [*rows[:30], {"qid": "q3", "text": "a repeated id", "score": 0.0}, *rows[30:]]
        with pytest.raises(InvalidInputError, match=r"row 30 repeats row 3 \('q3', the same point\); ids must"):
            upsert(repeated, coll, model_dir, id_column="qid", on_conflict="skip")
        assert coll.count() == 30
        columns = sbert_ray.Columns("text", "qid")
        dataset = ray.data.from_items(rows, override_num_blocks=4)
        resume = find_stored(dataset, coll, columns, "skip", documents=False)
        sent = _unstored(dataset, columns, resume, Pool(1, 1, 0, 8)).take_all()
        assert [r["qid"] for r in sent] == qids[30:] and resume.missing == 10
        result = upsert(rows, coll, model_dir, id_column="qid", on_conflict="skip")
        assert (list(result), result.written, result.skipped, coll.count()) == (qids, 10, 30, 40)
    finally:
        engines.close()
