"""The server's command line, shared by ``sbert-qdrant mcp`` and ``python -m sbert_qdrant.integrations.mcp``.

The SDK is imported when the server starts, so the rest of the command line works without the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from ...errors import InvalidArgumentError, UnsupportedError

if TYPE_CHECKING:
    from .settings import McpSettings

logger = logging.getLogger(__name__)

DESCRIPTION = (
    "Serve collections to agents (Claude Desktop, Cursor, ...) over MCP. Settings come from the environment: "
    "QDRANT_URL, QDRANT_API_KEY, QDRANT_LOCAL_PATH, COLLECTION_NAME, QDRANT_SEARCH_LIMIT, QDRANT_READ_ONLY, "
    "QDRANT_ALLOW_ARBITRARY_FILTER, FILTERABLE_FIELDS, EMBEDDING_MODEL, TOOL_FIND_DESCRIPTION, "
    "TOOL_STORE_DESCRIPTION, FASTMCP_HOST, FASTMCP_PORT, FASTMCP_LOG_LEVEL (or FASTMCP_SERVER_HOST, _PORT, "
    "_LOG_LEVEL) and SBERT_QDRANT_* (see docs/mcp.md, "
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
    _log_to_stderr(settings.log_level)
    for note in settings.not_used:
        logger.warning(note)
    if args.transport == "stdio":
        given = [name for name, value in _TOKENS.items() if getattr(args, value) or getattr(settings, name)]
        if given:
            logger.warning(
                "%s is set, and the stdio transport has no requests to check a token on: it is not used (it applies "
                "to --transport streamable-http and sse).",
                " and ".join(_TOKEN_NAMES[name] for name in given),
            )
        create_server(settings).run("stdio")
        return 0
    from .access import HostCheck, QueryRedacted, check_exposure, read_token_file, transport_security

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
    names, security = transport_security(host, settings)
    app = (server.sse_app if args.transport == "sse" else server.streamable_http_app)(
        transport_security=security, host=host
    )
    logging.getLogger("uvicorn.access").addFilter(QueryRedacted())
    _serve(HostCheck(app, names), host, settings.port if args.port is None else args.port, settings.log_level)
    return 0


#: The token settings, and the names a user knows them by.
_TOKENS = {"mcp_token": "token_file", "mcp_read_token": "read_token_file"}
_TOKEN_NAMES = {
    "mcp_token": "SBERT_QDRANT_MCP_TOKEN (or --token-file)",
    "mcp_read_token": "SBERT_QDRANT_MCP_READ_TOKEN (or --read-token-file)",
}


def _log_to_stderr(level: str) -> None:
    """Log at ``level`` (FASTMCP_LOG_LEVEL) to stderr: on stdio, stdout is the protocol's."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)


def _valid(given: dict[str, Any] | None) -> McpSettings:
    """The settings from the environment (and ``given``: a .env file to read, or values, tokens read from files
    among them), checked whole, or an error naming each problem."""
    from .settings import McpSettings

    try:
        return McpSettings() if given is None else McpSettings(**given)
    except ValidationError as exc:
        problems = "; ".join(_problem(e["loc"], e["msg"]) for e in exc.errors(include_url=False))
        raise InvalidArgumentError(f"the MCP server's settings are not valid: {problems}.") from exc
    except SettingsError as exc:  # a value that must be JSON and is not: pydantic-settings names the field
        field = str(exc).partition('"')[2].partition('"')[0]
        raise InvalidArgumentError(
            f"the MCP server's setting {_env_name(field)} is not valid JSON; write it as JSON (a list: "
            '[...]; FILTERABLE_FIELDS: [{"name": "topic", "description": "...", "field_type": "keyword", '
            '"condition": "=="}]).'
        ) from None


def _problem(location: tuple[int | str, ...], message: str) -> str:
    """One problem in a line: the setting by its environment name (none for a check of several), pydantic's
    "Value error, " and the final period left out."""
    text = message.removeprefix("Value error, ").rstrip(".")
    if not location:
        return text
    return f"{_env_name(str(location[0]))}{''.join(f'[{p}]' for p in location[1:])}: {text}"


def _env_name(field: str) -> str:
    """A setting's name in the environment: the first of its names (``FILTERABLE_FIELDS``), else SBERT_QDRANT_*."""
    from pydantic import AliasChoices

    from .settings import McpSettings

    info = McpSettings.model_fields.get(field)
    if info is None:  # pydantic names a field read from the environment by the name it was read under
        return field
    alias = info.validation_alias
    if isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str):
        return alias.choices[0]
    return f"SBERT_QDRANT_{field.upper()}"


def _serve(app: Any, host: str, port: int, log_level: str) -> None:
    """The SDK's app under uvicorn, as the SDK serves it, except that Ctrl-C ends open streams after one second
    instead of waiting for clients to hang up."""
    import anyio
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), timeout_graceful_shutdown=1)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises the Ctrl-C it stopped on again: a clean exit
        anyio.run(uvicorn.Server(config).serve)
