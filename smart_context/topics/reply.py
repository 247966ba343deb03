"""The fast model's topic reply, parsed as hostile input.

Pure functions, no I/O: :func:`parse_extraction_reply` takes the reply text of the prompt built by
:mod:`.prompt`. We accept code fences and prose around the JSON, a wrapper object, trailing
commas or single quotes, a bare list of topics, and a truncated reply (the complete topic objects
and sticky ids before the cut are kept). Labels are cleaned by :func:`normalize_label`; a label
that is empty, junk or the reserved sticky label is dropped. Counts are coerced to integers in
``1..total_messages``; duplicates are merged case-insensitively (the larger count wins); beyond 8
topics the largest counts are kept in reply order. Everything dropped or changed is recorded in
``ExtractedTopics.notes``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Collection
from itertools import islice
from typing import Any

from smart_context.errors import ExtractionError
from smart_context.topics.labels import clean_label_text, is_sticky_label, normalize_label
from smart_context.topics.model import MAX_TOPICS, ExtractedTopics, Topic

MAX_REPLY_CHARS = 100_000  # a real reply is ~1 KB; bounds the work a hostile one can cause
MAX_RAW_ITEMS = 200
MAX_MEMBERS = 5_000  # member ids read per topic (a transcript shows a few hundred messages)
_MAX_ATTEMPTS = 32  # JSON start positions tried in the reply
_MAX_SNIPPET_CHARS = 20_000

_DECODER = json.JSONDecoder()
_OPENER = re.compile(r"[{\[]")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_STICKY_KEYS = ("sticky_message_ids", "sticky_ids", "sticky")
_STICKY_SALVAGE = re.compile(r"[\"']?sticky\w*[\"']?\s*:\s*\[")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"-?\d{1,12}(?:\.\d{1,6})?")


def parse_extraction_reply(
    reply: str,
    known_ids: Collection[str],
    total_messages: int,
    message_ids: Collection[str] = (),
) -> ExtractedTopics:
    """Topics and sticky ids from the model's reply, which is treated as hostile input.

    ``known_ids`` are the ids a sticky message may have (e.g. the user messages' ids);
    ``message_ids`` those a topic's members may have (every message shown). Other ids are
    dropped. Raises :class:`ExtractionError` when nothing usable is found.
    """
    if not isinstance(reply, str):
        raise ExtractionError(f"The model's reply is a {type(reply).__name__}, not text.")
    notes: list[str] = []
    if len(reply) > MAX_REPLY_CHARS:
        notes.append(f"reply of {len(reply)} chars cut to {MAX_REPLY_CHARS}")
    payload = _find_payload(reply[:MAX_REPLY_CHARS], notes)
    if payload is None:
        raise ExtractionError(f"No JSON with topics in the model's reply: {_preview(reply)}")
    raw_topics, raw_sticky = _split_payload(payload, notes)
    members = message_ids if isinstance(message_ids, (set, frozenset)) else set(message_ids)
    topics = _clean_topics(raw_topics, max(1, total_messages), members, notes)
    sticky = _clean_sticky(raw_sticky, known_ids, notes)
    if not topics and not sticky:
        why = "; ".join(notes[:5]) or "the lists were empty"
        raise ExtractionError(f"The model's reply has no usable topics or sticky ids ({why}).")
    return ExtractedTopics(tuple(topics), tuple(sticky), source="llm", notes=tuple(notes))


def _find_payload(text: str, notes: list[str]) -> Any:
    """The first JSON value in ``text`` that looks like our answer, or a salvage of it."""
    for match in islice(_OPENER.finditer(text), _MAX_ATTEMPTS):
        value = _decode_at(text, match.start())
        # A list inside an object is the topics list of a reply cut short: salvage keeps more.
        if _is_payload(value) and (isinstance(value, dict) or "{" not in text[: match.start()]):
            return value
    salvaged = _salvage(text)
    if salvaged is not None:
        notes.append("reply was not complete JSON; kept the complete parts before the cut")
    return salvaged


def _decode_at(text: str, start: int) -> Any:
    """The value starting at ``start``: strict JSON, then without trailing commas, then Python."""
    try:
        return _DECODER.raw_decode(text, start)[0]
    except (ValueError, RecursionError):
        pass
    end = _balanced_end(text, start)
    if end is None:
        return None
    snippet = text[start:end]
    try:
        return json.loads(_TRAILING_COMMA.sub(r"\1", snippet))
    except (ValueError, RecursionError):
        pass
    try:  # single quotes: literal_eval only builds literals, it never runs code
        return ast.literal_eval(snippet)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _balanced_end(text: str, start: int) -> int | None:
    """The index after the bracket closing the one at ``start``; None if the text ends first."""
    depth = 0
    quote = ""
    escaped = False
    for i in range(start, min(len(text), start + _MAX_SNIPPET_CHARS)):
        char = text[i]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _is_payload(value: Any) -> bool:
    if isinstance(value, dict):
        return "topics" in value or any(key in value for key in _STICKY_KEYS)
    return isinstance(value, list) and any(isinstance(v, dict) and "label" in v for v in value)


def _salvage(text: str) -> dict[str, list[Any]] | None:
    """The complete topic objects and sticky ids of a reply cut short."""
    topics: list[Any] = []
    pos = text.find("{")
    for _ in range(MAX_RAW_ITEMS):
        if pos < 0:
            break
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            value, end = None, pos + 1
        if isinstance(value, dict) and "label" in value:
            topics.append(value)
        else:
            end = pos + 1  # a complete topic may sit inside an object that was cut
        pos = text.find("{", end)
    sticky: list[Any] = []
    key = _STICKY_SALVAGE.search(text)
    if key is not None:
        segment = text[key.end() :].split("]", 1)[0]
        sticky = [_json_string(s) for s in _JSON_STRING.findall(segment)]
    return {"topics": topics, "sticky_message_ids": sticky} if topics or sticky else None


def _json_string(quoted: str) -> str | None:
    try:
        value = json.loads(quoted)
    except ValueError:  # a bad escape: the id is reported and dropped later
        return None
    return value if isinstance(value, str) else None


def _split_payload(payload: Any, notes: list[str]) -> tuple[list[Any], Any]:
    """The raw topic items and the raw sticky value of a payload."""
    if isinstance(payload, list):
        notes.append("reply was a bare list of topics")
        return payload, []
    topics = payload.get("topics", [])
    sticky: Any = next((payload[key] for key in _STICKY_KEYS if key in payload), [])
    if isinstance(topics, dict):
        notes.append("topics was a mapping of label to count")
        topics = [{"label": k, "count": v} for k, v in topics.items()]
    elif isinstance(topics, tuple):
        topics = list(topics)
    elif not isinstance(topics, list):
        notes.append(f"topics is a {type(topics).__name__}, not a list; ignored")
        topics = []
    return topics, sticky


def _clean_topics(
    raw: list[Any], upper: int, members: Collection[str], notes: list[str]
) -> list[Topic]:
    """Valid, merged topics; at most ``MAX_TOPICS``, the largest counts, in reply order."""
    if len(raw) > MAX_RAW_ITEMS:
        notes.append(f"only the first {MAX_RAW_ITEMS} of {len(raw)} topics read")
    merged: dict[str, Topic] = {}
    for n, item in enumerate(raw[:MAX_RAW_ITEMS], 1):
        topic = _clean_topic(item, n, upper, members, notes)
        if topic is None:
            continue
        seen = merged.get(topic.label.casefold())
        if seen is None:
            merged[topic.label.casefold()] = topic
            continue
        notes.append(f"merged duplicate topic {topic.label!r}")
        ids = tuple(dict.fromkeys(seen.message_ids + topic.message_ids))
        merged[topic.label.casefold()] = Topic(seen.label, max(seen.count, topic.count), ids)
    topics = list(merged.values())
    if len(topics) <= MAX_TOPICS:
        return topics
    largest = sorted(range(len(topics)), key=lambda i: -topics[i].count)[:MAX_TOPICS]
    kept = sorted(largest)
    dropped = [topics[i].label for i in range(len(topics)) if i not in kept]
    more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    notes.append(f"kept the {MAX_TOPICS} largest topics; dropped {dropped[:5]}{more}")
    return [topics[i] for i in kept]


def _clean_topic(
    item: Any, n: int, upper: int, members: Collection[str], notes: list[str]
) -> Topic | None:
    """One raw topic item as a Topic, or None (with a note saying why)."""
    label: Any
    count: Any = None
    raw_ids: Any = ()
    if isinstance(item, str):
        label = item
    elif isinstance(item, dict):
        label, count = item.get("label"), item.get("count")
        raw_ids = item.get("message_ids", item.get("ids", ()))
    else:
        notes.append(f"topic {n} is a {type(item).__name__}, not an object; dropped")
        return None
    if not isinstance(label, str):
        notes.append(f"topic {n} has a {type(label).__name__} label, not text; dropped")
        return None
    cleaned = clean_label_text(label)
    normal = normalize_label(label)
    if not normal:
        problem = "too long" if cleaned else "empty"
        notes.append(f"topic {n} label {_preview(label)} is {problem}; dropped")
        return None
    if len(normal.split()) < len(cleaned.split()):
        notes.append(f"topic {n} label {_preview(label)} trimmed to {normal!r}")
    if is_sticky_label(normal):
        notes.append(f"topic {n} used the reserved label {normal!r}; dropped")
        return None
    number = _as_int(count)
    clamped = min(max(number if number is not None else 1, 1), upper)
    if number is None or clamped != count or isinstance(count, bool):
        notes.append(f"topic {normal!r} count {_preview(count)} taken as {clamped}")
    return Topic(normal, clamped, _clean_ids(raw_ids, members, f"topic {normal!r}", notes))


def _as_int(value: Any) -> int | None:
    """A count as an int: floats rounded, the first number in a string; None if there is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value) if math.isfinite(value) else None
    if isinstance(value, str):
        match = _NUMBER.search(value[:50])
        return round(float(match.group())) if match else None
    return None


def _clean_sticky(raw: Any, known_ids: Collection[str], notes: list[str]) -> tuple[str, ...]:
    """Sticky ids that name known messages, de-duplicated, in reply order."""
    return _clean_ids(raw, known_ids, "sticky", notes, MAX_RAW_ITEMS)


def _clean_ids(
    raw: Any, known_ids: Collection[str], what: str, notes: list[str], limit: int = MAX_MEMBERS
) -> tuple[str, ...]:
    """The ids in ``raw`` that name known messages, de-duplicated, in reply order."""
    if not known_ids:
        return ()  # the caller offered no ids to pick from
    if isinstance(raw, str):
        notes.append(f"{what} ids were a string, not a list")
        raw = [part for part in re.split(r"[,\s]+", raw[:10_000]) if part]
    elif isinstance(raw, tuple):
        raw = list(raw)
    elif not isinstance(raw, list):
        notes.append(f"{what} ids are a {type(raw).__name__}, not a list; ignored")
        return ()
    known = known_ids if isinstance(known_ids, (set, frozenset)) else frozenset(known_ids)
    out: dict[str, None] = {}
    for item in raw[:limit]:
        if isinstance(item, dict):
            item = item.get("id")
        if isinstance(item, int) and not isinstance(item, bool):
            item = str(item)  # ids that look like numbers come back as numbers
        if not isinstance(item, str):
            notes.append(f"{what} id {_preview(item)} is not text; dropped")
            continue
        ident = item.strip().strip("[]").strip()  # the model may copy the transcript's brackets
        if ident in known:
            out[ident] = None
        else:
            notes.append(f"{what} id {_preview(item)} names no known message; dropped")
    return tuple(out)


def _preview(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
