"""``sbert-qdrant index | search | dedup``: text collections from the command line.

The engine comes from --location (embedded Qdrant Edge folder) or --url; with neither, from QDRANT_URL or
SBERT_QDRANT_LOCATION. The API key is read from QDRANT_API_KEY only, never from a flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidArgumentError, PartialWriteError
from ..search_request import SearchRequest, cli_options
from ..types import FILE_FORMATS, MIN_CHUNK_TOKENS, ON_CONFLICTS
from ._engine import add_engine_options, check_engine, open_collection, reading
from ._input import check_fields, check_where, cosine, counted, read_records, where_filter
from ._load import check_model_flag, encoder_spec

if TYPE_CHECKING:  # the rest is imported when a command runs: --help loads no torch, transformers or qdrant-client
    from qdrant_client import models

    from ..collection import TextCollection
    from ..records import UpsertResult


def _at_least(args: argparse.Namespace, bounds: dict[str, tuple[str, float]]) -> None:
    """Refuse a number flag below its bound (``bounds``: attribute -> (flag, lowest)), naming the flag."""
    for name, (flag, lowest) in bounds.items():
        value = getattr(args, name)
        if value is not None and value < lowest:
            what = "a positive integer" if lowest == 1 and isinstance(value, int) else f"at least {lowest:g}"
            raise InvalidArgumentError(f"{flag}={value:g} must be {what}.")


#: Flags that apply to --documents only: without it they would be ignored.
_DOCUMENT_FLAGS = {"chunk_tokens": "--chunk-tokens", "overlap_tokens": "--overlap-tokens"}
_DOCUMENT_FLAGS |= {"context_field": "--context-field"}


def _check_index_flags(args: argparse.Namespace) -> None:
    """The index flags' values, checked before anything is read, imported or loaded."""
    _at_least(args, {"batch_size": ("--batch-size", 1), "chunk_tokens": ("--chunk-tokens", MIN_CHUNK_TOKENS)})
    _at_least(args, {"overlap_tokens": ("--overlap-tokens", 0), "first_stage_dim": ("--first-stage-dim", 1)})
    _at_least(args, {"actors": ("--actors", 1), "gpus_per_actor": ("--gpus-per-actor", 0)})
    if args.cpus_per_actor <= 0:
        raise InvalidArgumentError(f"--cpus-per-actor={args.cpus_per_actor:g} must be a positive number.")
    given = [flag for name, flag in _DOCUMENT_FLAGS.items() if getattr(args, name) is not None]
    if given and not args.documents:
        raise InvalidArgumentError(f"{' and '.join(given)} apply to documents: add --documents, or drop them.")
    if args.payload_fields is not None and args.context_field is not None:
        kept = args.payload_fields.split(",")
        if args.context_field not in kept:
            raise InvalidArgumentError(
                f"--context-field {args.context_field!r} is read from the payload, and --payload-fields "
                f"{args.payload_fields!r} leaves it out; add it there."
            )


def _check_chunk_tokens(args: argparse.Namespace) -> None:
    """``--chunk-tokens`` within the model's ``max_seq_length``, read from its folder before it loads (the exact
    limit, less its special tokens and document prompt, is checked once it has)."""
    if args.chunk_tokens is None:
        return
    from ..encoder.loading import resolve_model_folder, saved_token_limit  # no torch
    from ..settings import Settings

    model = args.model or Settings().model
    limit = saved_token_limit(resolve_model_folder(model))
    if args.chunk_tokens > limit:
        raise InvalidArgumentError(
            f"--chunk-tokens={args.chunk_tokens} is over the max_seq_length of {model or 'the default model'} "
            f"({limit}): a chunk must fit what the encoder reads whole, its special tokens included; give less, or "
            "leave it out for the model's limit."
        )


def _index(args: argparse.Namespace) -> int:
    label = ", ".join(args.file)
    fields = args.payload_fields.split(",") if args.payload_fields is not None else None
    kind: Literal["documents", "texts"] = "documents" if args.documents else "texts"
    _check_index_flags(args)
    check_engine(args, reads=False)
    _check_chunk_tokens(args)
    done = _ray_all_stored(args) if args.ray is not None else None
    if done is not None:  # nothing to encode: no Ray started, no model loaded
        _summary(label, *done, kind)
        return 0
    upsert = _ray_upsert(args, fields) if args.ray is not None else _file_upsert(args, fields)
    with open_collection(args) as coll:
        try:
            result = upsert(coll)
        except PartialWriteError as exc:
            print(
                f"{label}: stopped: {len(exc.written_ids)} stored, {len(exc.unwritten_ids)} failed, later records "
                "not read. Fix the cause below, then run the same command with --on-conflict skip to resume.",
                file=sys.stderr,
            )
            raise
        if args.optimize:
            coll.optimize()
        total = coll.count(kind=kind)
    _summary(label, result, coll.collection_name, total, kind)
    return 0


def _summary(label: str, result: UpsertResult, name: str, total: int, kind: str) -> None:
    print(
        f"{label}: {len(result)} records -> collection {name!r}: {result.written} written, {result.skipped} "
        f"skipped, 0 failed; {total} {kind} stored.",
        file=sys.stderr,
    )


def _ray_all_stored(args: argparse.Namespace) -> tuple[UpsertResult, str, int] | None:
    """``--ray --on-conflict skip`` of local files every row of which is stored: the result, the collection's name
    and count, found without Ray or a model (``integrations.ray._local``); None: the run has work to do."""
    if args.on_conflict != "skip":
        return None
    from ..integrations.ray._encode import Columns
    from ..integrations.ray._local import stored_already

    columns = Columns(args.text_field, args.id_field)
    return stored_already(args.file, args.format, columns, args.documents, partial(open_collection, args))


def _file_upsert(args: argparse.Namespace, fields: list[str] | None) -> Callable[[TextCollection], UpsertResult]:
    """The upsert of one file read here (checked now: its format and existence)."""
    if len(args.file) > 1:
        raise InvalidArgumentError(f"{len(args.file)} files given: index them one command each, or pass --ray.")
    path = Path(args.file[0])
    records = counted(read_records(path, args.format, args.text_field, args.id_field, fields), path, args.format)
    named = [("--payload-fields", field) for field in fields or ()]
    named += [("--context-field", args.context_field)] if args.context_field is not None else []
    check_fields(path, args.format, named, every_row=["--context-field"])

    def upsert(coll: TextCollection) -> UpsertResult:
        if args.documents:
            return coll.upsert_documents(
                records,
                chunk_tokens=args.chunk_tokens,
                overlap_tokens=args.overlap_tokens,
                context_field=args.context_field,
                batch_size=args.batch_size,
                on_conflict=args.on_conflict,
            )
        return coll.upsert_texts(records, batch_size=args.batch_size, on_conflict=args.on_conflict)

    return upsert


def _ray_upsert(args: argparse.Namespace, fields: list[str] | None) -> Callable[[TextCollection], UpsertResult]:
    """The upsert of files read and encoded on Ray (``--ray``): this process writes what the actors encode."""
    from ..integrations import ray as sbert_ray  # the ray extra, imported only when asked for
    from ..integrations.ray._cluster import Pool, local_cpus
    from ..integrations.ray._interrupt import Interrupted, stopping

    pool = Pool(args.actors, args.cpus_per_actor, args.gpus_per_actor, args.batch_size or 1)
    pool.check()
    if args.ray == "local":  # the CPUs the local Ray will have: refused before it starts (GPUs: once it runs)
        pool.check_size(local_cpus(), None)
    sbert_ray.connect(None if args.ray == "local" else args.ray)
    dataset = sbert_ray.read_files(args.file, args.format)
    pool.check_fits(dataset)  # refused now, with the numbers: before the model loads for the collection
    options: dict[str, Any] = {
        "text_column": args.text_field,
        "id_column": args.id_field,
        "payload_columns": fields,
        "actors": args.actors,
        "cpus_per_actor": args.cpus_per_actor,
        "gpus_per_actor": args.gpus_per_actor,
        "on_conflict": args.on_conflict,
        "show_progress_bar": args.progress,
        **dataclasses.asdict(encoder_spec(args)),  # the load options, read here as every actor will load them
    }
    if args.batch_size is not None:
        options["batch_size"] = args.batch_size
    if args.documents:
        chunking = {"chunk_tokens": args.chunk_tokens, "overlap_tokens": args.overlap_tokens}
        options.update(context_field=args.context_field, **chunking)
    run = sbert_ray.upsert_documents_dataset if args.documents else sbert_ray.upsert_dataset

    def upsert(coll: TextCollection) -> UpsertResult:
        """The run; SIGINT or SIGTERM stops it promptly, exiting 128 + the signal's number (130, 143)."""
        try:
            with stopping(signal.SIGINT, signal.SIGTERM, always=True):
                return run(dataset, coll, **options)
        except Interrupted as exc:
            print(
                f"{', '.join(args.file)}: {exc}: the batches written stay; run the same command with --on-conflict "
                "skip to write the rest.",
                file=sys.stderr,
            )
            raise SystemExit(128 + exc.signum) from None

    return upsert


def _clip(text: str | None, width: int) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


#: The flags that set the search options the command line composes (a search's errors name the flag); the others
#: are the request's own (``cli_options``).
_COMPOSED_FLAGS = {
    "query_filter": "--where",
    "rerank": "--rerank",
    "search_params": "--exact/--hnsw-ef/--quantization-rescore/--oversampling",
}
#: What --rerank-candidates and --rerank-weight need: a re-ranker (checked once it is loaded).
_RERANK_OPTIONS = ("rerank_candidates", "rerank_weight")


def _search_request(args: argparse.Namespace) -> SearchRequest:
    """The search flags as one checked SearchRequest: every flag checked first, with nothing heavy
    imported (no qdrant-client, torch or model: a wrong value is refused at once), then the engine and the
    collection (``check_engine``), the re-ranker's folder and the search model's; then the filter and search
    parameters are built, and the re-ranker is loaded and joined."""
    if not args.documents and (args.chunks is not None or args.score is not None):
        raise InvalidArgumentError("--chunks and --score apply to one hit per document: add --documents.")
    _at_least(args, {"hnsw_ef": ("--hnsw-ef", 1), "oversampling": ("--oversampling", 1)})
    check_where(args.where)
    offered = cli_options()
    names = {name: flag for name, flag, _ in offered} | _COMPOSED_FLAGS
    flags = {name: getattr(args, name) for name, _, _ in offered}
    rerank = {name: flags.pop(name) for name in _RERANK_OPTIONS}
    SearchRequest.of(flags if args.rerank is not None else {**flags, **rerank}, names=names)
    check_engine(args, reads=True, dense_threshold=args.score_threshold if args.mode == "dense" else None)
    check_model_flag(args.rerank, "--rerank")
    flags |= {"query_filter": where_filter(args.where), "search_params": _search_params(args)}
    if args.rerank is None:
        return SearchRequest.of({**flags, **rerank}, names=names)
    from ..encoder import CrossEncoder

    spec = encoder_spec(args)
    cross = CrossEncoder.load(args.rerank, device=spec.device, precision=spec.precision)
    return SearchRequest.of({**flags, **rerank, "rerank": cross}, names=names)


def _search_params(args: argparse.Namespace) -> models.SearchParams | None:
    """The dense search's parameters from --exact, --hnsw-ef, --[no-]quantization-rescore and --oversampling."""
    from qdrant_client import models

    quantization = None
    rescore, oversampling = args.quantization_rescore, args.oversampling
    if rescore is not None or oversampling is not None:
        quantization = models.QuantizationSearchParams(rescore=rescore, oversampling=oversampling)
    if not args.exact and args.hnsw_ef is None and quantization is None:
        return None
    return models.SearchParams(exact=args.exact, hnsw_ef=args.hnsw_ef, quantization=quantization)


class _OldRescoreFlag(argparse.Action):
    """``--rescore``/``--no-rescore``, the old spelling of ``--[no-]quantization-rescore``: still taken, with a
    deprecation message (the API's ``rescore=`` names a late-interaction slot)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        option = option or "--rescore"
        new = "--no-quantization-rescore" if option.startswith("--no-") else "--quantization-rescore"
        print(f"sbert-qdrant: {option} is deprecated; use {new} (the same setting).", file=sys.stderr)
        setattr(namespace, self.dest, new == "--quantization-rescore")


def _score_label(args: argparse.Namespace) -> str:
    """What the printed scores are: the search mode's own, or the cross-encoder's."""
    if args.rerank is not None:
        weight = 1 if args.rerank_weight is None else args.rerank_weight
        return "cross-encoder" if weight == 1 else f"cross-encoder blended, weight {weight:g}"
    return {"dense": "cosine", "sparse": "BM25"}.get(args.mode, f"hybrid, {args.fusion or 'dbsf'} fused")


def _search_documents(args: argparse.Namespace, request: SearchRequest) -> int:
    with reading(args) as coll:
        found = [coll.search_documents(query, request=request) for query in args.query]
    for query, hits in zip(args.query, found, strict=True):
        if args.json:
            for hit in hits:
                chunks = [vars(c) for c in hit.chunks]
                row = {"query": query, "id": hit.id, "score": hit.score, "payload": hit.payload, "chunks": chunks}
                print(json.dumps(row, ensure_ascii=False))
            continue
        print(f"query: {query}  (scores: {_score_label(args)})")
        for rank, hit in enumerate(hits, 1):
            print(f"  {rank:>2}. {hit.score:6.3f}  document {hit.id}")
            for chunk in hit.chunks:
                print(f"        [{chunk.start}:{chunk.end}] {chunk.score:6.3f}  {_clip(chunk.text, 80)}")
        if not hits:
            print("  (no hits)")
    return 0


def _search(args: argparse.Namespace) -> int:
    request = _search_request(args)
    if args.documents:
        return _search_documents(args, request)
    with reading(args) as coll:
        hits = coll.search_texts(args.query, request=request)
    for query, found in zip(args.query, hits, strict=True):
        if args.json:
            for hit in found:
                row = {"query": query, "id": hit.id, "score": hit.score, "text": hit.text}
                if hit.retrieval_score is not None:
                    row["retrieval_score"] = hit.retrieval_score
                print(json.dumps({**row, "payload": hit.payload}, ensure_ascii=False))
            continue
        print(f"query: {query}  (scores: {_score_label(args)})")
        for rank, hit in enumerate(found, 1):
            print(f"  {rank:>2}. {hit.score:6.3f}  {hit.id}  {_clip(hit.text, 80)}")
        if not found:
            print("  (no hits)")
    return 0


def _dedup(args: argparse.Namespace) -> int:
    _at_least(args, {"top_k": ("--top-k", 1), "limit": ("--limit", 1)})
    records = read_records(Path(args.file), args.format, args.text_field, None, []) if args.file else None
    check_engine(args, reads=records is None)
    with reading(args) as coll:
        if records is not None:
            coll.upsert_texts(records, on_conflict="skip")
        pairs = coll.mine_duplicates(threshold=args.threshold, top_k=args.top_k, limit=args.limit)
    for pair in pairs:
        if args.json:
            print(json.dumps(vars(pair), ensure_ascii=False))
        else:
            print(f"{pair.score:6.3f}  {pair.id_a}  {_clip(pair.text_a, 70)}")
            print(f"        {pair.id_b}  {_clip(pair.text_b, 70)}")
    print(f"{len(pairs)} pairs", file=sys.stderr)
    return 0


def _add_file_options(parser: argparse.ArgumentParser, ray_formats: Sequence[str] = ()) -> None:
    parser.add_argument(
        "--format",
        choices=tuple(dict.fromkeys([*FILE_FORMATS, *ray_formats])),
        default=None,
        help="file format (default: from the name; .gz read too)" + (" (parquet: with --ray)" if ray_formats else ""),
    )
    parser.add_argument("--text-field", default="text", help="field holding the text (TXT: each line is 'text')")


def add_commands(commands: argparse._SubParsersAction) -> None:
    index = commands.add_parser(
        "index",
        help="embed a JSONL/CSV/TSV/TXT file (optionally .gz; several, and Parquet, with --ray) into a collection",
    )
    index.add_argument("file", nargs="+", help="records to index (several files, or object-store URIs, with --ray)")
    _add_file_options(index, ray_formats=("jsonl", "csv", "parquet"))
    index.add_argument("--id-field", default=None, help="field holding your id (default: ids from the text)")
    index.add_argument("--payload-fields", default=None, help="comma-separated fields to keep (default: all others)")
    index.add_argument(
        "--batch-size", type=int, default=None, help="texts per write (default 4096 on embedded Edge, 1024 on a server)"
    )
    index.add_argument(
        "--on-conflict",
        choices=ON_CONFLICTS,
        default="overwrite",
        help="skip: leave already-stored ids alone without re-encoding them (resume an interrupted run)",
    )
    index.add_argument("--no-optimize", dest="optimize", action="store_false", help="skip building the index")
    index.add_argument("--documents", action="store_true", help="long texts: split into chunks, one document each")
    index.add_argument("--chunk-tokens", type=int, default=None, help="tokens per chunk (default: the model's limit)")
    index.add_argument(
        "--overlap-tokens", type=int, default=None, help="tokens shared by neighbouring chunks (default: 1/8 chunk)"
    )
    index.add_argument(
        "--context-field",
        default=None,
        metavar="FIELD",
        help="documents: a payload field (e.g. title) encoded with every chunk of its document, never stored in it",
    )
    index.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="read JSONL/CSV/Parquet files with Ray Data and encode on Ray actors: on this machine, or on the cluster "
        "at ADDRESS ('auto', ray://host:10001); put it after the files",
    )
    index.add_argument("--actors", type=int, default=1, help="with --ray: encoding actors (default 1)")
    index.add_argument(
        "--cpus-per-actor",
        type=float,
        default=1,
        help="with --ray: CPUs per actor, its torch threads (default 1); actors x this must fit the cluster's CPUs",
    )
    index.add_argument("--gpus-per-actor", type=float, default=0, help="with --ray: GPUs per actor (default 0: CPU)")
    index.add_argument(
        "--no-sparse",
        dest="sparse",
        action="store_false",
        help="create the collection without its BM25 sparse vector (dense search only)",
    )
    add_engine_options(index)
    index.set_defaults(run=_index)

    search = commands.add_parser("search", help="search a collection by text")
    search.add_argument("query", nargs="+", help="one or more queries")
    for name, flag, keywords in cli_options():  # one flag per option of the request's own
        search.add_argument(flag, dest=name, **keywords)
    search.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="CONDITION",
        help="payload filter: FIELD=VALUE (repeat a field for any of its values), FIELD>=N, FIELD>N, FIELD<=N, "
        "FIELD<N; every field must match",
    )
    search.add_argument("--json", action="store_true", help="one JSON object per hit")
    search.add_argument("--rerank", default=None, metavar="MODEL_DIR", help="re-rank hits with this cross-encoder")
    search.add_argument(
        "--documents", action="store_true", help="one hit per document (indexed with --documents), with its chunks"
    )
    search.add_argument("--exact", action="store_true", help="exact dense search (no HNSW): slow, the reference")
    search.add_argument("--hnsw-ef", type=int, default=None, help="HNSW search breadth (default: the engine's)")
    search.add_argument(
        "--quantization-rescore",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="quantized collections: re-score the candidates with the original vectors (default: the engine's)",
    )
    search.add_argument(  # the old spelling, hidden: the API's rescore= is the late-interaction slot
        "--rescore",
        "--no-rescore",
        dest="quantization_rescore",
        action=_OldRescoreFlag,
        nargs=0,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
    search.add_argument(
        "--oversampling", type=float, default=None, help="quantized collections: fetch this many times more candidates"
    )
    add_engine_options(search)
    search.set_defaults(run=_search)

    dedup = commands.add_parser("dedup", help="most similar pairs in a collection (or in a file, indexed first)")
    dedup.add_argument("file", nargs="?", default=None, help="optional file of texts to index before mining")
    _add_file_options(dedup)
    dedup.add_argument(
        "--threshold", type=cosine, default=None, help="minimum cosine, -1..1 (default: calibrated or 0.72)"
    )
    dedup.add_argument("--top-k", type=int, default=5, help="best partners kept per text")
    dedup.add_argument("--limit", type=int, default=50, help="pairs to print")
    dedup.add_argument("--json", action="store_true", help="one JSON object per pair")
    add_engine_options(dedup)
    dedup.set_defaults(run=_dedup)
