"""Who may use a server over HTTP (SSE, streamable HTTP): a bearer token (``SBERT_QDRANT_MCP_TOKEN``, or a file
named by ``--token-file``) that may use every tool, and a read-only one (``SBERT_QDRANT_MCP_READ_TOKEN``,
``--read-token-file``) whose holder may not use the tools that write, each checked in constant time by the SDK's own
bearer middleware (401 without one); no address beyond loopback without a token; the SDK's Host / Origin checks
(421 / 403) on every address bound."""

from __future__ import annotations

import hmac
import socket
from pathlib import Path
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import SecretStr

from ...errors import InvalidArgumentError
from .settings import McpSettings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ANY = ("0.0.0.0", "::", "")


#: The scopes of the two tokens: the read-only one's holder reads; the other's also writes.
READ, WRITE = "read", "write"


class BearerTokens:
    """The SDK's ``TokenVerifier`` for the server's secrets: a request's ``Authorization: Bearer`` token must equal
    one of them (``hmac.compare_digest``, against each: the time taken says nothing of how much of either matched),
    and gets its scopes."""

    def __init__(self, settings: McpSettings) -> None:
        self._tokens = [
            (secret.get_secret_value().encode("utf-8"), scopes)
            for secret, scopes in ((settings.mcp_token, [READ, WRITE]), (settings.mcp_read_token, [READ]))
            if secret is not None
        ]

    async def verify_token(self, token: str) -> AccessToken | None:
        given = token.encode("utf-8")
        matched = [scopes for secret, scopes in self._tokens if hmac.compare_digest(given, secret)]
        if matched:
            return AccessToken(token=token, client_id="sbert-qdrant-mcp", scopes=matched[0])
        return None


def check_may_write(tool: str) -> None:
    """Refuse a tool that writes to a client whose token is the read-only one (no token asked: anyone may)."""
    token = get_access_token()
    if token is not None and WRITE not in token.scopes:
        raise ToolError(
            f"{tool} writes, and this client's token is the server's read-only one (SBERT_QDRANT_MCP_READ_TOKEN): "
            "it may find and count, not store or delete. Ask for the server's other token "
            "(SBERT_QDRANT_MCP_TOKEN) to write."
        )


def auth_options(settings: McpSettings) -> dict[str, Any]:
    """``MCPServer``'s token verifier and auth settings when a token is set (a resource server only: no OAuth)."""
    if not settings.token_asked:
        return {}
    return {
        "token_verifier": BearerTokens(settings),
        "auth": AuthSettings.model_validate(
            {"issuer_url": f"http://127.0.0.1:{settings.port}", "resource_server_url": None}
        ),
    }


def read_token_file(path: str, flag: str = "--token-file") -> SecretStr:
    """The token in a file (its first line), or an error naming the file (and its ``flag``) and what to put there."""
    try:
        token = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InvalidArgumentError(f"{flag} {path!r} cannot be read ({exc.strerror}); give a readable file.") from exc
    if not token:
        raise InvalidArgumentError(f"{flag} {path!r} is empty; write the token into it, one line.")
    return SecretStr(token)


def check_exposure(host: str, settings: McpSettings) -> None:
    """Refuse to serve beyond this machine without a token (anyone who can reach the port could read and write)."""
    if host not in LOOPBACK and not settings.token_asked:
        raise InvalidArgumentError(
            f"--host {host!r} serves beyond this machine, and no token is set: anyone who reaches the port would "
            "read and write every collection. Set SBERT_QDRANT_MCP_TOKEN (or --token-file PATH) so that clients "
            "must send 'Authorization: Bearer <token>', or serve on 127.0.0.1."
        )


def transport_security(host: str, settings: McpSettings) -> TransportSecuritySettings:
    """The SDK's Host / Origin checks for the address bound: loopback names, the address itself, this machine's
    names, and ``SBERT_QDRANT_ALLOWED_HOSTS``."""
    names = [*LOOPBACK, *([] if host in _ANY else [host]), *settings.allowed_hosts]
    if host not in LOOPBACK:
        names += [socket.gethostname(), socket.getfqdn()]
    shown = [f"[{n}]" if ":" in n else n for n in dict.fromkeys(names)]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for n in shown for h in (n, f"{n}:*")],
        allowed_origins=[f"{scheme}://{h}" for n in shown for h in (n, f"{n}:*") for scheme in ("http", "https")],
    )
