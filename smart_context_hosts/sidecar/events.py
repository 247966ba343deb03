"""``host.emit`` fanned out to every connected browser as server-sent events.

Each client gets a bounded queue. A client that reads too slowly loses its *oldest* events
rather than making ``emit`` wait: a plugin emitting from the pipeline must never be held up by
a browser tab in the background. The payload is serialised once, at ``emit`` time, so a plugin
changing its dict afterwards does not change what was sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

DEFAULT_QUEUE_SIZE = 256

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerEvent:
    """One event: its name and its JSON payload, ready to send."""

    name: str
    data: str

    def encode(self) -> str:
        """The event in the ``text/event-stream`` wire format."""
        return format_sse(self.name, self.data)


_WAKE_UP = ServerEvent("", "")  # queued by close(); streams check ``hub.closed`` and end


def format_sse(event: str, data_json: str) -> str:
    """``event: NAME`` / ``data: JSON`` and the blank line that ends an event."""
    # A newline in the name would end the field early and let the name inject fields.
    name = " ".join(event.split()) or "message"
    lines = "".join(f"data: {line}\n" for line in data_json.split("\n"))
    return f"event: {name}\n{lines}\n"


def to_json(data: Any) -> str:
    """Compact JSON; values JSON cannot express are sent as their text rather than failing."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


class Subscription:
    """One client's queue of events; use as a context manager or call :meth:`close`."""

    def __init__(self, hub: EventHub, size: int) -> None:
        self._hub = hub
        self._queue: asyncio.Queue[ServerEvent] = asyncio.Queue(maxsize=size)
        self.loop = asyncio.get_running_loop()
        self.dropped = 0

    def put(self, event: ServerEvent) -> None:
        """Queue ``event``; when full, drop the oldest one. Runs on the client's loop."""
        while True:
            try:
                self._queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                self._queue.get_nowait()
                self.dropped += 1

    async def next(self, timeout: float | None = None) -> ServerEvent | None:
        """The next event, or ``None`` when ``timeout`` seconds pass without one."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None

    def close(self) -> None:
        """Stop receiving events."""
        self._hub.unsubscribe(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventHub:
    """The set of connected clients and :meth:`emit`, which reaches all of them."""

    def __init__(self, queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        self.queue_size = queue_size
        self.closed = False
        self._subscribers: list[Subscription] = []

    @property
    def client_count(self) -> int:
        """How many clients are listening."""
        return len(self._subscribers)

    def subscribe(self) -> Subscription:
        """A new client's subscription (call from the event loop that will read it)."""
        sub = Subscription(self, self.queue_size)
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget ``sub``; harmless if already gone."""
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    def close(self) -> None:
        """The server is stopping: wake every client so its stream can end cleanly."""
        self.closed = True
        self._deliver(_WAKE_UP)

    def emit(self, event: str, data: Mapping[str, Any] | None = None) -> None:
        """Send ``event`` with ``data`` to every client; never blocks, never waits for one.

        Safe to call from a worker thread: delivery is handed to each client's event loop.
        With no client listening (the proxy; a sidecar with no panel open) nothing is encoded: a
        long chat's topics event is a hundred kilobytes of JSON, made on the event loop.
        """
        if self._subscribers:
            self._deliver(ServerEvent(str(event), to_json(dict(data or {}))))

    def _deliver(self, message: ServerEvent) -> None:
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for sub in list(self._subscribers):
            if sub.loop is here:
                sub.put(message)
            elif not sub.loop.is_closed():
                sub.loop.call_soon_threadsafe(sub.put, message)
