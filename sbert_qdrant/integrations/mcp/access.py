"""Who may use a server over HTTP (SSE, streamable HTTP): one bearer token (``SBERT_QDRANT_MCP_TOKEN``, or a file
named by ``--token-file``), checked in constant time by the SDK's own bearer middleware (401 without it); no address
beyond loopback without a token; the SDK's Host / Origin checks (421 / 403) on every address bound."""

from __future__ import annotations

import hmac
import socket
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import SecretStr

from ...errors import InvalidArgumentError
from .settings import McpSettings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ANY = ("0.0.0.0", "::", "")


class BearerToken:
    """The SDK's ``TokenVerifier`` for one shared secret: a request's ``Authorization: Bearer`` token must equal it
    (``hmac.compare_digest``: the time taken says nothing of how much of it matched)."""

    def __init__(self, token: SecretStr) -> None:
        self._token = token.get_secret_value().encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode("utf-8"), self._token):
            return AccessToken(token=token, client_id="sbert-qdrant-mcp", scopes=[])
        return None


def auth_options(settings: McpSettings) -> dict[str, Any]:
    """``MCPServer``'s token verifier and auth settings when a token is set (a resource server only: no OAuth)."""
    if settings.mcp_token is None:
        return {}
    return {
        "token_verifier": BearerToken(settings.mcp_token),
        "auth": AuthSettings.model_validate(
            {"issuer_url": f"http://127.0.0.1:{settings.port}", "resource_server_url": None}
        ),
    }


def read_token_file(path: str) -> SecretStr:
    """The token in a file (its first line), or an error naming the file and what to put there."""
    try:
        token = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InvalidArgumentError(
            f"--token-file {path!r} cannot be read ({exc.strerror}); give a readable file."
        ) from exc
    if not token:
        raise InvalidArgumentError(f"--token-file {path!r} is empty; write the token into it, one line.")
    return SecretStr(token)


def check_exposure(host: str, settings: McpSettings) -> None:
    """Refuse to serve beyond this machine without a token (anyone who can reach the port could read and write)."""
    if host not in LOOPBACK and settings.mcp_token is None:
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
