"""A real OpenAI-compatible HTTP server on loopback, for tests through the ``openai`` client.

``tests/conftest.py`` registers this module as a pytest plugin, so any test may ask for the
``openai_server`` fixture; it yields an :class:`OpenAIStub` whose fields steer the server and
record what it saw:

- ``base_url`` (``http://127.0.0.1:PORT/v1``) and ``api_key`` (the only Bearer key accepted;
  any other gets a 401 like OpenAI's);
- ``requests``: ``(path, json_body)`` of every request, in arrival order (``{}`` for GET), and
  ``headers``: the headers of each (names in lower case);
- ``chat_replies``: queued replies for ``/v1/chat/completions``; when empty the reply is
  ``"echo: <last user message>"``. A :class:`ToolCallReply` (made with :func:`tool_calls`)
  answers with tool calls instead, streamed as OpenAI streams them: the id and name first, the
  arguments in slices, ``finish_reason: "tool_calls"``;
- ``fail_next``: HTTP statuses to fail the next requests with, one per request, with an
  OpenAI-style JSON error body. The ``openai`` client retries 408/409/429/5xx ``max_retries``
  times, so queue ``max_retries + 1`` of them to make one call fail; failures carry
  ``retry-after-ms: 10`` so those retries are quick;
- ``delay``: seconds to sleep before answering (for timeouts);
- ``stream_usage`` (default true): with ``stream_options: {"include_usage": true}`` a stream ends
  with OpenAI's usage chunk (no choices; ``prompt_tokens`` as :func:`prompt_tokens_of` counts);
  false plays a server that ignores the option;
- ``reject_stream_options``: answer any request carrying ``stream_options`` with a 400, as
  servers that do not know the option do;
- ``usage_extra``: keys merged into every chat completion's ``usage`` (a provider's prompt
  cache counts: ``{"prompt_tokens_details": {"cached_tokens": 1024}}``).

Endpoints: ``POST /v1/embeddings`` (vectors are ``tests.fakes.word_vector(text, 64)``, or of the
requested ``dimensions``; ``encoding_format`` ``float`` or ``base64``), ``POST
/v1/chat/completions`` (JSON, or server-sent ``chat.completion.chunk`` events with ``stream: true``,
ending with ``data: [DONE]``), ``GET /v1/models``. The model ``missing-model`` is a 404 everywhere.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import urlsplit

import pytest

from tests.fakes import word_vector

API_KEY = "sk-test-smart-context-stub"
MISSING_MODEL = "missing-model"
MODELS = ("stub-embedding", "stub-chat")
EMBEDDING_DIM = 64

Payload = dict[str, Any]
ARGUMENT_SLICE = 7  # characters of arguments JSON per streamed chunk, so assembly is tested


@dataclass(frozen=True)
class ToolCallReply:
    """A scripted reply asking for tool calls: ``calls`` are (function name, arguments text);
    ``text`` streams before them."""

    calls: tuple[tuple[str, str], ...]
    text: str = ""


def tool_calls(*calls: tuple[str, Any], text: str = "") -> ToolCallReply:
    """A :class:`ToolCallReply`; an argument that is not a string is sent as its JSON."""
    return ToolCallReply(
        tuple((name, a if isinstance(a, str) else json.dumps(a)) for name, a in calls), text
    )


Reply = str | ToolCallReply


@dataclass
class OpenAIStub:
    """The running server's controls and its record of requests (see the module docstring)."""

    base_url: str
    api_key: str = API_KEY
    requests: list[tuple[str, Payload]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)  # each request's, lower case
    chat_replies: list[Reply] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)
    delay: float = 0.0
    stream_usage: bool = True
    reject_stream_options: bool = False
    usage_extra: Payload = field(default_factory=dict)

    def paths(self) -> list[str]:
        """The path of every request so far, in order."""
        return [path for path, _ in self.requests]


class ApiError(Exception):
    """An OpenAI-style error answer: HTTP status, message, ``type`` and ``code``."""

    def __init__(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _failure(status: int) -> ApiError:
    if status == 429:
        return ApiError(429, "Rate limit reached for requests.", "requests", "rate_limit_exceeded")
    if status >= 500:
        return ApiError(status, "The server had an error processing your request.", "server_error")
    return ApiError(status, f"Stub failure {status} queued by the test.", "invalid_request_error")


def _take_first(queue: list[int]) -> int | None:
    # pop, not check-then-pop: requests are served on several threads at once
    try:
        return queue.pop(0)
    except IndexError:
        return None


def _check_model(body: Payload) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "you must provide a model parameter", "invalid_request_error")
    if model == MISSING_MODEL:
        raise ApiError(
            404,
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        )
    return model


def _embeddings(stub: OpenAIStub, body: Payload) -> Payload:
    model = _check_model(body)
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ApiError(
            400, "'input' must be a string or a list of strings", "invalid_request_error"
        )
    if any(t == "" for t in texts):
        raise ApiError(400, "'$.input' is invalid: empty string", "invalid_request_error")
    dim = int(body.get("dimensions") or EMBEDDING_DIM)
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = word_vector(text, dim)
        encoded: Any = (
            base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
            if as_base64
            else vector.tolist()
        )
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(len(t.split()) for t in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def _models(stub: OpenAIStub, body: Payload) -> Payload:
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in MODELS]
    return {"object": "list", "data": data}


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _chat_reply(stub: OpenAIStub, body: Payload) -> tuple[str, Reply]:
    model = _check_model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list", "invalid_request_error")
    try:
        return model, stub.chat_replies.pop(0)
    except IndexError:
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        return model, "echo: " + (_text_of(users[-1].get("content")) if users else "")


def _call_id(stub: OpenAIStub, index: int) -> str:
    return f"call_{len(stub.requests)}_{index}"


def prompt_tokens_of(messages: list[Any], tools: Any = None) -> int:
    """The stub's count of a prompt: a token per word (of the tools' JSON too), and OpenAI's
    framing of 4 per message (3 and the role) and 3 to prime the reply."""
    texts = [_text_of(m.get("content")) for m in messages if isinstance(m, dict)]
    in_tools = len(json.dumps(tools).split()) if tools else 0
    return sum(len(t.split()) + 4 for t in texts) + 3 + in_tools


def _completion(stub: OpenAIStub, body: Payload, model: str, reply: Reply) -> Payload:
    prompt_tokens = prompt_tokens_of(body["messages"], body.get("tools"))
    text = reply.text if isinstance(reply, ToolCallReply) else reply
    message: Payload = {"role": "assistant", "content": text}
    if isinstance(reply, ToolCallReply):
        message["tool_calls"] = [
            {
                "id": _call_id(stub, i),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for i, (name, arguments) in enumerate(reply.calls)
        ]
    completion_tokens = len(text.split())
    return {
        "id": f"chatcmpl-stub{len(stub.requests)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if isinstance(reply, ToolCallReply) else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            **stub.usage_extra,
        },
    }


def _pieces(reply: str) -> list[str]:
    """The reply cut before each word, like a tokenizer's stream; joined they give it back."""
    cuts = [0] + [i for i in range(1, len(reply)) if reply[i - 1].isspace() < reply[i].isspace()]
    return [reply[a:b] for a, b in zip(cuts, [*cuts[1:], len(reply)], strict=True) if a < b]


def _chunks(stub: OpenAIStub, body: Payload, model: str, reply: Reply) -> Iterator[Payload]:
    head = {
        "id": f"chatcmpl-stub{len(stub.requests)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: Payload, finish: str | None = None) -> Payload:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**head, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    text = reply.text if isinstance(reply, ToolCallReply) else reply
    for piece in _pieces(text):
        yield chunk({"content": piece})
    if isinstance(reply, ToolCallReply):
        for delta in _tool_call_deltas(stub, reply):
            yield chunk({"tool_calls": [delta]})
    yield chunk({}, "tool_calls" if isinstance(reply, ToolCallReply) else "stop")
    options = body.get("stream_options")
    if stub.stream_usage and isinstance(options, dict) and options.get("include_usage"):
        usage = _completion(stub, body, model, reply)["usage"]
        yield {**head, "choices": [], "usage": usage}


def _tool_call_deltas(stub: OpenAIStub, reply: ToolCallReply) -> Iterator[Payload]:
    """Each call as OpenAI streams it: index, id, type and name, then the arguments in slices."""
    for index, (name, arguments) in enumerate(reply.calls):
        yield {
            "index": index,
            "id": _call_id(stub, index),
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        for start in range(0, len(arguments), ARGUMENT_SLICE):
            piece = arguments[start : start + ARGUMENT_SLICE]
            yield {"index": index, "function": {"arguments": piece}}


Route = Callable[[OpenAIStub, Payload], Payload]
_JSON_ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/v1/embeddings"): _embeddings,
    ("GET", "/v1/models"): _models,
}
_CHAT = ("POST", "/v1/chat/completions")


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a request still sleeping in ``delay`` must not hold up teardown

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        host, port = self.server_address[:2]
        self.stub = OpenAIStub(base_url=f"http://{host!s}:{port}/v1")

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client gave up (a timeout test); report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked transfer for streaming

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest output is for the tests."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        stub = cast(_Server, self.server).stub
        path = urlsplit(self.path).path
        body = self._read_body()
        stub.requests.append((path, body if body is not None else {}))
        stub.headers.append({k.lower(): v for k, v in self.headers.items()})
        if stub.delay > 0:
            time.sleep(stub.delay)
        try:
            self._answer(stub, path, body)
        except ApiError as err:
            self._send_json(err.status, err.body, {"retry-after-ms": "10"})

    def _answer(self, stub: OpenAIStub, path: str, body: Payload | None) -> None:
        if self.headers.get("Authorization") != f"Bearer {stub.api_key}":
            raise ApiError(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
        queued = _take_first(stub.fail_next)
        if queued is not None:
            raise _failure(queued)
        if body is None:
            raise ApiError(400, "The request body is not valid JSON.", "invalid_request_error")
        route = (self.command, path)
        if route == _CHAT:
            if stub.reject_stream_options and "stream_options" in body:
                raise ApiError(
                    400,
                    "Unrecognized request argument supplied: stream_options",
                    "invalid_request_error",
                )
            model, reply = _chat_reply(stub, body)
            if body.get("stream"):
                self._send_events(_chunks(stub, body, model, reply))
            else:
                self._send_json(200, _completion(stub, body, model, reply))
            return
        if route not in _JSON_ROUTES:
            raise ApiError(404, f"Invalid URL ({self.command} {path})", "invalid_request_error")
        self._send_json(200, _JSON_ROUTES[route](stub, body))

    def _read_body(self) -> Payload | None:
        """The JSON object sent, ``{}`` when nothing was sent, ``None`` when it is not JSON."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _send_json(
        self, status: int, payload: Payload, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, events: Iterator[Payload]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self._send_chunk(f"data: {json.dumps(event)}\n\n".encode())
        self._send_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _send_chunk(self, data: bytes) -> None:
        # One HTTP chunk per event, written at once, so the client really receives a stream.
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


@contextmanager
def serve_openai_stub() -> Iterator[OpenAIStub]:
    """Run the server in a background thread for the ``with`` block; yields its controls."""
    server = _Server()
    thread = threading.Thread(
        target=server.serve_forever, args=(0.02,), name="openai-stub", daemon=True
    )
    thread.start()
    try:
        yield server.stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def openai_server() -> Iterator[OpenAIStub]:
    """A fresh OpenAI-compatible server on 127.0.0.1 for one test."""
    with serve_openai_stub() as stub:
        yield stub
