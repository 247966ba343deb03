"""Keeps web pages on other sites away from the local sidecar.

A server on 127.0.0.1 is reachable from any page the user's browser opens. Two checks close
the usual holes, without getting in the way of ``curl`` or scripts:

- **Host**: unless remote access was allowed, the ``Host`` header must name this machine, so a
  DNS-rebinding page (``evil.example`` resolving to 127.0.0.1) is refused. "This machine" is
  exactly ``localhost`` or a loopback address (127.0.0.0/8, ``[::1]``), each with an optional
  port: any other name may be the attacker's, even one that starts with ``127.`` or ends in
  ``.localhost``, and the numeric spellings a browser rewrites (``2130706433``, ``0x7f.1``)
  never arrive from one;
- **Origin**: a request that changes something (not GET/HEAD/OPTIONS) and carries an
  ``Origin`` header must come from the sidecar's own page (browsers always send ``Origin`` on
  cross-site POSTs; ``curl`` sends none).
"""

from __future__ import annotations

import ipaddress
import json
import re
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A Host header (RFC 9110 §7.2): a bracketed IPv6 address or a name, then an optional port. Only
# ASCII: the characters a loopback name or address can hold, nothing else.
_HOST_HEADER = re.compile(
    r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?"
)
_MAX_PORT = 65535


def is_loopback_host(host_header: str) -> bool:
    """True when a ``Host`` header names this machine: ``localhost`` (any case, one trailing dot
    allowed) or a loopback address (``127.x.y.z``, ``[::1]``), with an optional port."""
    match = _HOST_HEADER.fullmatch(host_header)
    if match is None or (match["port"] is not None and int(match["port"]) > _MAX_PORT):
        return False
    if match["ipv6"] is not None:
        return _is_loopback_address(match["ipv6"], ipaddress.IPv6Address)
    name = match["name"].lower()
    return name.removesuffix(".") == "localhost" or _is_loopback_address(
        name, ipaddress.IPv4Address
    )


def _is_loopback_address(
    text: str, kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address]
) -> bool:
    """True when ``text`` is a loopback address of ``kind``, written the standard way (dotted
    decimal for IPv4): ``127.0.0.1.attacker.example`` and ``0x7f.1`` are not addresses."""
    try:
        return kind(text).is_loopback
    except ValueError:
        return False


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
        if not self.allow_remote:
            problem = _host_problem([v for k, v in scope["headers"] if k.lower() == b"host"])
            if problem is not None:
                return problem
        origin = headers.get("origin")
        if scope["method"] in SAFE_METHODS or origin is None:
            return None
        try:
            origin_host = urlsplit(origin).netloc.lower()
        except ValueError:  # "http://[::1" and the like: no origin at all
            return f"Origin {origin[:80]!r} is not a valid origin."
        if origin_host != host.lower():
            return f"Requests from {origin!r} are not allowed: use the sidecar's own page."
        return None


def _host_problem(hosts: list[bytes]) -> str | None:
    """Why the request's ``Host`` headers do not name this machine, or ``None`` when they do."""
    if len(hosts) != 1:
        said = "no Host header" if not hosts else f"{len(hosts)} Host headers"
        return f"The request has {said}: send one, naming localhost or 127.0.0.1."
    host = hosts[0].decode("latin-1")
    if is_loopback_host(host):
        return None
    return (
        f"Host {host!r} is not this machine. The sidecar answers only requests for localhost, "
        "127.0.0.1 or [::1] (with an optional port); start it with --allow-remote to serve "
        "other machines."
    )


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
