"""The ``sbert-qdrant`` command line: one module per command group, each with ``add_commands``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import SbertQdrantError
from . import collections, demo, encode, mcp, training

_COMMAND_GROUPS = (encode, collections, demo, training, mcp)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbert-qdrant", description="Sentence-BERT encoders for Qdrant.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for group in _COMMAND_GROUPS:
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return int(args.run(args))
    except (SbertQdrantError, OSError) as exc:
        print(f"sbert-qdrant {args.command}: error: {exc}", file=sys.stderr)
        return 2
