"""A client's ``messages`` as a vault chat, and the chat as ``messages`` again: pure functions.

A stateless client resends the whole conversation with each request. The proxy splits it
(:func:`split`): the client's own system prompt at the top (kept apart, first and unchanged in
what goes upstream), the history, the user message being answered, and any tool round that
follows it (sent on untouched). The history and the message are then merged into the stored
chat (:func:`merge`): what the chat already holds keeps its ids and records, and where the client
says otherwise (an edited message, a regenerated reply) the client wins, since it is the client's
conversation. A client that sends only the last part of a long chat (its own compaction, a
context size, a small window) changes nothing it did not send: its messages are found at the
end of the stored chat and what is new is appended; the plugins then choose from the whole
stored chat, so such a client gets its older messages back.

A stored message is the sidecar's shape (``id``, ``role``, ``content`` as text, ``created_at``);
a message that was more than a role and a text (parts, a name, tool calls, a tool result) keeps
its exact form under ``wire`` and goes upstream as it came (:func:`wire_form`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

Message = dict[str, Any]

LEAD_ROLES = frozenset({"system", "developer"})  # the client's instructions, kept first
TEXT_PARTS = frozenset({"text", "input_text"})
SIDECAR_ONLY = ("notice", "error")  # a stored message the client never saw or sent
# a client's own messages before the stored chat's tail it kept (a summary of what it dropped)
MAX_PREAMBLE = 2
MIN_RUN = 2  # messages a tail must share with the stored chat to be placed inside it


@dataclass(frozen=True)
class Split:
    """A request's ``messages``: ``lead`` (the client's system prompt), ``history``,
    ``message`` (the last user message), ``tail`` (a tool round after it)."""

    lead: list[Message]
    history: list[Message]
    message: Message
    tail: list[Message]

    @property
    def text(self) -> str:
        """What the user asked, as text."""
        return text_of(self.message.get("content"))


@dataclass(frozen=True)
class Merged:
    """The chat's messages after a request: ``kept`` of them were stored before, ``dropped``
    stored ones the client no longer has (an edit or a regenerated reply replaced them), and
    the last ``added`` are the client's new ones."""

    messages: list[Message]
    kept: int
    dropped: int
    added: int = 0


def split(messages: Any) -> Split | None:
    """The parts of a request's ``messages``; ``None`` when there is no user message with text
    to work on (the request then goes upstream as it came)."""
    if not isinstance(messages, list) or not set(map(type, messages)) <= {dict}:
        return None  # (one loop in C: a long chat is 10,000 messages)
    start = 0
    while start < len(messages) and messages[start].get("role") in LEAD_ROLES:
        start += 1
    last = next(
        (i for i in range(len(messages) - 1, start - 1, -1) if messages[i].get("role") == "user"),
        None,
    )
    if last is None or not text_of(messages[last].get("content")).strip():
        return None
    return Split(
        lead=list(messages[:start]),
        history=list(messages[start:last]),
        message=messages[last],
        tail=list(messages[last + 1 :]),
    )


def text_of(content: Any) -> str:
    """A message's text: the string itself, or its text parts joined (images and other parts
    carry none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"]
            for p in content
            if isinstance(p, dict)
            and p.get("type") in TEXT_PARTS
            and isinstance(p.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def is_plain(message: Mapping[str, Any]) -> bool:
    """Whether a client's message is a role and a text, nothing else."""
    return set(message) <= {"role", "content"} and isinstance(message.get("content"), str)


def stored_form(message: Mapping[str, Any], message_id: str, now: str) -> Message:
    """How a client's message is kept in the chat file."""
    out: Message = {
        "id": message_id,
        "role": str(message.get("role") or "user"),
        "content": text_of(message.get("content")),
        "created_at": now,
    }
    if not is_plain(message):
        out["wire"] = json.loads(json.dumps(message))  # its own copy, and JSON only
    return out


def wire_form(message: Mapping[str, Any]) -> Message:
    """How a stored message (or one the plugin added) goes upstream: as the client sent it, or
    as a role and a text."""
    wire = message.get("wire")
    if isinstance(wire, dict) and isinstance(wire.get("role"), str):
        return dict(wire)
    return {"role": str(message.get("role")), "content": text_of(message.get("content"))}


def _same(stored: Mapping[str, Any], incoming: Mapping[str, Any], exact: bool = False) -> bool:
    """Whether a stored message is the client's: the same text, spaces aside (``exact``: byte
    for byte, as clients resend their messages)."""
    if stored.get("role") != incoming.get("role"):
        return False
    if "wire" in stored or not is_plain(incoming):
        return wire_form(stored) == dict(incoming)
    have, want = stored.get("content"), incoming.get("content")
    return have == want or (not exact and _normal(have) == _normal(want))


def _normal(text: Any) -> str:
    return " ".join(text.split()) if isinstance(text, str) else ""


def _calls(message: Mapping[str, Any]) -> bool:
    """Whether a message (stored, or as a client sends it) asks for tool calls."""
    form = wire_form(message) if "wire" in message else message
    return bool(form.get("tool_calls"))


def merge(
    stored: Sequence[Message],
    incoming: Sequence[Message],
    new_id: Callable[[], str],
    now: str,
) -> Merged:
    """The chat after a request whose conversation (history, user message and any tool round
    after it) is ``incoming``.

    The stored messages that match ``incoming`` from the start stay as they are (ids, records).
    An assistant message the client sends back changed (a client that trims or reformats its
    replies) keeps its id and record with the client's text, if it is the same kind of message
    (tool calls or not). At the first other difference the client wins: the stored messages
    from there on are dropped and the client's are added. The sidecar's own notices and errors
    are skipped when matching, and dropped with the rest.

    A conversation that does not start where the stored chat does is placed at the stored tail
    it repeats (:func:`_tail_start`; after at most :data:`MAX_PREAMBLE` messages of the client's
    own, such as a summary of what it dropped, which are not stored): what comes before stays,
    and only a difference inside the part the client sent replaces what it covers. One that
    repeats nothing of the stored chat is appended to it: nothing is deleted but by an edit."""
    kept, rest = _matched(stored, 0, incoming, 0)
    head, i = 0, 0  # the chat as stored, and what is new: the usual turn
    if rest or not (kept or all(_own(m) for m in stored)):
        # byte for byte first (clients resend their messages as they were): quick on a long
        # chat; then as merge compares them, spaces aside
        placed = _tail_start(stored, incoming, kept > 0, partial(_same, exact=True))
        placed = placed or _tail_start(stored, incoming, kept > 0)
        if placed is None and not kept:  # nothing of the stored chat: after it
            head = len(stored)
        elif placed is not None and placed[0] > placed[1]:  # a tail the client kept
            head, i = placed
        # else an edit, a regenerated reply, or the chat's first messages edited: the client
        # wins from there
    return _walk(stored, head, incoming, i, new_id, now)


def _matched(
    stored: Sequence[Message], j: int, incoming: Sequence[Message], i: int
) -> tuple[int, int]:
    """How many messages ``stored`` from ``j`` and ``incoming`` from ``i`` share as
    :func:`_walk` matches them, and how many stored ones are left after (its own aside)."""
    kept = 0
    while i < len(incoming) and j < len(stored):
        if _own(stored[j]):
            j += 1
            continue
        have, want = stored[j], incoming[i]
        if not (_same(have, want) or _reformatted(have, want)):
            break
        kept, i, j = kept + 1, i + 1, j + 1
    return kept, sum(1 for m in stored[j:] if not _own(m))


def _reformatted(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """Whether ``want`` is a stored reply the client sends back changed (trimmed, reformatted)."""
    return have.get("role") == want.get("role") == "assistant" and _calls(have) == _calls(want)


def _walk(
    stored: Sequence[Message],
    head: int,
    incoming: Sequence[Message],
    i: int,
    new_id: Callable[[], str],
    now: str,
) -> Merged:
    """:func:`merge` with the stored chat's first ``head`` messages kept as they are and the
    rest matched against ``incoming`` from ``i`` (what comes before ``i`` is not stored)."""
    out = [dict(m) for m in stored[:head]]
    j = head
    while i < len(incoming) and j < len(stored):
        if _own(stored[j]):
            j += 1
            continue
        have, want = stored[j], incoming[i]
        if _same(have, want):
            out.append(dict(have))
        elif _reformatted(have, want):
            updated = stored_form(want, str(have.get("id") or new_id()), now)
            out.append({**have, **updated, "created_at": have.get("created_at", now)})
            if "wire" not in updated:
                out[-1].pop("wire", None)
        else:
            break
        i += 1
        j += 1
    kept = len(out)
    dropped = sum(1 for m in stored[j:] if not _own(m))
    out.extend(stored_form(m, new_id(), now) for m in incoming[i:])
    return Merged(out, kept, dropped, len(incoming) - i)


def _own(message: Mapping[str, Any]) -> bool:
    """Whether a stored message is the sidecar's own (a notice, an error)."""
    return any(message.get(k) for k in SIDECAR_ONLY)


def _tail_start(
    stored: Sequence[Message],
    incoming: Sequence[Message],
    ending: bool = False,
    same: Callable[[Mapping[str, Any], Mapping[str, Any]], bool] = _same,
) -> tuple[int, int] | None:
    """Where a conversation that does not start with the stored chat's first message repeats
    a later stretch of it: ``(k, s)``, ``stored[k]`` being ``incoming[s]`` (``s`` messages of the
    client's own before it), the stretch reaching the stored chat's end (the client sent its
    last part and something new) or holding :data:`MIN_RUN` messages at least (then edited
    inside; not with ``ending``). The longest stretch wins, the latest of equals; one at the
    same position (``k == s``) is an edit of the chat's first messages, not a tail; ``None``:
    the stored chat is repeated nowhere."""
    best: tuple[bool, int, int, int] | None = None  # (reaches the end, run, k, s)
    for s in range(min(MAX_PREAMBLE + 1, len(incoming))):
        want = incoming[s]
        for k in range(len(stored) - 1, s - 1, -1):
            if _own(stored[k]) or not same(stored[k], want):
                continue
            run, end = _run(stored, k, incoming, s)
            if not end and (ending or run < MIN_RUN):
                continue
            found = (end, run, k, s)
            if best is None or found[:2] > best[:2]:
                best = found  # the longest stretch that reaches the end, the latest one
        if best is not None and best[0]:
            break  # the fewest messages of the client's own
    return None if best is None else (best[2], best[3])


def _run(
    stored: Sequence[Message], k: int, incoming: Sequence[Message], s: int
) -> tuple[int, bool]:
    """How many messages ``stored`` from ``k`` and ``incoming`` from ``s`` share, and whether
    that reaches the end of the stored chat (its own notices aside)."""
    run = 0
    while k < len(stored) and s < len(incoming):
        if _own(stored[k]):
            k += 1
            continue
        if not _same(stored[k], incoming[s]):
            break
        run, k, s = run + 1, k + 1, s + 1
    return run, all(_own(m) for m in stored[k:])


def paired_tools(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without a tool result whose call is not among them, and without the calls
    of an assistant message whose results are not all there (its text stays): a server refuses
    a request with either, and a filter or a budget may have split a pair."""
    answered: set[str] = {str(m.get("tool_call_id")) for m in messages if m.get("role") == "tool"}
    out: list[Message] = []
    called: set[str] = set()
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list) and calls:
            ids = {str(c.get("id")) for c in calls if isinstance(c, dict)}
            if ids <= answered:
                called |= ids
                out.append(message)
            elif text_of(message.get("content")).strip():
                out.append({k: v for k, v in message.items() if k != "tool_calls"})
            continue
        if message.get("role") == "tool" and str(message.get("tool_call_id")) not in called:
            continue
        out.append(message)
    return out
