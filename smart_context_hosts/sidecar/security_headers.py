"""The headers that keep the sidecar's page from being framed, sniffed or made to run strangers'
code, sent on every HTTP response.

- ``Content-Security-Policy``: scripts, styles and connections only from the sidecar itself
  (``'self'``), images also from ``data:`` (the favicon is one), no plugins, no ``<base>``, forms
  only to the sidecar, and ``frame-ancestors 'none'``: no page, on any site, may frame it.
  There is no ``'unsafe-inline'``: the chat page carries the plugins' panels, whose inline
  ``<script>`` and ``<style>`` elements it allows one by one, by hash
  (:func:`content_security_policy` with the hashes of :mod:`.inline_hashes`).
- ``X-Frame-Options: DENY``, the same rule for browsers that predate ``frame-ancestors``;
- ``X-Content-Type-Options: nosniff``: a file is only ever what its content type says;
- ``Referrer-Policy: no-referrer``: the page address (it names the open chat) stays here.

:class:`SecurityHeaders` adds them in the middleware stack. A response that already states a
``Content-Security-Policy`` keeps it (the page states its own, with its hashes); the other three
are always set. Starlette answers an unhandled exception outside the middleware stack, so its
error handler adds :data:`SECURITY_HEADERS` itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Each directive and its sources; script-src and style-src gain the page's hashes.
POLICY: dict[str, tuple[str, ...]] = {
    "default-src": ("'self'",),
    "script-src": ("'self'",),
    "style-src": ("'self'",),
    "img-src": ("'self'", "data:"),
    "connect-src": ("'self'",),
    "base-uri": ("'none'",),
    "form-action": ("'self'",),
    "object-src": ("'none'",),
    "frame-ancestors": ("'none'",),
}
CSP_HEADER = "Content-Security-Policy"


def content_security_policy(
    *, script_hashes: Iterable[str] = (), style_hashes: Iterable[str] = ()
) -> str:
    """The policy, allowing in addition the inline scripts and styles with these hashes
    (``'sha256-…'`` sources, each listed once)."""
    sources = {directive: list(values) for directive, values in POLICY.items()}
    sources["script-src"] += dict.fromkeys(script_hashes)
    sources["style-src"] += dict.fromkeys(style_hashes)
    return "; ".join(" ".join([directive, *values]) for directive, values in sources.items())


DEFAULT_POLICY = content_security_policy()
ALWAYS: dict[str, str] = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Every header a response without inline content gets.
SECURITY_HEADERS: dict[str, str] = {CSP_HEADER: DEFAULT_POLICY, **ALWAYS}


class SecurityHeaders:
    """ASGI middleware: adds the security headers to every HTTP response start."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])  # ASGI lets a response leave it out
                headers = MutableHeaders(scope=message)
                headers.update(ALWAYS)
                headers.setdefault(CSP_HEADER, DEFAULT_POLICY)
            await send(message)

        await self.app(scope, receive, send_with_headers)
