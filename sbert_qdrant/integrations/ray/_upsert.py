"""``upsert_dataset`` / ``upsert_documents_dataset``: a Ray Dataset encoded by an actor pool, written into a collection
with the collection's own checks, ids and pipeline (``upsert_texts(..., vectors_from=)``); texts and documents take
one run (``_run``), differing only in the actor and the collection call (``_rows.write_records``)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import ray.data
from ray.util.debug import log_once

from ...collection import TextCollection
from ...encoder import EncoderSpec, LoadOptions
from ...errors import InvalidArgumentError
from ...records import UpsertResult, id_mark
from ...types import IdKind, OnConflict
from ._cluster import Pool, connect
from ._encode import Columns, EncodeDocuments, EncodeTexts
from ._interrupt import pulled, stopping
from ._own import Written, actor_spec, text_length
from ._read import READ_CPUS
from ._rows import KEYS_BATCH, first_repeat, write_records
from ._sink import WRITE_CPUS, QdrantDatasink, WriteTarget, open_on_server
from ._stored import Resume, StoredIds, drop_stored, points
from ._stream import Stream, chunks, keys, known_rows

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)


def upsert_dataset(
    dataset: ray.data.Dataset,
    collection: TextCollection,
    *,
    text_column: str = "text",
    id_column: str | None = None,
    payload_columns: Sequence[str] | None = None,
    model: str | os.PathLike[str] | None = None,
    actors: int = 1,
    cpus_per_actor: float = 1,
    gpus_per_actor: float = 0,
    batch_size: int = 1024,
    on_conflict: OnConflict = "overwrite",
    bulk: bool = False,
    url: str | None = None,
    show_progress_bar: bool | None = None,
    **load: Unpack[LoadOptions],
) -> UpsertResult:
    """Encode a dataset's texts on ``actors`` Ray actors and store them in ``collection``, as ``upsert_texts`` would.

    Each actor loads the collection's own encoder once (one ``EncoderSpec``, sent to every actor: its model folder,
    precision, "auto" where it chose it, ``truncate_dim`` and text length), or ``model`` (a folder or hub id) where
    given; ``device=`` (None: ``SBERT_QDRANT_DEVICE``, else the actor's best). A ``precision=`` or ``truncate_dim=``
    (``LoadOptions``) other than the collection encoder's is refused, as vectors of another model are (its identity
    is checked too, another refused by name); where the encoder cannot tell how it was loaded (not from a
    folder), the actors load as ``load_encoder`` does, with this process's settings. Each actor holds
    ``cpus_per_actor`` CPUs (its torch threads) and ``gpus_per_actor`` GPUs; a pool the cluster cannot hold next to
    the read and write tasks (``read_files`` reads, and the workers write, on no CPU) is refused with the numbers
    before any work. ``batch_size`` rows go to an actor at a time, and into one write.
    Payloads: the ``payload_columns`` (None: every other column). Writes: the encoded batches stream to this
    process, which writes them into ``collection`` (embedded Qdrant Edge allows one writer; local mode and a server
    too), one id per row in the dataset's order; with ``url=`` (a Qdrant server) the workers write in parallel
    instead (``QdrantDatasink``, each write task opening the collection from plain values: no model pickled). Ids of
    the ``id_column`` are read first, in every conflict mode: a repeated one is refused before any work.
    ``on_conflict="skip"``: the stored ids are looked up then, the stored rows dropped where the dataset is read,
    before any actor, and a run with nothing missing returns without starting one. A SIGINT stops the run promptly
    (``KeyboardInterrupt``); what was written stays. ``bulk=True``: as in ``upsert_texts`` (a server's indexing paused
    during the load; one writer only).
    Bad rows (blank or non-str text) stop the run with an error naming the row; what was written stays
    (a ``PartialWriteError`` lists it) and a re-run writes the rest.
    """
    pool = Pool(actors, cpus_per_actor, gpus_per_actor, batch_size)
    run = _Run(pool, on_conflict, bulk, url, show_progress_bar, documents=False)
    return _run(dataset, collection, run, (text_column, id_column, payload_columns), (model, load))


def upsert_documents_dataset(
    dataset: ray.data.Dataset,
    collection: TextCollection,
    *,
    text_column: str = "text",
    id_column: str | None = None,
    payload_columns: Sequence[str] | None = None,
    chunk_tokens: int | None = None,
    overlap_tokens: int | None = None,
    context_field: str | None = None,
    model: str | os.PathLike[str] | None = None,
    actors: int = 1,
    cpus_per_actor: float = 1,
    gpus_per_actor: float = 0,
    batch_size: int = 64,
    on_conflict: OnConflict = "overwrite",
    bulk: bool = False,
    url: str | None = None,
    show_progress_bar: bool | None = None,
    **load: Unpack[LoadOptions],
) -> UpsertResult:
    """``upsert_dataset`` for documents: each row's text chunked (as ``upsert_documents`` does with the same
    ``chunk_tokens``, ``overlap_tokens`` and ``context_field``) and its chunks encoded on the actors; one id per
    document. ``batch_size`` counts documents."""
    pool = Pool(actors, cpus_per_actor, gpus_per_actor, batch_size)
    chunking = {"chunk_tokens": chunk_tokens, "overlap_tokens": overlap_tokens, "context_field": context_field}
    run = _Run(pool, on_conflict, bulk, url, show_progress_bar, documents=True, chunking=chunking)
    return _run(dataset, collection, run, (text_column, id_column, payload_columns), (model, load))


@dataclass(frozen=True)
class _Run:
    """How a run encodes and writes: the pool, the write's options, texts or documents (and how they are cut)."""

    pool: Pool
    on_conflict: OnConflict
    bulk: bool
    url: str | None
    show_progress_bar: bool | None
    documents: bool
    chunking: dict[str, Any] = field(default_factory=dict)


def _run(
    dataset: ray.data.Dataset,
    collection: TextCollection,
    run: _Run,
    column_names: tuple[str, str | None, Sequence[str] | None],
    model_and_load: tuple[str | os.PathLike[str] | None, LoadOptions],
) -> UpsertResult:
    """The one run of texts and documents: checks, the rows' ids read (repeats refused) and the stored ones found,
    the actors, then one of the write paths; a SIGINT stops it where it is (``_interrupt``)."""
    connect()  # Ray as it is (or started here); where its processes are this process's, watched (``_reaper``)
    run.pool.check()
    run.pool.check_fits(dataset, write_cpus=WRITE_CPUS if run.url is not None else 0)  # the driver writes: no task
    _check_writers(run.url, run.bulk)
    spec = actor_spec(collection.encoder, *model_and_load)
    show = logger.isEnabledFor(logging.INFO) if run.show_progress_bar is None else run.show_progress_bar
    # One progress bar: the driver's own (rows as the actors' batches arrive); Ray's only where the workers write.
    with stopping(signal.SIGINT), _ray_progress(dataset, show and run.url is not None):
        columns = _columns(dataset, *column_names)
        resume = find_stored(dataset, collection, columns, run.on_conflict, run.documents)
        if resume is not None and not resume.missing:  # every row stored: no actor started, no model loaded
            return resume.merge(UpsertResult())
        actor = EncodeDocuments if run.documents else EncodeTexts
        options = actor_options(columns, spec, **text_length(collection.encoder), **run.chunking)
        rows = resume.missing if resume is not None else known_rows(dataset)
        encoded = _encoded(_unstored(dataset, columns, resume, run.pool), actor, options, run.pool, rows)
        if run.url is not None:
            collection.create()  # here, from the collection's own encoder: the workers never race to create it
            target = WriteTarget(
                collection.collection_name, run.url, collection.layout, Written(collection.encoder, spec)
            )
            sink = QdrantDatasink(
                partial(open_on_server, target), columns, run.on_conflict, run.documents, run.chunking, resume
            )
            return write_from_workers(encoded, sink, concurrency=run.pool.actors)
        stream = Stream(encoded, columns, dataset, resume, show, "doc" if run.documents else "text", rows)
        batch_size = None if run.documents else run.pool.batch_size  # documents: the collection's own batches
        write = partial(write_records, collection, on_conflict=run.on_conflict, documents=run.documents, bulk=run.bulk)
        return stream.write(lambda records: write(records, stream.identity, batch_size=batch_size, **run.chunking))


@contextmanager
def _ray_progress(dataset: ray.data.Dataset, show: bool) -> Iterator[None]:
    """Ray Data's own progress bars on (``show``) or off for the run, the dataset's reads (schema, ids) included; off,
    its console INFO lines too (each execution's start, plan and end; its log file keeps them)."""
    contexts = [dataset.context, ray.data.DataContext.get_current()]
    before = [(c.enable_progress_bars, c.enable_operator_progress_bars) for c in contexts]
    for context in contexts:
        context.enable_progress_bars = context.enable_operator_progress_bars = show
    if not show:  # Ray warns, once, that the bars it was asked to hide are hidden: told already, by the caller
        log_once("ray_data_progress_manager_disabled")
    consoles = [] if show else [h for h in logging.getLogger("ray.data").handlers if _is_console(h)]
    levels = [handler.level for handler in consoles]
    for handler in consoles:
        handler.setLevel(max(handler.level, logging.WARNING))
    try:
        yield
    finally:
        for context, (bars, operator_bars) in zip(contexts, before, strict=True):
            context.enable_progress_bars, context.enable_operator_progress_bars = bars, operator_bars
        for handler, level in zip(consoles, levels, strict=True):
            handler.setLevel(level)


def _is_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)


def _check_writers(url: str | None, bulk: bool) -> None:
    if url is not None and bulk:
        raise InvalidArgumentError(
            "bulk=True needs one writer (the default, url=None): with url= the workers write in parallel, and "
            "no one of them can pause and restore the collection's indexing for the others."
        )


def actor_options(columns: Columns, spec: EncoderSpec, **options: Any) -> dict[str, Any]:
    """The arguments each actor is built with (plain values: they travel pickled): the ``spec`` resolved here, in
    the driver (``actor_spec``), so every actor loads the same model, named the same (half of the encoder's
    identity), with the same load options; ``options``: the text length and the chunking."""
    return {"spec": spec, "columns": columns, **options}


def _columns(dataset: ray.data.Dataset, text: str, id: str | None, payload: Sequence[str] | None) -> Columns:
    if isinstance(payload, str):
        raise InvalidArgumentError(f"payload_columns={payload!r} must be a list of column names; wrap it: [name].")
    columns = Columns(text, id, tuple(payload) if payload is not None else None)
    schema = dataset.schema()
    if schema is not None:
        columns.check(schema.names)
    return columns


def _encoded(
    dataset: ray.data.Dataset,
    actor: type[EncodeTexts] | type[EncodeDocuments],
    options: dict[str, Any],
    pool: Pool,
    rows: int | None,
) -> ray.data.Dataset:
    """The dataset (``rows`` rows where known) with its vectors, encoded by a pool of actors (rows kept in the
    dataset's order)."""
    encoded = dataset.map_batches(
        actor,
        fn_constructor_kwargs=options,
        compute=ray.data.ActorPoolStrategy(size=_actors(pool, rows)),
        num_cpus=pool.cpus,
        num_gpus=pool.gpus or None,
        batch_size=pool.batch_size,
        batch_format="numpy",
    )
    encoded.context.execution_options.preserve_order = True  # ids come back in the dataset's order
    return encoded


def _actors(pool: Pool, rows: int | None) -> int:
    """The actors started: the pool's, or fewer where the rows known make fewer batches (an actor without a batch
    would only load the model, and Ray Data warns of it)."""
    return pool.actors if rows is None else max(1, min(pool.actors, -(-rows // pool.batch_size)))


def _unstored(dataset: ray.data.Dataset, columns: Columns, resume: Resume | None, pool: Pool) -> ray.data.Dataset:
    """The dataset without its rows stored before the run, dropped by tasks that ask no CPU, as the reads (as many at
    a time as actors): a stored row is never encoded, nor handed to an actor through the object store."""
    if resume is None or not resume.ids.count:
        return dataset
    return dataset.map_batches(
        partial(drop_stored, stored=resume.ids, columns=columns),
        compute=ray.data.TaskPoolStrategy(size=pool.actors),
        num_cpus=READ_CPUS,
        batch_size=None,
        batch_format="numpy",
    )


def find_stored(
    dataset: ray.data.Dataset, collection: TextCollection, columns: Columns, on_conflict: OnConflict, documents: bool
) -> Resume | None:
    """Every row's id, read before any work where ids are the dataset's own (a repeated one refused, whatever
    ``on_conflict``) or the run resumes; with ``on_conflict="skip"``, those stored before the run too (ids only,
    looked up batch by batch), for the rows to be dropped before the actors. None: neither."""
    if on_conflict != "skip" and columns.id is None:
        return None  # text-derived ids: a repeated text is the same record, stored once
    every = list(keys(dataset, columns))
    repeat = first_repeat(every, columns)
    if repeat is not None:
        raise repeat[1]
    found: list[np.ndarray] = []
    if on_conflict == "skip" and collection.exists():
        kind: IdKind = "documents" if documents else "texts"
        for chunk in chunks((k for k in every if id_mark(k) is not None), KEYS_BATCH):
            found.append(points(map(id_mark, collection.stored_ids(chunk, kind=kind))))
    ids = StoredIds(np.concatenate(found) if found else points([]))
    return Resume(every, ids.marks(every), ids)


def write_from_workers(encoded: ray.data.Dataset, sink: QdrantDatasink, concurrency: int) -> UpsertResult:
    """The workers' write path: ``sink``'s tasks, ``concurrency`` at a time, asking no CPU (``WRITE_CPUS``), so that
    actors holding every CPU never starve them (their output, which only the writes drain, would fill the object
    store and stop the run)."""

    def written() -> Iterator[UpsertResult]:  # in a thread of its own: a signal stops the wait (``pulled``)
        encoded.write_datasink(sink, ray_remote_args={"num_cpus": WRITE_CPUS}, concurrency=concurrency)
        yield sink.result

    return next(pulled(written()))
