"""A loopback HTTP server and harness pages for driving the panel in a real browser.

The harness page embeds ``render_panel()`` the way a host does. With a ``fake`` configuration it
also defines ``window.sidecar`` in JavaScript: command handlers that keep a small chat model,
record every call in ``window.__fake.calls`` and answer like the plugin; ``window.__fake.emit``
feeds the listeners registered with ``sidecar.on``; every DOM ``smart_context:filter_changed``
is recorded in ``window.__fake.domEvents``. Without ``fake`` the page has no ``window.sidecar``,
so the panel falls back to HTTP: the server then answers ``POST /api/commands/{name}`` with
``command_handler`` and streams what ``publish`` sends to every open ``GET /api/events``.
"""

from __future__ import annotations

import json
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CommandHandler = Callable[[str, dict[str, Any]], dict[str, Any]]


def script_json(data: object) -> str:
    """JSON that is safe inside a ``<script>`` element."""
    text = json.dumps(data)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def chat_fixture(
    topics: Sequence[tuple[str, int]],
    sticky_ids: Sequence[str] = (),
    total: int | None = None,
) -> dict[str, Any]:
    """A fake chat: messages ``m1..mN``, each topic about its first ``count`` messages in turn."""
    n = total if total is not None else max([c for _, c in topics] + [len(sticky_ids), 1])
    messages = [f"m{i}" for i in range(1, n + 1)]
    topic_ids: dict[str, list[str]] = {}
    offset = 0
    for label, count in topics:
        topic_ids[label] = [messages[(offset + k) % n] for k in range(min(count, n))]
        offset += 3
    stored: list[dict[str, Any]] = [{"label": label, "count": count} for label, count in topics]
    if sticky_ids:
        stored.append(
            {
                "label": "Instructions & Preferences",
                "sticky": True,
                "message_ids": list(sticky_ids),
                "count": len(sticky_ids),
            }
        )
    return {
        "topics": stored,
        "messages": messages,
        "topic_ids": topic_ids,
        "sticky_ids": list(sticky_ids),
    }


_FAKE_SIDECAR_JS = """
(function () {
  var cfg = JSON.parse(document.getElementById("fake-config").textContent);
  var fake = (window.__fake = {
    calls: [], domEvents: [], listeners: {}, delay: cfg.delay || 0, failNext: null,
    chats: cfg.chats, active: {}, embedding: cfg.embedding_search !== false,
  });
  function included(chat, topics) {
    if (!topics.length) return chat.messages.slice();
    var keep = new Set(chat.sticky_ids);
    topics.forEach(function (t) {
      (chat.topic_ids[t] || []).forEach(function (id) { keep.add(id); });
    });
    return chat.messages.filter(function (id) { return keep.has(id); });
  }
  function handle(name, args) {
    if (fake.failNext) {
      var e = fake.failNext; fake.failNext = null; return {status: "error", error: e};
    }
    if (name === "smart_context.set_similarity_mode") {
      fake.embedding = !!args.enabled;
      return {status: "success", embedding_search: fake.embedding};
    }
    var chatId = args.chat_id || cfg.current;
    var chat = fake.chats[chatId];
    if (!chat) return {status: "error", error: "No chat named " + chatId};
    if (name === "smart_context.set_filter") fake.active[chatId] = args.topics.slice();
    else if (name !== "smart_context.get_topics")
      return {status: "error", error: "Unknown " + name};
    var active = fake.active[chatId] || [];
    return {
      status: "success", chat_id: chatId, topics: chat.topics, total_messages: chat.messages.length,
      active_topics: active, included_ids: included(chat, active), embedding_search: fake.embedding,
    };
  }
  window.sidecar = {
    command: function (name, args) {
      fake.calls.push({name: name, args: JSON.parse(JSON.stringify(args || {}))});
      return new Promise(function (resolve) {
        setTimeout(function () { resolve(handle(name, args || {})); }, fake.delay);
      });
    },
    on: function (name, fn) { (fake.listeners[name] = fake.listeners[name] || []).push(fn); },
  };
  fake.emit = function (name, payload) {
    (fake.listeners[name] || []).forEach(function (fn) { fn(payload); });
  };
  fake.commands = function (name) {
    return fake.calls.filter(function (c) { return c.name === name; });
  };
})();
"""

_RECORD_DOM_EVENTS_JS = """
window.__domEvents = [];
document.addEventListener("smart_context:filter_changed", function (e) {
  window.__domEvents.push(e.detail);
  if (window.__fake) window.__fake.domEvents.push(e.detail);
});
"""

_PAGE_CSS = """
html, body { margin: 0; }
body { background: #e8ebf1; font-family: system-ui, sans-serif; }
@media (prefers-color-scheme: dark) { body { background: #0b0d11; } }
.shell { display: flex; justify-content: flex-end; min-height: 100vh; }
#panel-host { width: 320px; border-left: 1px solid rgb(127 127 127 / 0.25); }
"""


def harness_page(
    panel_html: str,
    *,
    chat_id: str | None,
    fake: Mapping[str, Any] | None = None,
) -> str:
    """A page that hosts the panel; ``fake`` (``chats``, ``current``, ``delay``...) adds a
    sidecar."""
    body_attr = "" if chat_id is None else f' data-chat-id="{chat_id}"'
    head = [f"<style>{_PAGE_CSS}</style>", f"<script>{_RECORD_DOM_EVENTS_JS}</script>"]
    if fake is not None:
        head.append(
            f'<script type="application/json" id="fake-config">{script_json(fake)}</script>'
        )
        head.append(f"<script>{_FAKE_SIDECAR_JS}</script>")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Smart Context panel harness</title>"
        + "".join(head)
        + f'</head><body{body_attr}><div class="shell"><aside id="panel-host">'
        + panel_html
        + "</aside></div></body></html>"
    )


class HarnessServer:
    """A threaded loopback HTTP server for harness pages, commands and server-sent events."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.command_calls: list[tuple[str, dict[str, Any]]] = []
        self.command_handler: CommandHandler = _unknown_command
        self._streams: list[queue.Queue[tuple[str, dict[str, Any]]]] = []
        self._unheard: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_page(self, path: str, html: str) -> str:
        """Serve ``html`` at ``path``; returns its full URL."""
        self.pages[path] = html
        return self.base_url + path

    def publish(self, event: str, payload: dict[str, Any]) -> None:
        """Send one server-sent event to every open event stream, as a host does.

        With none open, the event waits for the next stream, so a page that connects late
        still hears it.
        """
        with self._lock:
            if not self._streams:
                self._unheard.append((event, payload))
            for stream in self._streams:
                stream.put((event, payload))

    def open_stream(self) -> queue.Queue[tuple[str, dict[str, Any]]]:
        """A new stream's own queue, holding any event published while none was open."""
        stream: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        with self._lock:
            for item in self._unheard:
                stream.put(item)
            self._unheard.clear()
            self._streams.append(stream)
        return stream

    def close_stream(self, stream: queue.Queue[tuple[str, dict[str, Any]]]) -> None:
        """Stop sending to a stream that ended."""
        with self._lock:
            self._streams.remove(stream)

    def wait_for_stream(self, timeout: float = 5.0) -> None:
        """Block until an event stream is open (a page's ``EventSource`` connected)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._streams:
                    return
            time.sleep(0.02)
        raise TimeoutError("no event stream connected")

    def next_event(
        self,
        stream: queue.Queue[tuple[str, dict[str, Any]]],
        timeout: float,
        gone: Callable[[], bool],
    ) -> tuple[str, dict[str, Any]] | None:
        """The stream's next event; ``None`` when the server stops or ``gone()`` says the
        page hung up."""
        while not self._stopping.is_set() and not gone():
            try:
                return stream.get(timeout=timeout)
            except queue.Empty:
                continue
        return None

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and end open event streams."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _unknown_command(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"status": "error", "error": f"Unknown command: {name}"}


def _handler_for(server: HarnessServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            """Pages, and the event stream."""
            if self.path == "/api/events":
                self._stream_events()
                return
            page = server.pages.get(self.path)
            if page is None:
                self._send(404, b"not found", "text/plain")
                return
            self._send(200, page.encode(), "text/html; charset=utf-8")

        def do_POST(self) -> None:
            """``/api/commands/{name}``."""
            prefix = "/api/commands/"
            if not self.path.startswith(prefix):
                self._send(404, b"{}", "application/json")
                return
            length = int(self.headers.get("Content-Length") or 0)
            args = json.loads(self.rfile.read(length) or b"{}")
            name = self.path[len(prefix) :]
            server.command_calls.append((name, args))
            result = server.command_handler(name, args)
            status = 200 if result.get("status") == "success" else 400
            self._send(status, json.dumps(result).encode(), "application/json")

        def _stream_events(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.write(b"retry: 200\n\n")
            self.wfile.flush()
            stream = server.open_stream()
            try:
                while (item := server.next_event(stream, 0.1, self._hung_up)) is not None:
                    event, payload = item
                    body = f"event: {event}\ndata: {json.dumps(payload)}\n\n"
                    self.wfile.write(body.encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the page went away; the other streams go on
            finally:
                server.close_stream(stream)

        def _hung_up(self) -> bool:
            """Whether the page closed its end (a closed socket reads as empty at once)."""
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            try:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

    return Handler


@contextmanager
def running_server() -> Iterator[HarnessServer]:
    """A started ``HarnessServer``, stopped on exit."""
    server = HarnessServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
