"""The upstream's reply, read on the side while it passes to the client untouched.

A streamed reply is read as it goes by (:class:`StreamReader`: server-sent events, each a chunk of
the OpenAI stream), a whole one at once (:func:`whole_reply`). Either gives the :class:`Answer`
the proxy stores on the chat: the text, the tool calls the model asked for, and the server's
token counts (with what its prompt cache served). Nothing here can fail the reply: what cannot
be read is left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from smart_context.server_usage import cache_report

MAX_LINE_BYTES = 1_000_000  # a line longer than this is not an event we read


@dataclass
class Answer:
    """What the model answered, as far as it could be read."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # of the prompt, read from the upstream's prompt cache
    cache_write_tokens: int | None = None  # of the prompt, written to it
    model: str | None = None
    finished: bool = False  # the stream ended with [DONE] or a finish reason


class StreamReader:
    """Feed it the bytes of a streamed reply as they pass; :attr:`answer` is what they said."""

    def __init__(self) -> None:
        self.answer = Answer()
        self.done = False  # the stream said [DONE]: the reply is whole
        self._pending = b""
        self._parts: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}

    def feed(self, data: bytes) -> None:
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        if len(self._pending) > MAX_LINE_BYTES:
            self._pending = b""
        for line in lines:
            self._line(line.strip())

    def close(self) -> Answer:
        """The answer once the stream ended."""
        if self._pending.strip():
            self._line(self._pending.strip())
            self._pending = b""
        self.answer.text = "".join(self._parts)
        self.answer.tool_calls = [self._calls[k] for k in sorted(self._calls)]
        return self.answer

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.answer.finished = self.done = True
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            return
        if isinstance(chunk, dict):
            self._chunk(chunk)

    def _chunk(self, chunk: dict[str, Any]) -> None:
        read_usage(self.answer, chunk)
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        if choices[0].get("finish_reason"):
            self.answer.finished = True
        delta = choices[0].get("delta")
        if not isinstance(delta, dict):
            return
        if isinstance(delta.get("content"), str):
            self._parts.append(delta["content"])
        for call in delta.get("tool_calls") or []:
            if isinstance(call, dict):
                self._call(call)

    def _call(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        slot = self._calls.setdefault(
            index if isinstance(index, int) else len(self._calls),
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if isinstance(call.get("id"), str):
            slot["id"] = call["id"]
        function = call.get("function")
        if isinstance(function, dict):
            for key in ("name", "arguments"):
                if isinstance(function.get(key), str):
                    slot["function"][key] += function[key]


def error_said(status: int, body: bytes, limit: int = 300) -> str:
    """What an upstream's error answer says, for the chat's stored error: its message in
    OpenAI's error shape (``{"error": {"message": ...}}``), else its text, on one line and at
    most ``limit`` characters."""
    text = body[: 64 * 1024].decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    said = error.get("message") if isinstance(error, dict) else error
    if not isinstance(said, str) or not said.strip():
        said = text
    said = " ".join(said.split())
    said = said if len(said) <= limit else said[: limit - 1] + "…"
    return (
        f"The model server answered {status}: {said}"
        if said
        else (f"The model server answered {status}.")
    )


def whole_reply(body: bytes) -> Answer:
    """The answer of a reply that came whole (``stream`` false)."""
    answer = Answer()
    try:
        data = json.loads(body)
    except ValueError:
        return answer
    if not isinstance(data, dict):
        return answer
    read_usage(answer, data)
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            if isinstance(message.get("content"), str):
                answer.text = message["content"]
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                answer.tool_calls = [c for c in calls if isinstance(c, dict)]
        answer.finished = True
    return answer


def read_usage(answer: Answer, chunk: dict[str, Any]) -> None:
    """The ``model`` and ``usage`` counts of a reply (or a chunk of one), where well formed:
    the prompt cache's in any provider's shape (:func:`smart_context.server_usage.cache_report`)."""
    model = chunk.get("model")
    if isinstance(model, str) and model.strip():
        answer.model = model
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        return
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            setattr(answer, key, value)
    cache = cache_report(usage)
    if cache.cached_tokens is not None:
        answer.cached_tokens = cache.cached_tokens
    if cache.cache_write_tokens is not None:
        answer.cache_write_tokens = cache.cache_write_tokens
