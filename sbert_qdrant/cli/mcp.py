"""``sbert-qdrant mcp``: the MCP server for agents (the ``mcp`` extra), configured by the environment."""

from __future__ import annotations

import argparse

from ..integrations.mcp.command import DESCRIPTION, add_arguments, serve


def add_commands(commands: argparse._SubParsersAction) -> None:
    mcp = commands.add_parser(
        "mcp", help="serve collections to agents over the Model Context Protocol", description=DESCRIPTION
    )
    add_arguments(mcp)
    mcp.set_defaults(run=serve)
