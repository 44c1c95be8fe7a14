"""The server's command line, shared by ``sbert-qdrant mcp`` and ``python -m sbert_qdrant.integrations.mcp``.

The SDK is imported when the server starts, so the rest of the command line works without the ``mcp`` extra.
"""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from ...errors import InvalidArgumentError, UnsupportedError

DESCRIPTION = (
    "Serve collections to agents (Claude Desktop, Cursor, ...) over MCP. Settings come from the environment: "
    "QDRANT_URL, QDRANT_API_KEY, QDRANT_LOCAL_PATH, COLLECTION_NAME, QDRANT_SEARCH_LIMIT, QDRANT_READ_ONLY, "
    "EMBEDDING_MODEL, TOOL_FIND_DESCRIPTION, TOOL_STORE_DESCRIPTION and SBERT_QDRANT_* (see docs/mcp.md, "
    "'Settings')."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio", help="default: stdio")
    parser.add_argument(
        "--host", default="127.0.0.1", help="streamable-http: address to listen on (default: 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8000, help="streamable-http: port (default: 8000)")


def serve(args: argparse.Namespace) -> int:
    """Run the server on ``args.transport`` until the client goes away."""
    try:
        from .server import create_server
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != "mcp":
            raise
        raise UnsupportedError(f"the MCP server needs the mcp extra ({exc}): pip install 'sbert-qdrant[mcp]'.") from exc
    try:
        server = create_server()
    except ValidationError as exc:
        raise InvalidArgumentError(f"the MCP server's settings are not valid: {exc}") from exc
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0
