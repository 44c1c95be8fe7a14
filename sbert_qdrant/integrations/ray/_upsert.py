"""``upsert_dataset`` / ``upsert_documents_dataset``: a Ray Dataset encoded by an actor pool, written into a collection
with the collection's own checks, ids and pipeline (``upsert_texts(..., vectors_from=)``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
import ray.data

from ...collection import TextCollection
from ...encoder import encoder_choice
from ...errors import InvalidArgumentError, PartialWriteError, SbertQdrantError
from ...records import Key, UpsertResult
from ...types import IdKind, OnConflict, Precision
from ._cluster import Pool
from ._encode import ENCODER_COLUMN, STORED_COLUMN, Batch, Columns, EncodeDocuments, EncodeTexts
from ._rows import dataset_first_row, encoded_row
from ._sink import QdrantDatasink, open_on_server
from ._stored import StoredIds, points, stored_mark

#: Ids asked of the collection at a time when looking for stored ones (``on_conflict="skip"``), and read at a time.
_LOOKUP_BATCH = 1024


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
    device: str | None = None,
    precision: Precision | None = None,
    on_conflict: OnConflict = "overwrite",
    bulk: bool = False,
    url: str | None = None,
    show_progress_bar: bool | None = None,
) -> UpsertResult:
    """Encode a dataset's texts on ``actors`` Ray actors and store them in ``collection``, as ``upsert_texts`` would.

    Each actor loads ``model`` (a folder or hub id; None: ``SBERT_QDRANT_MODEL``, else the default model) once, on
    ``device`` (None: ``SBERT_QDRANT_DEVICE``, else the actor's best) at ``precision`` (None:
    ``SBERT_QDRANT_PRECISION``, else "auto": fp16 on a GPU), as ``load_encoder`` does, with this process's settings;
    it must be the collection's model (its identity is checked, another is refused by name). Each actor holds
    ``cpus_per_actor`` CPUs (its torch threads) and ``gpus_per_actor`` GPUs; a pool the cluster cannot hold, or one
    that leaves no CPU for the read tasks of a dataset read from files (``read_files`` reads on no CPU), is refused
    with the numbers. ``batch_size`` rows go to an actor at a time, and into one write.
    Payloads: the ``payload_columns`` (None: every other column). Writes: the encoded batches stream to this
    process, which writes them into ``collection`` (embedded Qdrant Edge allows one writer; local mode and a server
    too), one id per row in the dataset's order; with ``url=`` (a Qdrant server) the workers write in parallel
    instead (``QdrantDatasink``). ``on_conflict="skip"``: ids already stored are dropped before they reach an
    encoder. ``bulk=True``: as in ``upsert_texts`` (a server's indexing paused during the load; one writer only).
    Bad rows (blank or non-str text, repeated id) stop the run with an error naming the row; what was written stays
    (a ``PartialWriteError`` lists it) and a re-run writes the rest.
    """
    pool = Pool(actors, cpus_per_actor, gpus_per_actor, batch_size)
    pool.check()
    pool.check_fits(dataset)
    _check_writers(url, bulk)
    columns = _columns(dataset, text_column, id_column, payload_columns)
    stored = find_stored(dataset, collection, columns, on_conflict, documents=False)
    options = actor_options(columns, stored, model, device, precision)
    encoded = _encoded(dataset, EncodeTexts, options, pool)
    if url is not None:
        return _write_from_workers(encoded, collection, url, columns, on_conflict, documents=False)
    stream = _Stream(encoded, columns, dataset)
    return stream.write(
        lambda records: collection.upsert_texts(
            records,
            batch_size=batch_size,
            on_conflict=on_conflict,
            show_progress_bar=show_progress_bar,
            vectors_from=stream.identity,
            bulk=bulk,
        )
    )


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
    device: str | None = None,
    precision: Precision | None = None,
    on_conflict: OnConflict = "overwrite",
    bulk: bool = False,
    url: str | None = None,
    show_progress_bar: bool | None = None,
) -> UpsertResult:
    """``upsert_dataset`` for documents: each row's text chunked (as ``upsert_documents`` does with the same
    ``chunk_tokens``, ``overlap_tokens`` and ``context_field``) and its chunks encoded on the actors; one id per
    document. ``batch_size`` counts documents."""
    pool = Pool(actors, cpus_per_actor, gpus_per_actor, batch_size)
    pool.check()
    pool.check_fits(dataset)
    _check_writers(url, bulk)
    columns = _columns(dataset, text_column, id_column, payload_columns)
    stored = find_stored(dataset, collection, columns, on_conflict, documents=True)
    chunking: dict[str, Any] = dict(
        chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens, context_field=context_field
    )
    options = actor_options(columns, stored, model, device, precision, **chunking)
    encoded = _encoded(dataset, EncodeDocuments, options, pool)
    if url is not None:
        return _write_from_workers(encoded, collection, url, columns, on_conflict, documents=True, **chunking)
    stream = _Stream(encoded, columns, dataset)
    return stream.write(
        lambda records: collection.upsert_documents(
            records,
            on_conflict=on_conflict,
            show_progress_bar=show_progress_bar,
            vectors_from=stream.identity,
            bulk=bulk,
            **chunking,
        )
    )


def _check_writers(url: str | None, bulk: bool) -> None:
    if url is not None and bulk:
        raise InvalidArgumentError(
            "bulk=True needs one writer (the default, url=None): with url= the workers write in parallel, and "
            "no one of them can pause and restore the collection's indexing for the others."
        )


def actor_options(
    columns: Columns,
    stored: StoredIds | None,
    model: str | os.PathLike[str] | None,
    device: str | None,
    precision: Precision | None,
    **chunking: Any,
) -> dict[str, Any]:
    """The arguments each actor is built with (plain values: they travel pickled): the encoder chosen here, in the
    driver, as ``load_encoder`` chooses it, so every actor loads the same model, named the same (half of the
    encoder's identity), on the configured device at the configured precision."""
    choice = encoder_choice(model=model, device=device, precision=precision)
    return {**choice, "columns": columns, "stored": stored, **chunking}


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
) -> ray.data.Dataset:
    """The dataset with its vectors, encoded by a pool of actors (rows kept in the dataset's order)."""
    encoded = dataset.map_batches(
        actor,
        fn_constructor_kwargs=options,
        compute=ray.data.ActorPoolStrategy(size=pool.actors),
        num_cpus=pool.cpus,
        num_gpus=pool.gpus or None,
        batch_size=pool.batch_size,
        batch_format="numpy",
    )
    encoded.context.execution_options.preserve_order = True  # ids come back in the dataset's order
    return encoded


def find_stored(
    dataset: ray.data.Dataset, collection: TextCollection, columns: Columns, on_conflict: OnConflict, documents: bool
) -> StoredIds | None:
    """With ``on_conflict="skip"``, the dataset's rows already stored (read before encoding, ids only, batch by
    batch), for the actors to leave out; None otherwise."""
    if on_conflict != "skip":
        return None
    found: list[np.ndarray] = []
    if collection.exists():
        kind: IdKind = "documents" if documents else "texts"
        for chunk in _chunks((k for k in _keys(dataset, columns) if stored_mark(k) is not None), _LOOKUP_BATCH):
            found.append(points(map(stored_mark, collection.stored_ids(chunk, kind=kind))))
    return StoredIds(np.concatenate(found) if found else points([]))


def _keys(dataset: ray.data.Dataset, columns: Columns) -> Iterator[Any]:
    """Every row's id as the collection will see it, in the dataset's order, read from the id (else text) column."""
    wanted = [columns.text] if columns.id is None else [columns.id]
    for batch in dataset.select_columns(wanted).iter_batches(batch_size=_LOOKUP_BATCH, batch_format="numpy"):
        for row in range(len(batch[wanted[0]])):
            yield columns.key(batch, row)


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


class _Stream:
    """The encoded rows of a run as records for the collection. Rows found stored before the run (not encoded) are
    left out and remembered, so that the result still lists every row's id, in the dataset's order."""

    def __init__(self, encoded: ray.data.Dataset, columns: Columns, source: ray.data.Dataset) -> None:
        self._iterator = batches = iter(encoded.iter_batches(batch_size=None, batch_format="numpy"))
        first = next(batches, None)
        #: The identity of the encoder that made the vectors (None: no rows).
        self.identity = str(first[ENCODER_COLUMN][0]) if first is not None and len(first[ENCODER_COLUMN]) else None
        self._batches: Iterator[Batch] = itertools.chain([first], batches) if first is not None else iter(())
        self._columns = columns
        self._source = source
        #: Per row: its id when it was stored before the run, None when it went to the collection.
        self._stored: list[Key | None] = []

    def records(self) -> Iterator[dict[str, Any]]:
        number = 0
        for batch in self._batches:
            for row in range(len(batch[STORED_COLUMN])):
                found = encoded_row(batch, row, number, self._columns, self.identity or "")
                self._stored.append(self._columns.key(batch, row) if found is None else None)
                if found is not None:
                    yield found
                number += 1

    def write(self, upsert: Callable[[Iterator[dict[str, Any]]], UpsertResult]) -> UpsertResult:
        """The run's result from ``upsert`` of the records; where it stops part-way, its error with every row."""
        try:
            return self.result(upsert(self.records()))
        except PartialWriteError as exc:
            raise self._complete(exc) from exc.__cause__
        except SbertQdrantError as exc:  # nothing new stored: still a partial run where rows were stored before it
            if not any(key is not None for key in self._stored):
                raise
            partial = PartialWriteError(str(exc), written_ids=[], unwritten_ids=[])
            raise self._complete(partial) from exc
        finally:  # a run stopped part-way stops Ray's execution now, not when (or after Ray's end) it is collected
            close = getattr(self._iterator, "close", None)
            if close is not None:
                close()

    def _complete(self, exc: PartialWriteError) -> PartialWriteError:
        """``exc`` with every row of the dataset in the dataset's order: the rows stored before the run among the
        written ones, the rows never read (the run stopped first) among the unwritten ones."""
        stored = [key for key in self._stored if key is not None]
        done = {stored_mark(key) for key in [*exc.written_ids, *stored]}
        rows = {mark: key for key in _keys(self._source, self._columns) if (mark := stored_mark(key)) is not None}
        return PartialWriteError(
            str(exc),
            written_ids=[key for mark, key in rows.items() if mark in done],
            unwritten_ids=[key for mark, key in rows.items() if mark not in done],
        )

    def result(self, written: UpsertResult) -> UpsertResult:
        """The collection's result with the rows stored before the run put back in their places, as skipped."""
        passed = iter(written)
        ids = [next(passed) if key is None else key for key in self._stored]
        skipped = sum(key is not None for key in self._stored)
        return UpsertResult(ids, written.written, written.skipped + skipped)


def _write_from_workers(
    encoded: ray.data.Dataset,
    collection: TextCollection,
    url: str,
    columns: Columns,
    on_conflict: OnConflict,
    documents: bool,
    **chunking: Any,
) -> UpsertResult:
    create_for_workers(encoded, collection, columns, on_conflict, documents, **chunking)
    server = partial(open_on_server, collection.collection_name, collection.encoder, url)
    sink = QdrantDatasink(server, columns, on_conflict, documents, chunking)
    encoded.write_datasink(sink)
    return sink.result


def create_for_workers(
    encoded: ray.data.Dataset,
    collection: TextCollection,
    columns: Columns,
    on_conflict: OnConflict,
    documents: bool,
    **chunking: Any,
) -> None:
    """A missing collection created here with the dataset's first row, so that the workers never race to create it;
    an existing one is left as it is (its rows not read: that would start the actors)."""
    if collection.exists():
        return
    first = dataset_first_row(encoded, columns)
    if first is None:
        return
    identity = first.pop("identity")
    if documents:
        collection.upsert_documents([first], on_conflict=on_conflict, vectors_from=identity, **chunking)
    else:
        collection.upsert_texts([first], on_conflict=on_conflict, vectors_from=identity)
