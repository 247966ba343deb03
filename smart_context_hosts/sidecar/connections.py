"""How long a client may take to ask, and how many may be connected at once.

uvicorn's h11 protocol gives a request's headers no deadline. Its keep-alive timer is armed only
after a response (``H11Protocol.on_response_complete``) and any byte the client sends cancels it
(``H11Protocol.data_received``), so a client that opens a connection and trickles its headers a
byte at a time, or sends nothing at all, holds the connection forever.
:class:`HeaderDeadlineProtocol` adds the missing rule: once a connection waits for a request,
new or between keep-alive requests, the request's complete headers must arrive within
``header_timeout`` seconds or the connection is closed. Bytes arriving do not extend the deadline.

While a request is being answered there is no deadline here: an answer takes the time it takes,
and an event stream (``GET /api/events``) stays open as long as its page does. A request *body*
that trickles in is the application's to bound (``BODY_TIMEOUT_SECONDS`` in :mod:`.app`), since
only a route knows whether it reads one; a body still arriving when the answer is complete falls
under the deadline again.

:func:`server_config` is the uvicorn configuration ``smart-context serve`` runs with.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

# Browsers and curl send their headers in one packet; 10 s leaves room for a slow remote link
# (--allow-remote) and still frees a stalled client's connection soon.
HEADER_TIMEOUT_SECONDS = 10.0
# Each open page holds one event stream for as long as it is open, plus a few short requests:
# one person's tabs stay far below 256, while a flood of connections stops there, well under the
# usual limit of 1024 open files. Beyond it uvicorn answers 503 and closes the connection.
MAX_CONNECTIONS = 256

log = logging.getLogger(__name__)


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers come too late."""

    header_timeout: float = HEADER_TIMEOUT_SECONDS
    _deadline: asyncio.TimerHandle | None = None

    @classmethod
    def with_timeout(cls, seconds: float) -> type[HeaderDeadlineProtocol]:
        """This protocol with a ``header_timeout`` of ``seconds`` (uvicorn wants a class)."""
        return cast(
            "type[HeaderDeadlineProtocol]",
            type(cls.__name__, (cls,), {"header_timeout": seconds}),
        )

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Run the deadline while the connection waits for a request, stop it while answering."""
        answering = self.cycle is not None and not self.cycle.response_complete
        if answering:
            self._stop_deadline()
        elif self._deadline is None and not self.transport.is_closing():
            self._deadline = self.loop.call_later(self.header_timeout, self._headers_too_late)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_too_late(self) -> None:
        self._deadline = None
        # A connection handed to another protocol (a WebSocket upgrade) is no longer ours.
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return
        log.debug(
            "Closing a connection from %s: no complete request within %g s.",
            self.client,
            self.header_timeout,
        )
        self.transport.close()


def server_config(
    app: ASGIApp,
    *,
    header_timeout: float = HEADER_TIMEOUT_SECONDS,
    max_connections: int = MAX_CONNECTIONS,
    **options: Any,
) -> uvicorn.Config:
    """The uvicorn ``Config`` for ``app``: late headers close the connection, and at most
    ``max_connections`` are served at once; ``options`` go to ``uvicorn.Config`` as they are.

    The HTTP implementation is pinned to h11 (uvicorn's "auto" would switch to httptools when it
    is installed, without this deadline), and WebSockets are off: the sidecar serves none.
    """
    return uvicorn.Config(
        app,
        http=HeaderDeadlineProtocol.with_timeout(header_timeout),
        ws="none",
        limit_concurrency=max_connections,
        **options,
    )
