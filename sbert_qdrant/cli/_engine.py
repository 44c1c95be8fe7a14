"""The engine and collection a command names (``--collection``, ``--location``, ``--url``): the flags, what needs no
model checked before one loads, the collection opened, and its read failures said in the command line's words."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CollectionMismatchError, CollectionNotFoundError, InvalidArgumentError, UnsupportedError
from ..types import QUANTIZATIONS
from ._load import add_load_options, check_load_flags, encoder_spec

if TYPE_CHECKING:  # imported when a command runs: --help loads no torch, transformers or qdrant-client
    from ..collection import TextCollection
    from ..protocols import TextEncoder
    from ..settings import Settings


def open_collection(args: argparse.Namespace, encoder: TextEncoder | None = None) -> TextCollection:
    """The collection the command names, with ``encoder`` (None: the model the load flags name); ``--no-sparse``
    (index) creates a new one without the BM25 vector."""
    from ..collection import TextCollection
    from ..settings import Settings

    settings = Settings()
    encoder = encoder if encoder is not None else encoder_spec(args, settings).load()
    return TextCollection(
        args.collection or settings.collection,
        encoder,
        location=args.location,
        url=args.url,
        settings=settings,
        show_progress_bar=args.progress,
        sparse="bm25" if getattr(args, "sparse", True) else None,
        first_stage_dim=args.first_stage_dim,
        quantization=args.quantization,
    )


def _location(args: argparse.Namespace, settings: Settings) -> Path | None:
    """The embedded engine's folder in effect, None when the command reads a server (--url, QDRANT_URL)."""
    if args.url or (args.location is None and settings.qdrant_url):
        return None
    return Path(args.location or settings.location).expanduser().resolve()


def _engine_words(args: argparse.Namespace, settings: Settings) -> str:
    """The engine as the command line names it: --url or --location, with the value in effect."""
    location = _location(args, settings)
    return f"--location {location}" if location is not None else f"--url {args.url or settings.qdrant_url}"


def _not_found(args: argparse.Namespace, settings: Settings, name: str, there: list[str]) -> CollectionNotFoundError:
    return CollectionNotFoundError(
        f"no collection {name!r} at {_engine_words(args, settings)} (collections there: "
        f"{', '.join(there) or 'none'}); check --collection and --location / --url, or index a file into it first: "
        f"sbert-qdrant index FILE --collection {name}."
    )


def check_engine(args: argparse.Namespace, reads: bool, dense_threshold: float | None = None) -> None:
    """What needs no model, checked before one loads: the load flags (``check_load_flags``), --location is a folder
    (or not there yet) and, for a command that ``reads`` the collection, the collection is in it (a server's are
    checked on reading: a name there may be an alias), a dense search's ``--threshold`` in its cosine range."""
    check_load_flags(args)
    from ..settings import Settings

    settings = Settings()
    location = _location(args, settings)
    if location is None:
        return
    if location.exists() and not location.is_dir():
        raise InvalidArgumentError(
            f"--location {location} is a file; pass the folder that holds (or will hold) the collections, e.g. "
            "--location ./qdrant_data."
        )
    name = args.collection or settings.collection
    if reads:
        from ..store.edge_folder import edge_collection_names, edge_distances  # no qdrant-client: in a blink

        there = edge_collection_names(location)
        if name not in there:
            raise _not_found(args, settings, name, there)
        cosine = set(edge_distances(location, name).values()) == {"cosine"}
        if dense_threshold is not None and cosine and not -1 <= dense_threshold <= 1:
            raise InvalidArgumentError(
                f"--threshold={dense_threshold:g} is outside the cosine score range [-1, 1] of collection {name!r} "
                "(--mode dense); give a cosine, e.g. 0.5."
            )


@contextmanager
def reading(args: argparse.Namespace) -> Iterator[TextCollection]:
    """The collection a reading verb names, its failures said in the command line's words."""
    from ..settings import Settings

    with open_collection(args) as coll:
        try:
            yield coll
        except CollectionNotFoundError as exc:
            raise _not_found(args, Settings(), coll.collection_name, coll.list_collections()) from exc
        except CollectionMismatchError as exc:
            mode = getattr(args, "mode", "dense")
            if mode == "dense" or coll.layout.sparse is not None:
                raise
            raise CollectionMismatchError(
                f"collection {coll.collection_name!r} was indexed with --no-sparse (it has no BM25 vectors), so "
                f"--mode {mode} cannot search it: search it with --mode dense, or re-index the file into a new "
                f"collection without --no-sparse (sbert-qdrant index FILE --collection NEW_NAME)."
            ) from exc
        except UnsupportedError as exc:
            if getattr(args, "documents", True) or not coll.count(kind="documents"):
                raise
            raise UnsupportedError(
                f"collection {coll.collection_name!r} holds documents and no texts: add --documents to search them "
                "(one hit per document)."
            ) from exc


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """--collection, --location, --url, the load flags, --first-stage-dim, --quantization and --no-progress."""
    parser.add_argument("--collection", default=None, help="collection name (default: SBERT_QDRANT_COLLECTION, texts)")
    parser.add_argument("--location", default=None, help="embedded Qdrant Edge folder (default: SBERT_QDRANT_LOCATION)")
    parser.add_argument("--url", default=None, help="Qdrant server URL (default: QDRANT_URL); key from QDRANT_API_KEY")
    add_load_options(parser)
    parser.add_argument(
        "--first-stage-dim",
        type=int,
        default=None,
        metavar="N",
        help="a first-stage slot of each vector's first N values, re-scored by the full vector (as the collection "
        "was created)",
    )
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=None,
        help="storage preset of a new collection (searches re-score its codes by default; not in local mode)",
    )
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="hide progress bars")
