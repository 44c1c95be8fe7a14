"""Ray ingestion's fourth pass (issue 57), on the shared local Ray (2 CPUs): the default model on the workers' write
path (no model pickled to a write task), the collection's own encoder settings in the actors, every reader either
fitting beside a pool on every CPU or refused at once, repeated ids refused before any work, a SIGINT that stops the
command promptly, and a nothing-missing re-run that starts no Ray and loads no model."""

from __future__ import annotations

import csv
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA

from sbert_qdrant import (
    CollectionMismatchError,
    InvalidArgumentError,
    InvalidInputError,
    SentenceEncoder,
    TextCollection,
)

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'sbert-qdrant[ray]'")
sbert_ray = pytest.importorskip("sbert_qdrant.integrations.ray")
import test_ray  # noqa: E402

# The fixtures of tests/test_ray.py: one local Ray for the run, the tiny encoder, its rows.
local_ray, model_dir, encoder, rows = test_ray.local_ray, test_ray.model_dir, test_ray.encoder, test_ray.rows

_upsert = pytest.importorskip("sbert_qdrant.integrations.ray._upsert")
from sbert_qdrant.encoder import EncoderSpec  # noqa: E402
from sbert_qdrant.integrations.ray._own import Written  # noqa: E402
from sbert_qdrant.integrations.ray._sink import WriteTarget  # noqa: E402


def questions(count: int) -> list[dict[str, Any]]:
    """``count`` distinct short texts (STS-B sentences, numbered), with ids."""
    with (DATA / "stsb_dev_sample.tsv").open(encoding="utf-8") as f:
        texts = list(dict.fromkeys(p["sentence1"] for p in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)))
    return [{"qid": f"q{i}", "text": f"{texts[i % len(texts)]} ({i})"} for i in range(count)]


def cosines(a: TextCollection, b: TextCollection, ids: list[Any]) -> np.ndarray:
    mine, theirs = ({t.id: t.vector for t in c.get(ids, with_vectors=True)} for c in (a, b))
    left, right = (np.stack([np.asarray(v[k], dtype=np.float64) for k in ids]) for v in (mine, theirs))
    return np.einsum("ij,ij->i", left, right) / np.linalg.norm(left, axis=1) / np.linalg.norm(right, axis=1)


def open_part(target: Any) -> TextCollection:
    """A write task's collection: an Edge folder of its own under ``target.url`` (no server here), opened from the
    target's plain values as ``open_on_server`` opens the server's."""
    folder = Path(target.url) / uuid.uuid4().hex
    return TextCollection(target.name, target.encoder, location=str(folder), layout=target.layout)


def test_the_workers_write_the_default_model_s_vectors_with_no_model_pickled(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``url=`` with the default model at "auto" (static int8 on an AVX-512 VNNI CPU, which does not pickle): each
    write task opens the collection from its name, address, layout and the encoder's identity; every row is written,
    the vectors those of ``upsert_texts``."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    monkeypatch.setattr(_upsert, "open_on_server", open_part)
    items = questions(40)
    with TextCollection("own", SentenceEncoder.load(), location=str(tmp_path / "own")) as own:
        target = WriteTarget("w", "x", own.layout, Written(own.encoder, EncoderSpec()))
        assert len(pickle.dumps(target)) < 20_000  # plain values (the model: ~90 MB at fp32, int8 not at all)
        ids = own.upsert_texts([r["text"] for r in items], ids=[r["qid"] for r in items])
        with TextCollection("ray", own.encoder, location=str(tmp_path / "driver")) as coll:
            result = sbert_ray.upsert_dataset(
                ray.data.from_items(items, override_num_blocks=4), coll, id_column="qid", batch_size=10,
                url=str(tmp_path / "parts"),
            )  # fmt: skip
        assert (list(result), result.written) == (list(ids), len(items))
        parts = [TextCollection("ray", own.encoder, location=str(p)) for p in (tmp_path / "parts").iterdir()]
        try:
            assert sum(p.count() for p in parts) == len(items)
            for part in parts:
                stored = [t.id for t in part.get(ids)]
                assert cosines(own, part, stored).min() > 0.999  # int8 both, batch rows padded apart
        finally:
            for part in parts:
                part.close()


def test_a_fp32_collection_filled_through_ray_equals_upsert_texts_and_other_settings_are_refused(
    local_ray: None, tmp_path: Path, default_encoder: SentenceEncoder
) -> None:
    """The actors load the collection's own settings (fp32 here, where "auto" would be int8); a call asking for
    another precision or cut is refused before any work, as another model is."""
    items = questions(60)
    with (
        TextCollection("own", default_encoder, location=str(tmp_path / "own")) as own,
        TextCollection("ray", default_encoder, location=str(tmp_path / "ray")) as coll,
    ):
        ids = own.upsert_texts([r["text"] for r in items], ids=[r["qid"] for r in items])
        dataset = ray.data.from_items(items)
        for options, match in [
            ({"precision": "int8"}, "precision='int8'"),
            ({"truncate_dim": 128}, "truncate_dim=128"),
        ]:
            with pytest.raises(CollectionMismatchError, match=match):
                sbert_ray.upsert_dataset(dataset, coll, id_column="qid", **options)
        assert not coll.exists()
        result = sbert_ray.upsert_dataset(dataset, coll, id_column="qid", batch_size=32)
        assert result.written == len(items)
        assert cosines(own, coll, list(ids)).min() >= 0.9999


def _readers(folder: Path, items: list[dict[str, Any]]) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(items), folder / "rows.parquet")
    with (folder / "rows.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["qid", "text"])
        writer.writeheader()
        writer.writerows(items)
    (folder / "rows.txt").write_text("".join(r["text"] + "\n" for r in items), encoding="utf-8")
    parquet, csv_file = str(folder / "rows.parquet"), str(folder / "rows.csv")
    return {
        "read_parquet": lambda: ray.data.read_parquet(parquet),
        "read_parquet num_cpus=0": lambda: ray.data.read_parquet(parquet, num_cpus=0),  # its file listing asks 1
        "read_csv": lambda: ray.data.read_csv(csv_file),
        "read_text": lambda: ray.data.read_text(str(folder / "rows.txt")),
        "read_files parquet": lambda: sbert_ray.read_files([parquet]),
        "read_files csv": lambda: sbert_ray.read_files([csv_file]),
        "read_csv num_cpus=0": lambda: ray.data.read_csv(csv_file, num_cpus=0),
    }


@pytest.mark.parametrize(("actors", "cpus_per_actor"), [(2, 1), (1, 2)])
def test_every_reader_fits_beside_a_pool_on_every_cpu_or_is_refused_at_once(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, actors: int, cpus_per_actor: float
) -> None:
    """What each stage asks is read from Ray's own plan (Parquet's file listing asks 1 CPU whatever num_cpus= says):
    a reader that asks a CPU is refused with the numbers in well under 5 s; the others finish (a hang fails)."""
    items = questions(40)
    refused = {"read_parquet", "read_parquet num_cpus=0", "read_csv", "read_text"}
    for name, read in _readers(tmp_path, items).items():
        with TextCollection(name.replace(" ", "_").replace("=", ""), encoder, location=str(tmp_path / "edge")) as coll:
            options = {"model": model_dir, "precision": "fp32", "actors": actors, "cpus_per_actor": cpus_per_actor}
            start = time.monotonic()
            if name in refused:
                with pytest.raises(InvalidArgumentError, match=r"holds 2 of the Ray cluster's 2 CPUs.* 1 a task"):
                    sbert_ray.upsert_dataset(
                        read(), coll, **({"id_column": "qid"} if "text" not in name else {}), **options
                    )
                assert time.monotonic() - start < 5, name
                assert not coll.exists()
            elif actors == 2:  # the reads that fit: once (each run starts the actors)
                dataset = read()
                result = test_ray.finished(lambda: sbert_ray.upsert_dataset(dataset, coll, id_column="qid", **options))  # noqa: B023
                assert (result.written, coll.count()) == (len(items), len(items)), name


@pytest.mark.parametrize("url", [False, True])
def test_a_repeated_id_is_refused_before_any_work_in_overwrite_mode(
    local_ray: None, tmp_path: Path, encoder: SentenceEncoder, model_dir: Path, rows: list[Any], url: bool
) -> None:
    """``on_conflict="overwrite"`` (the default): the ids are read first; 0 rows written, on both write paths."""
    repeated = [*rows[:30], {"qid": "q3", "text": "a repeated id", "score": 0.0}, *rows[30:]]
    with TextCollection("repeat", encoder, location=str(tmp_path / "edge")) as coll:
        with pytest.raises(InvalidInputError, match=r"row 30 repeats row 3 \('q3', the same point\).* drop it"):
            sbert_ray.upsert_dataset(
                ray.data.from_items(repeated), coll, id_column="qid", model=model_dir, precision="fp32",
                url=str(tmp_path / "parts") if url else None,
            )  # fmt: skip
        assert not coll.exists() and not (tmp_path / "parts").exists()


def test_a_nothing_missing_rerun_of_the_cli_starts_no_ray_and_loads_no_model(
    local_ray: None, tmp_path: Path, model_dir: Path, rows: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sbert_qdrant.cli import main

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    index = ["index", str(path), "--id-field", "qid", "--location", str(tmp_path / "edge"), "--model", str(model_dir)]
    index += ["--precision", "fp32", "--no-progress", "--ray", "--on-conflict", "skip"]
    assert main(index) == 0

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("started Ray or loaded a model")

    monkeypatch.setattr(sbert_ray, "connect", refused)
    monkeypatch.setattr(SentenceEncoder, "load", refused)
    assert main(index) == 0
    path.write_text(path.read_text() + json.dumps({"qid": "new", "text": "one more row"}) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="started Ray"):  # a row missing: the run itself
        main(index)


def test_sigint_stops_the_cli_promptly_and_a_rerun_resumes(local_ray: None, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the command's process group, Ray's processes included) during ``index --ray`` with the
    default model: the command ends within 10 s with exit status 130, the batches written stay, the same command
    with ``--on-conflict skip`` writes the rest."""
    items = questions(1200)  # 4 blocks of 300 rows reach the driver
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    command = [sys.executable, "-m", "sbert_qdrant", "index", str(path), "--id-field", "qid"]
    command += ["--location", str(tmp_path / "edge"), "--batch-size", "32", "--ray", "--actors", "1"]
    run = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True
    )
    said: list[str] = []

    def read() -> None:
        while character := run.stderr.read(1):  # type: ignore[union-attr]
            said.append(character)

    reading = threading.Thread(target=read, daemon=True)
    reading.start()
    try:
        deadline = time.monotonic() + 240
        while not re.search(r"Encoding: .*\b[1-9]\d+/1200", "".join(said)) and time.monotonic() < deadline:
            assert run.poll() is None, "".join(said)[-2000:]
            time.sleep(0.1)
        time.sleep(1)  # the first block arrived: written within this second
        os.killpg(run.pid, signal.SIGINT)
        stopped = time.monotonic()
        status = run.wait(timeout=30)
        took = time.monotonic() - stopped
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    reading.join(5)
    told = "".join(said)
    assert (status, took < 10) == (130, True), (took, told[-2000:])
    assert "stopped by SIGINT: the batches written stay; run the same command with --on-conflict skip" in told
    with TextCollection("texts", SentenceEncoder.load(), location=str(tmp_path / "edge")) as coll:
        written = coll.count()
        assert 0 < written < len(items)
        result = sbert_ray.upsert_dataset(
            sbert_ray.read_files([str(path)]), coll, id_column="qid", on_conflict="skip", batch_size=256
        )
        assert (result.written, result.skipped, coll.count()) == (len(items) - written, written, len(items))


def test_the_workers_write_documents_chunked_by_the_tokenizer_they_load(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_dir: Path, encoder: SentenceEncoder
) -> None:
    """``url=`` for documents: each write task cuts a document into the chunks the actors encoded with the tokenizer
    it loads from the actors' spec (``Written``), the documents equal to ``upsert_documents``'."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.setattr(_upsert, "open_on_server", open_part)
    with (DATA / "scifact_sample.jsonl").open(encoding="utf-8") as f:
        docs = [{"doc": d["_id"], "text": d["text"]} for d in map(json.loads, f) if d["text"].strip()][:8]
    own_encoder = SentenceEncoder.load(model_dir, device="cpu", precision="fp32")  # loaded from its folder
    with (
        TextCollection("own", own_encoder, location=str(tmp_path / "own")) as own,
        TextCollection("ray", own_encoder, location=str(tmp_path / "driver")) as coll,
    ):
        ids = own.upsert_documents([d["text"] for d in docs], ids=[d["doc"] for d in docs], chunk_tokens=24)
        result = sbert_ray.upsert_documents_dataset(
            ray.data.from_items(docs, override_num_blocks=2), coll, id_column="doc", chunk_tokens=24, batch_size=2,
            url=str(tmp_path / "parts"),
        )  # fmt: skip
        assert (list(result), result.written) == (list(ids), len(docs))
        stored = 0
        for folder in (tmp_path / "parts").iterdir():
            with TextCollection("ray", own_encoder, location=str(folder)) as part:
                stored += part.count(kind="documents")
                for key in ids:
                    got = part.get_document(key)
                    assert got is None or got == own.get_document(key)
        assert stored == len(docs)
