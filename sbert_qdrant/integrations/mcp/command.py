"""The server's command line, shared by ``sbert-qdrant mcp`` and ``python -m sbert_qdrant.integrations.mcp``.

The SDK is imported when the server starts, so the rest of the command line works without the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ...errors import InvalidArgumentError, UnsupportedError

if TYPE_CHECKING:
    from .settings import McpSettings

DESCRIPTION = (
    "Serve collections to agents (Claude Desktop, Cursor, ...) over MCP. Settings come from the environment: "
    "QDRANT_URL, QDRANT_API_KEY, QDRANT_LOCAL_PATH, COLLECTION_NAME, QDRANT_SEARCH_LIMIT, QDRANT_READ_ONLY, "
    "QDRANT_ALLOW_ARBITRARY_FILTER, FILTERABLE_FIELDS, EMBEDDING_MODEL, TOOL_FIND_DESCRIPTION, "
    "TOOL_STORE_DESCRIPTION, FASTMCP_HOST, FASTMCP_PORT, FASTMCP_LOG_LEVEL and SBERT_QDRANT_* (see docs/mcp.md, "
    "'Settings'). Several agents on one store: run one server with --transport streamable-http and point them all "
    "at http://HOST:PORT/mcp."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transport", choices=["stdio", "sse", "streamable-http"], default="stdio", help="default: stdio"
    )
    parser.add_argument(
        "--host", default=None, help="sse, streamable-http: address to listen on (default: FASTMCP_HOST or 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=None, help="sse, streamable-http: port (default: FASTMCP_PORT or 8000)"
    )
    parser.add_argument(
        "--env-file",
        default=None,
        metavar="PATH",
        help="read settings from this .env file too (default: none; the environment wins over it)",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help="sse, streamable-http: a file holding the bearer token clients must send (default: "
        "SBERT_QDRANT_MCP_TOKEN; none: loopback only)",
    )
    parser.add_argument(
        "--read-token-file",
        default=None,
        metavar="PATH",
        help="sse, streamable-http: a file holding a bearer token whose clients may find and count but not store or "
        "delete (default: SBERT_QDRANT_MCP_READ_TOKEN)",
    )


def serve(args: argparse.Namespace) -> int:
    """Run the server on ``args.transport`` until the client goes away."""
    try:
        from .server import create_server
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != "mcp":
            raise
        raise UnsupportedError(f"the MCP server needs the mcp extra ({exc}): pip install 'sbert-qdrant[mcp]'.") from exc
    if args.env_file is not None and not Path(args.env_file).is_file():
        raise InvalidArgumentError(f"--env-file {args.env_file!r} is not a file; name the .env file to read.")
    settings = _valid(None if args.env_file is None else {"_env_file": args.env_file})
    if args.transport == "stdio":
        create_server(settings).run("stdio")
        return 0
    from .access import check_exposure, read_token_file, transport_security

    files = {
        "mcp_token": (args.token_file, "--token-file"),
        "mcp_read_token": (args.read_token_file, "--read-token-file"),
    }
    tokens = {name: read_token_file(path, flag) for name, (path, flag) in files.items() if path is not None}
    if tokens:
        settings = _valid(settings.model_dump() | tokens)
    host = settings.host if args.host is None else args.host
    check_exposure(host, settings)
    server = create_server(settings)
    app = (server.sse_app if args.transport == "sse" else server.streamable_http_app)(
        transport_security=transport_security(host, settings), host=host
    )
    _serve(app, host, settings.port if args.port is None else args.port, settings.log_level)
    return 0


def _valid(given: dict[str, Any] | None) -> McpSettings:
    """The settings from the environment (and ``given``: a .env file to read, or values, tokens read from files
    among them), checked whole, or an error naming each problem."""
    from .settings import McpSettings

    try:
        return McpSettings() if given is None else McpSettings(**given)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False))
        raise InvalidArgumentError(f"the MCP server's settings are not valid: {problems}.") from exc


def _serve(app: Any, host: str, port: int, log_level: str) -> None:
    """The SDK's app under uvicorn, as the SDK serves it, except that Ctrl-C ends open streams after one second
    instead of waiting for clients to hang up."""
    import anyio
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), timeout_graceful_shutdown=1)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises the Ctrl-C it stopped on again: a clean exit
        anyio.run(uvicorn.Server(config).serve)
