"""The bytes of one chat file: a layout that lets a new message be appended in place, safely.

A chat file is one JSON object (docs/contract.md §2). Rewriting all of it for every message makes
the cost of a message grow with the chat (4.6 MB and ~250 ms of parsing and serialising at
10,000 messages). So the sidecar writes its files in one *layout*, still plain JSON::

    {"messages": [
    {...message 1...},
    {...message 2...}
    ], "title": "...", "topics": [...], ...}

Each message is on a line of its own (JSON text never holds a raw newline inside a string), and
the other keys follow the array on the last line. Appending messages, or changing the other keys
(a title, the topics), rewrites only the bytes from the end of the array on: a few KB, whatever
the length of the chat. Any other change (an edited message, a file in another layout written by
a hand or another program) rewrites the whole file atomically (temporary file, fsync, rename).

**Nothing lost on a crash.** An in-place change first goes to a journal, ``.{name}.journal``:
the offset and the new bytes, with a checksum, fsynced. Only then is the chat file changed and
fsynced, and the journal removed. Whoever next takes the chat's lock (:func:`recover`) finds a
complete journal and applies it again (applying twice is harmless), or an incomplete one, which
was never applied, and removes it. Writers hold the chat's lock, so no one changes a file while a
journal for it is pending; readers in this package read under the same lock, so they never see
a change half done. (A program that reads the file without the lock may, for the instant of an
in-place write, see it half written; it reads again as after any failed parse.)
"""

from __future__ import annotations

import json
import math
import os
import struct
import zlib
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smart_context.atomic import write_atomic

ChatData = dict[str, Any]

HEAD = b'{"messages": ['
_JOURNAL_MAGIC = b"SCJ1"
_JOURNAL_HEADER = struct.Struct(">4sQQ")  # magic, offset, payload length
_CHECKSUM = struct.Struct(">I")


class DamagedChatError(ValueError):
    """The chat file is not a JSON object with a ``messages`` list."""


@dataclass(frozen=True)
class Layout:
    """Where a file in the sidecar's layout can change in place.

    ``end`` is the offset of the ``\\n]`` that closes the messages array, ``count`` the number of
    messages before it and ``tail`` the bytes from ``end`` to the end of the file. ``parts``
    remembers each other key's value and its text, so an unchanged value (a chat's topics, which
    name their member messages and grow with the chat) is not serialised again. ``starts``: where
    each message's line begins (:meth:`span`), so one message can be read again from the file.
    """

    end: int
    count: int
    tail: bytes
    parts: Mapping[str, tuple[Any, bytes]] = field(default_factory=dict)
    starts: array[int] = field(default_factory=lambda: array("q"), compare=False, repr=False)

    def span(self, index: int) -> tuple[int, int]:
        """Where message ``index``'s JSON is in the file: from its line's start to its end,
        less the comma that separates it from the next."""
        start = self.starts[index]
        return start, (self.starts[index + 1] - 2 if index + 1 < self.count else self.end)


@dataclass(frozen=True)
class Parsed:
    """A chat read from disk: its data, its layout (``None``: another layout) and the values JSON
    cannot carry that it holds (``NaN``, ``Infinity``), which it keeps as Python floats."""

    data: ChatData
    layout: Layout | None
    odd_values: int = 0


def journal_path(path: Path) -> Path:
    """The journal of a chat file: a dot file beside it, named after it."""
    return path.with_name(f".{path.name}.journal")


def line_of(message: Any) -> bytes:
    """One message as a line of the file: UTF-8, or all-ASCII escapes when it holds text UTF-8
    cannot encode (a lone surrogate from another tool), so the write never fails."""
    text = json.dumps(message, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True).encode("ascii")


def tail_bytes(
    data: ChatData, known: Mapping[str, tuple[Any, bytes]] | None = None
) -> tuple[bytes, dict[str, tuple[Any, bytes]]]:
    """What follows the messages array (the chat's other keys, then the closing brace), and the
    text of each key's member; a value in ``known`` (the very same object) is not serialised
    again."""
    parts: dict[str, tuple[Any, bytes]] = {}
    for key, value in data.items():
        if key == "messages":
            continue
        seen = known.get(key) if known else None
        if seen is not None and seen[0] is value:
            parts[key] = seen
        else:  # one member of an object: its text without the braces
            parts[key] = (value, line_of({key: value})[1:-1])
    body = b", ".join(text for _, text in parts.values())
    return b"\n]" + (b", " + body if body else b"") + b"}\n", parts


def render(data: ChatData) -> tuple[bytes, Layout]:
    """The whole file of ``data`` in the sidecar's layout."""
    messages = data.get("messages") or []
    lines = [line_of(m) for m in messages]
    body = b",\n".join(lines)
    head = HEAD + (b"\n" + body if messages else b"")
    tail, parts = tail_bytes(data)
    return head + tail, Layout(len(head), len(messages), tail, parts, _starts(len(HEAD), lines))


def _starts(end: int, lines: list[bytes], first: bool = True) -> array[int]:
    """Where each of ``lines`` begins when they are written from ``end``, the end of the
    array's last line (``first``: the array is empty so far)."""
    out, at = array("q"), end + (1 if first else 2)
    for line in lines:
        out.append(at)
        at += len(line) + 2
    return out


# what to keep of each message read (given the message and where its JSON is in the file)
Keep = Callable[[Any, tuple[int, int]], Any]


def parse(raw: bytes, keep: Keep | None = None) -> Parsed:
    """The chat in ``raw``, or :class:`DamagedChatError` saying what is wrong with it.

    A file in the sidecar's layout is read a message line at a time, which gives each line's
    place too; ``keep``: what to hold of each message (by default all of it), so a long chat's
    records need never all be in memory at once (a 10,000-message chat is some 250 MB parsed
    whole). A file in another layout is parsed whole (``layout`` ``None``), and what ``keep``
    returned for its first lines before that showed is let go: ``keep`` must change nothing.
    """
    odd = 0

    def constant(name: str) -> float:
        nonlocal odd
        odd += 1
        return _constant(name)

    try:
        data, layout = _by_lines(raw, keep or _all, constant)
        return Parsed(data, layout, odd)
    except (_OtherLayout, DamagedChatError):
        odd = 0  # parsed whole below, which says what is wrong, if anything
    data = parse_value(raw, constant)
    if not isinstance(data, dict):
        raise DamagedChatError(f"expected a JSON object, found {type(data).__name__}")
    if not isinstance(data.get("messages", []), list):
        raise DamagedChatError("'messages' is not a list")
    data.setdefault("messages", [])
    return Parsed(data, None, odd)


def _all(message: Any, _span: tuple[int, int]) -> Any:
    return message


class _OtherLayout(Exception):
    """Not a file in the sidecar's layout."""


def _by_lines(raw: bytes, keep: Keep, constant: Callable[[str], float]) -> tuple[ChatData, Layout]:
    """:func:`parse` of a file in the sidecar's layout, a message line at a time."""
    end = raw.rfind(b"\n]")
    if not raw.startswith(HEAD) or end < len(HEAD) or raw[len(HEAD) : len(HEAD) + 1] != b"\n":
        raise _OtherLayout
    data = parse_value(b'{"messages": []' + raw[end + 2 :], constant)  # the other keys
    if not isinstance(data, dict):
        raise _OtherLayout
    messages, starts = [], array("q")
    at = len(HEAD) + 1
    while at <= end:
        stop = raw.find(b"\n", at)
        line_end = stop - 1 if stop < end else end  # less the comma before the next line
        if stop < end and raw[line_end : line_end + 1] != b",":
            raise _OtherLayout
        messages.append(keep(parse_value(raw[at:line_end], constant), (at, line_end)))
        starts.append(at)
        at = stop + 1
    data["messages"] = messages
    tail, parts = tail_bytes(data)
    if raw[end:] != tail or raw.count(b"\n") != len(messages) + 2:
        raise _OtherLayout
    return data, Layout(end, len(messages), tail, parts, starts)


def parse_value(raw: bytes, constant: Callable[[str], float] | None = None) -> Any:
    """The JSON value in ``raw`` (``NaN`` and infinities as Python floats, each name passed to
    ``constant`` when given), or :class:`DamagedChatError` saying what is wrong with it."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=constant or _constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedChatError(f"not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise DamagedChatError("nested too deeply to read") from exc
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise DamagedChatError(f"holds a value that cannot be read ({exc})") from exc


def _constant(name: str) -> float:
    return float(name.replace("Infinity", "inf"))


def read_spans(path: Path, spans: list[tuple[int, int]]) -> list[bytes]:
    """The bytes at each of ``spans`` of the file (a message each, :meth:`Layout.span`)."""
    with path.open("rb") as file:
        if len(spans) > 64:  # many: one read of the file, then slices
            raw = file.read()
            return [raw[start:end] for start, end in spans]
        out = []
        for start, end in spans:
            file.seek(start)
            out.append(file.read(end - start))
        return out


def write_whole(path: Path, data: ChatData) -> Layout:
    """Replace the file atomically with ``data`` in the sidecar's layout."""
    raw, layout = render(data)
    write_atomic(path, raw)
    return layout


def write_change(path: Path, layout: Layout, data: ChatData) -> Layout:
    """Store ``data``, whose first ``layout.count`` messages are those already in the file, by
    rewriting the file from ``layout.end`` on, through the journal. Nothing is written when
    nothing changed."""
    messages = data["messages"]
    new = messages[layout.count :]
    tail, parts = tail_bytes(data, layout.parts)
    if not new and tail == layout.tail:
        return layout
    lines = [line_of(m) for m in new]
    added = (b",\n" if layout.count else b"\n") + b",\n".join(lines) if new else b""
    _apply_journaled(path, layout.end, added + tail)
    starts = layout.starts + _starts(layout.end, lines, first=not layout.count)
    return Layout(layout.end + len(added), len(messages), tail, parts, starts)


def _apply_journaled(path: Path, offset: int, payload: bytes) -> None:
    journal = journal_path(path)
    header = _JOURNAL_HEADER.pack(_JOURNAL_MAGIC, offset, len(payload))
    record = header + payload + _CHECKSUM.pack(zlib.crc32(header + payload))
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, record)
        os.fsync(fd)
    finally:
        os.close(fd)
    _apply(path, offset, payload)
    journal.unlink()


def _apply(path: Path, offset: int, payload: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, payload, offset)
        os.ftruncate(fd, offset + len(payload))
        os.fsync(fd)
    finally:
        os.close(fd)


def recover(path: Path) -> bool:
    """Finish or drop an in-place change a crash interrupted; call with the chat's lock held.

    Returns whether a complete journal was applied.
    """
    journal = journal_path(path)
    try:
        record = journal.read_bytes()
    except FileNotFoundError:
        return False
    applied = False
    size = _JOURNAL_HEADER.size
    if len(record) >= size + _CHECKSUM.size:
        magic, offset, length = _JOURNAL_HEADER.unpack_from(record)
        body, check = record[: size + length], record[size + length :]
        complete = (
            magic == _JOURNAL_MAGIC
            and len(check) == _CHECKSUM.size
            and _CHECKSUM.unpack(check)[0] == zlib.crc32(body)
        )
        if complete and path.exists():
            _apply(path, offset, body[size:])
            applied = True
    journal.unlink()
    return applied


def finite(value: Any) -> Any:
    """``value`` with every ``NaN`` and infinity replaced by ``None``: what JSON can carry."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value
