"""Who may use a server over HTTP (SSE, streamable HTTP): a bearer token (``SBERT_QDRANT_MCP_TOKEN``, or a file
named by ``--token-file``) that may use every tool, and a read-only one (``SBERT_QDRANT_MCP_READ_TOKEN``,
``--read-token-file``) whose holder may not use the tools that write, each checked in constant time by the SDK's own
bearer middleware (401 without one); no address beyond loopback without a token; the SDK's Host / Origin checks
(421 / 403) on every address bound."""

from __future__ import annotations

import hmac
import logging
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
    """The token in a file: its one line (the newline after it left out), or an error naming the file (and its
    ``flag``) and what to put there."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgumentError(f"{flag} {path!r} cannot be read ({exc.strerror}); give a readable file.") from exc
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise InvalidArgumentError(f"{flag} {path!r} is empty; write the token into it, one line.")
    if len(lines) > 1:
        raise InvalidArgumentError(
            f"{flag} {path!r} has {len(lines)} lines that are not empty, and a token is one line: leave the token "
            "alone in the file."
        )
    return SecretStr(lines[0])


def check_exposure(host: str, settings: McpSettings) -> None:
    """Refuse to serve beyond this machine without a token (anyone who can reach the port could read and write)."""
    if host not in LOOPBACK and not settings.token_asked:
        raise InvalidArgumentError(
            f"--host {host!r} serves beyond this machine, and no token is set: anyone who reaches the port would "
            "read and write every collection. Set SBERT_QDRANT_MCP_TOKEN (or --token-file PATH) so that clients "
            "must send 'Authorization: Bearer <token>', or serve on 127.0.0.1."
        )


def transport_security(host: str, settings: McpSettings) -> tuple[list[str], TransportSecuritySettings]:
    """The Host names clients may use (loopback names, the address bound, this machine's names and its addresses
    where it serves every interface, and ``SBERT_QDRANT_ALLOWED_HOSTS``), and the SDK's transport settings: its own
    Host and Origin checks left to ``HostCheck``, which knows the address each connection reached."""
    names = [*LOOPBACK, *([] if host in _ANY else [host]), *settings.allowed_hosts]
    if host not in LOOPBACK:
        names += [socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys(names)), TransportSecuritySettings(enable_dns_rebinding_protection=False)


class HostCheck:
    """The SDK's DNS-rebinding checks (Host: 421, Origin: 403), plus the address the connection reached (the
    server's own, whichever interface: a client of ``0.0.0.0`` by the machine's IP), the 421 saying which setting
    lets a name in."""

    def __init__(self, app: Any, names: list[str]) -> None:
        self.app = app
        self.names = {n.lower() for n in names}

    def _own(self, host: str, scope: dict[str, Any]) -> bool:
        name = _without_port(host).lower()
        reached = scope.get("server") or ("", None)
        return name in self.names or name == str(reached[0]).lower()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host, origin = headers.get("host", ""), headers.get("origin")
        problem = None
        if not self._own(host, scope):
            problem = (
                421,
                f"Invalid Host header {host!r}: this server answers to {sorted(self.names)} and the address a client "
                f"reaches it at. To reach it as {_without_port(host)!r}, add it to SBERT_QDRANT_ALLOWED_HOSTS (a "
                f"JSON list: SBERT_QDRANT_ALLOWED_HOSTS='[\"{_without_port(host)}\"]') and restart the server.",
            )
        elif origin is not None and not self._own(urlsplit(origin).netloc, scope):
            problem = (403, f"Invalid Origin header {origin!r}: add its host to SBERT_QDRANT_ALLOWED_HOSTS.")
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, text = problem
        body = text.encode("utf-8")
        type_ = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": type_})
        await send({"type": "http.response.body", "body": body})


def _without_port(host: str) -> str:
    """``host`` of a Host header (``name:port``, ``[v6]:port``), the brackets of an IPv6 address left out."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class QueryRedacted(logging.Filter):
    """The access log's request line with the query's values left out: a token sent in the URL is never written."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) == 5 and isinstance(record.args[2], str):
            path, _, query = record.args[2].partition("?")
            if query:
                hidden = "&".join(f"{part.partition('=')[0]}=<redacted>" for part in query.split("&"))
                record.args = (*record.args[:2], f"{path}?{hidden}", *record.args[3:])
        return True
