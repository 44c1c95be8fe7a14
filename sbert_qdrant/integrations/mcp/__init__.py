"""An MCP server on sbert-qdrant, for agents (Claude Desktop, Cursor, IDEs): ``pip install "sbert-qdrant[mcp]"``.

``create_server(settings=None)`` returns the official SDK's ``MCPServer``; ``sbert-qdrant mcp`` (or
``python -m sbert_qdrant.integrations.mcp``) runs it over stdio or streamable HTTP. Settings: ``McpSettings``.
``create_server`` is imported on first use, so the command line's other verbs work without the extra.
"""

from __future__ import annotations

import typing

from .settings import McpSettings

if typing.TYPE_CHECKING:
    from .server import create_server

__all__ = ["McpSettings", "create_server"]


def __getattr__(name: str) -> object:
    if name == "create_server":
        from .server import create_server

        return create_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
