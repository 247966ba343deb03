"""Keeps web pages on other sites away from the local sidecar.

A server on 127.0.0.1 is reachable from any page the user's browser opens. Two checks close
the usual holes, without getting in the way of ``curl`` or scripts:

- **Host**: unless remote access was allowed, the ``Host`` header must name this machine, so a
  DNS-rebinding page (``evil.example`` resolving to 127.0.0.1) is refused;
- **Origin**: a request that changes something (not GET/HEAD/OPTIONS) and carries an
  ``Origin`` header must come from the sidecar's own page (browsers always send ``Origin`` on
  cross-site POSTs; ``curl`` sends none).
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _host_name(host_header: str) -> str:
    """``127.0.0.1`` from ``127.0.0.1:8765``, ``::1`` from ``[::1]:8765``."""
    return (urlsplit(f"//{host_header}").hostname or "").lower()


def is_loopback_host(host_header: str) -> bool:
    """True when a ``Host`` header names this machine."""
    name = _host_name(host_header)
    return name in LOOPBACK_NAMES or name.startswith("127.") or name.endswith(".localhost")


class LocalGuard:
    """ASGI middleware applying the Host and Origin checks (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, allow_remote: bool = False) -> None:
        self.app = app
        self.allow_remote = allow_remote

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self._problem(scope)
            if problem is not None:
                await _refuse(send, problem)
                return
        await self.app(scope, receive, send)

    def _problem(self, scope: Scope) -> str | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not self.allow_remote and not is_loopback_host(host):
            return (
                f"Host {host!r} is not this machine. The sidecar answers only local requests; "
                "start it with --allow-remote to serve other machines."
            )
        origin = headers.get("origin")
        if scope["method"] in SAFE_METHODS or origin is None:
            return None
        origin_host = urlsplit(origin).netloc.lower()
        if origin_host != host.lower():
            return f"Requests from {origin!r} are not allowed: use the sidecar's own page."
        return None


async def _refuse(send: Send, problem: str) -> None:
    body = json.dumps({"status": "error", "error": problem}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
