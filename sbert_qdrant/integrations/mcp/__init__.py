"""An MCP server on sbert-qdrant, for agents (Claude Desktop, Cursor, IDEs): ``pip install "sbert-qdrant[mcp]"``.

``create_server(settings=None)`` returns the official SDK's ``MCPServer``; ``sbert-qdrant mcp`` (or
``python -m sbert_qdrant.integrations.mcp``) runs it over stdio or streamable HTTP. Settings: ``McpSettings``.
"""

from __future__ import annotations

from .server import create_server
from .settings import McpSettings

__all__ = ["McpSettings", "create_server"]
