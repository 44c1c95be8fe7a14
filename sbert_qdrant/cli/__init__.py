"""The ``sbert-qdrant`` command line: one module per command group, each with ``add_commands``."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import SbertQdrantError

#: The command groups. Each imports at its top only what its parser needs (no torch, transformers, qdrant-client or
#: pydantic), the rest when a command runs, so that --help and every command's --help answer at once.
_COMMAND_GROUPS = ("encode", "collections", "demo", "training", "adapt", "kernels", "quantize", "mcp")
#: Verbs whose group is the only one built when they are run, and only listed (``add_summary``) otherwise: an agent's
#: MCP client times out on a server that first loads the other commands; the others need not load the server's.
_ALONE = {"mcp": "mcp"}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser of every command group, or only the group of a verb in ``_ALONE`` when ``argv`` runs it."""
    parser = argparse.ArgumentParser(prog="sbert-qdrant", description="Sentence-BERT encoders for Qdrant.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    verb = next((arg for arg in argv if not arg.startswith("-")), None)
    groups = [_ALONE[verb]] if verb in _ALONE else _COMMAND_GROUPS
    for group in groups:
        module = importlib.import_module(f".{group}", __name__)
        if group in _ALONE.values() and verb not in _ALONE:
            module.add_summary(commands)  # listed, not run
        else:
            module.add_commands(commands)
    for command in commands.choices.values():  # -v after the verb too; SUPPRESS keeps one given before it
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log at INFO")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return int(args.run(args))
    except (SbertQdrantError, OSError) as exc:
        print(f"sbert-qdrant {args.command}: error: {exc}", file=sys.stderr)
        return 2
