"""A chat request's JSON body, read in time that grows with what is new in it.

A stateless client sends the whole conversation again with each turn, and writes it the same
way each time: the body of a turn begins with the bytes of the last turn's body up to the end
of its last message, and only the new messages and the members after them differ. So the
proxy keeps that beginning of a chat's last body (:class:`Known`) and, when the next body
begins with it, parses only the rest: a 10,000-message chat is 3 MB of JSON, 6 to 12 ms to
parse whole and a tenth of a millisecond to compare.

The result is what ``json.loads`` gives for the same bytes (a later member wins over an earlier
one of the same name; ``NaN`` is read as Python reads it). Anything this module does not expect
(a body whose messages are not one array at the top level, a changed beginning, bytes that are
not UTF-8) is parsed whole. The messages parsed before are reused, not copied: the callers read
them and never change them.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

MAX_CHATS = 64  # chats whose last body is kept (per vault)
MAX_BYTES = 64 * 1024 * 1024  # and their bytes, at most (the messages parsed from them: 2-6x)

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class _Unexpected(Exception):
    """Not the shape the quick reading expects: the body is parsed whole."""


@dataclass(frozen=True)
class Known:
    """What the next body of a chat may continue: its bytes up to the end of the last message
    (``prefix``), the members before ``messages`` and the messages, as parsed."""

    prefix: bytes
    before: dict[str, Any]
    messages: list[Any]


@dataclass(frozen=True)
class Body:
    """A parsed body (``data``: any JSON value) and, when it is an object with a non-empty
    ``messages`` array, what the chat's next body may continue (``known``)."""

    data: Any
    known: Known | None = None


def read_body(raw: bytes, known: Known | None = None) -> Body | None:
    """``raw`` parsed (``None`` when it is not JSON), from the end of ``known`` when it begins
    with it."""
    if known is not None and raw.startswith(known.prefix):
        try:
            return _continued(raw, known)
        except (_Unexpected, ValueError, RecursionError, UnicodeDecodeError, IndexError):
            pass  # the whole body decides
    try:
        return _whole(raw)
    except (_Unexpected, UnicodeDecodeError):
        pass
    try:  # not JSON this module reads (another encoding, a top level not an object)
        return Body(json.loads(raw))
    except (ValueError, RecursionError):
        return None


def _whole(raw: bytes) -> Body:
    text = raw.decode("utf-8")
    try:
        pos = _skip(text, 0)
        if text[pos : pos + 1] != "{":
            raise _Unexpected("not an object")
        members, pos, ends = _members(text, pos + 1, first=True)
    except (ValueError, RecursionError) as exc:  # json.loads decides (UTF-16 reads as UTF-8)
        raise _Unexpected("not read here") from exc
    if _skip(text, pos) != len(text):
        raise _Unexpected("more after the object")
    data = dict(members)
    messages = data.get("messages")
    names = [name for name, _ in members]
    if names.count("messages") != 1 or not isinstance(messages, list) or not messages:
        return Body(data)
    at = names.index("messages")
    end = _last_end(text, ends[at])
    prefix = raw[: end if text.isascii() else len(text[:end].encode("utf-8"))]
    return Body(data, Known(prefix, dict(members[:at]), messages))


def _continued(raw: bytes, known: Known) -> Body:
    text = raw[len(known.prefix) :].decode("utf-8")
    pos = _skip(text, 0)
    new: list[Any] = []
    end = 0
    while text[pos] == ",":
        value, end = _DECODER.raw_decode(text, _skip(text, pos + 1))
        new.append(value)
        pos = _skip(text, end)
    if not new or text[pos] != "]":
        raise _Unexpected("no new message")
    after, pos, _ = _members(text, pos + 1, first=False)
    if _skip(text, pos) != len(text) or any(name == "messages" for name, _ in after):
        raise _Unexpected("more after the object, or messages twice")
    messages = [*known.messages, *new]
    data = {**known.before, "messages": messages, **dict(after)}
    grown = len(known.prefix) + (end if text.isascii() else len(text[:end].encode("utf-8")))
    return Body(data, Known(raw[:grown], known.before, messages))


def _members(text: str, pos: int, *, first: bool) -> tuple[list[tuple[str, Any]], int, list[int]]:
    """The members of an object from ``pos`` to its ``}``: ``(name, value)`` in order, the
    position after the ``}``, and where each value ends. ``first``: ``pos`` is just
    inside the object, else after a member (the next ones each follow a ``,``)."""
    members: list[tuple[str, Any]] = []
    ends: list[int] = []
    pos = _skip(text, pos)
    if first and text[pos : pos + 1] == "}":
        return members, pos + 1, ends
    while True:
        if not first:
            if text[pos : pos + 1] == "}":
                return members, pos + 1, ends
            if text[pos : pos + 1] != ",":
                raise ValueError("expected , or }")
            pos = _skip(text, pos + 1)
        first = False
        name, pos = _DECODER.raw_decode(text, pos)
        if not isinstance(name, str):
            raise ValueError("a member's name must be a string")
        pos = _skip(text, pos)
        if text[pos : pos + 1] != ":":
            raise ValueError("expected :")
        value, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))
        members.append((name, value))
        ends.append(pos)
        pos = _skip(text, pos)


def _last_end(text: str, end: int) -> int:
    """Where the last element of the array ending at ``end`` (just after its ``]``) ends."""
    pos = end - 2
    while text[pos] in " \t\n\r":
        pos -= 1
    return pos + 1


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


class Bodies:
    """The last body of each chat, for :func:`read_body`: the most recent chats, within
    :data:`MAX_CHATS` and :data:`MAX_BYTES`."""

    def __init__(self, max_chats: int = MAX_CHATS, max_bytes: int = MAX_BYTES) -> None:
        self.max_chats = max_chats
        self.max_bytes = max_bytes
        self._known: OrderedDict[str, Known] = OrderedDict()
        self._bytes = 0

    def get(self, chat_id: str) -> Known | None:
        return self._known.get(chat_id)

    def put(self, chat_id: str, known: Known) -> None:
        self._drop(chat_id)
        if len(known.prefix) > self.max_bytes:
            return
        while self._known and (
            len(self._known) >= self.max_chats or self._bytes + len(known.prefix) > self.max_bytes
        ):
            self._drop(next(iter(self._known)))
        self._known[chat_id] = known
        self._bytes += len(known.prefix)

    def _drop(self, chat_id: str) -> None:
        known = self._known.pop(chat_id, None)
        if known is not None:
            self._bytes -= len(known.prefix)
