"""``sbert-qdrant mcp``: the MCP server for agents (the ``mcp`` extra), configured by the environment.

Its command module (the server's settings, pydantic, the records layer) is imported only when the verb runs:
``build_parser`` then builds this group alone (``add_commands``); every other command line lists the verb from
``add_summary``, without its arguments, which no other verb parses.
"""

from __future__ import annotations

import argparse

HELP = "serve collections to agents over the Model Context Protocol"


def add_commands(commands: argparse._SubParsersAction) -> None:
    from ..integrations.mcp.command import DESCRIPTION, add_arguments, serve

    mcp = commands.add_parser("mcp", help=HELP, description=DESCRIPTION)
    add_arguments(mcp)
    mcp.set_defaults(run=serve)


def add_summary(commands: argparse._SubParsersAction) -> None:
    commands.add_parser("mcp", help=HELP)
