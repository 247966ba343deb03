"""A chat's token usage over its replies, read from the records stored with them (the ``usage``,
``cache`` and ``budget`` of each reply's ``smart_context`` record,
:mod:`smart_context.context.usage`): tokens sent, cached, and the bill beside the plain
client's (:mod:`smart_context.usage_bill`).

Pure reading: the chat files hold everything, so ``smart-context stats`` loads no model and
starts no service, and the panel's ``smart_context.usage_stats`` gives the same figures. A stored
record is data from disk, possibly hand-edited: a figure that is not a count is left out, never
trusted, and a file that is not a chat is reported and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smart_context.errors import ChatIdError
from smart_context.paths import check_chat_id, memory_dir
from smart_context.server_usage import token_count as count
from smart_context.usage_bill import bill_of

MAX_SERIES = 500  # the last replies the panel's chart is given


@dataclass(slots=True)
class ReplyUsage:
    """One reply's figures: tokens sent, the whole history's, the server's count if known, and
    its bill beside the plain client's (:func:`smart_context.usage_bill.bill_of`)."""

    id: str
    created_at: str | None
    sent_tokens: int
    full_tokens: int
    reported_prompt_tokens: int | None
    bill: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the ratio and the bill."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "sent_tokens": self.sent_tokens,
            "full_tokens": self.full_tokens,
            "ratio": ratio(self.full_tokens, self.sent_tokens),
            "reported_prompt_tokens": self.reported_prompt_tokens,
            "cache_kind": self.bill["kind"],
            "cached_tokens": self.bill["cached"],
            "cached_reported": self.bill["cached_reported"],
            "billed": self.bill["billed"],
            "plain_billed": self.bill["plain_billed"],
            "saved": self.bill["saved"],
        }


@dataclass
class Totals:
    """Sums over replies: ``measured`` replies carry figures (older ones may not).
    ``cached_tokens`` is the server's count where it gave one (``cached_reported_replies``),
    else our estimate; ``billed`` and ``plain_billed`` are in new-token units."""

    replies: int = 0
    measured: int = 0
    sent_tokens: int = 0
    full_tokens: int = 0
    reported_replies: int = 0
    reported_prompt_tokens: int = 0
    cached_tokens: int = 0
    cached_reported_replies: int = 0
    billed: float = 0.0
    plain_billed: float = 0.0

    def add(self, other: Totals) -> None:
        """Fold ``other`` in."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def measure(self, reply: ReplyUsage) -> None:
        """Count one measured reply in."""
        self.measured += 1
        self.sent_tokens += reply.sent_tokens
        self.full_tokens += reply.full_tokens
        if reply.reported_prompt_tokens is not None:
            self.reported_replies += 1
            self.reported_prompt_tokens += reply.reported_prompt_tokens
        self.cached_tokens += reply.bill["cached"]
        self.cached_reported_replies += reply.bill["cached_reported"]
        self.billed += reply.bill["billed"]
        self.plain_billed += reply.bill["plain_billed"]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the ratio (``None`` before any measured reply) and ``saved``
        (``plain_billed - billed``: negative when it cost more)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["ratio"] = ratio(self.full_tokens, self.sent_tokens) if self.measured else None
        out["billed"], out["plain_billed"] = round(self.billed, 2), round(self.plain_billed, 2)
        out["saved"] = round(self.plain_billed - self.billed, 2)
        return out


@dataclass
class ChatUsage:
    """One chat's usage: totals, each measured reply, and the budget of the last request."""

    chat_id: str
    title: str
    totals: Totals = field(default_factory=Totals)
    series: list[ReplyUsage] = field(default_factory=list)
    last: dict[str, Any] | None = None  # {"budget", "usage"} of the last measured reply


def ratio(full: int, sent: int) -> float:
    """How many times smaller the request was than the whole history."""
    return round(full / sent, 2) if sent > 0 else 1.0


def chat_usage(chat_id: str, data: Mapping[str, Any]) -> ChatUsage:
    """The usage of one chat's content (a chat file's object)."""
    title = data.get("title")
    usage = ChatUsage(chat_id, title if isinstance(title, str) else "")
    messages = data.get("messages")
    last: Mapping[str, Any] | None = None
    totals = usage.totals
    for message in messages if isinstance(messages, list) else []:
        if not _is_reply(message):
            continue
        totals.replies += 1
        reply = _reply_usage(message)
        if reply is None:
            continue
        usage.series.append(reply)
        last = message
        totals.measure(reply)
    if last is not None:
        record = last["smart_context"]
        usage.last = {
            "usage": usage.series[-1].as_dict() | _counter(record["usage"]),
            "budget": _budget(record.get("budget")),
        }
    return usage


def _is_reply(message: Any) -> bool:
    """Whether ``message`` is a model's reply: an assistant message that is no notice of the
    host's that no model was called (``"no_model"``, ``"aborted"``: its record says what would
    have been sent, but nothing was, so it is no reply and costs nothing)."""
    return (
        isinstance(message, Mapping)
        and message.get("role") == "assistant"
        and "notice" not in message
    )


def measured(message: Any) -> bool:
    """Whether ``message`` is a reply with figures: one :func:`chat_usage` counts in its series
    and whose record's ``budget`` it reads when it is the last."""
    return _is_reply(message) and _reply_usage(message) is not None


def _reply_usage(message: Mapping[str, Any]) -> ReplyUsage | None:
    record = message.get("smart_context")
    stored = record.get("usage") if isinstance(record, Mapping) else None
    if not isinstance(stored, Mapping):
        return None
    sent, full = count(stored.get("sent_tokens")), count(stored.get("full_tokens"))
    server = message.get("usage")
    bill = bill_of(record, server)
    if sent is None or full is None or bill is None:
        return None
    reported = count(stored.get("reported_prompt_tokens"))
    if reported is None and isinstance(server, Mapping):
        reported = count(server.get("prompt_tokens"))
    created = message.get("created_at")
    return ReplyUsage(
        str(message.get("id")),
        created if isinstance(created, str) else None,
        sent,
        full,
        reported,
        bill,
    )


def _counter(stored: Mapping[str, Any]) -> dict[str, Any]:
    name, exact = stored.get("counted_with"), stored.get("exact")
    return {
        "counted_with": name if isinstance(name, str) else None,
        "exact": exact if isinstance(exact, bool) else None,
    }


def _budget(value: Any) -> dict[str, Any] | None:
    """A stored ``budget`` with only its figures that are counts."""
    if not isinstance(value, Mapping):
        return None
    limit, used = count(value.get("limit")), count(value.get("used"))
    if limit is None or used is None:
        return None
    sections = value.get("by_section")
    by_section = {
        str(name): n
        for name, raw in (sections.items() if isinstance(sections, Mapping) else ())
        if (n := count(raw)) is not None
    }
    over, note = count(value.get("over")), value.get("note")
    said = {"over": over, "note": note} if over and isinstance(note, str) else {}
    return {"limit": limit, "used": used, "by_section": by_section} | _counter(value) | said


def usage_result(usage: ChatUsage, max_series: int = MAX_SERIES) -> dict[str, Any]:
    """What ``smart_context.usage_stats`` answers: totals, the last request, the series."""
    shown = usage.series[-max_series:] if max_series > 0 else []
    return {
        "chat_id": usage.chat_id,
        "title": usage.title,
        **usage.totals.as_dict(),
        "last": usage.last,
        "series": [r.as_dict() for r in shown],
        "series_omitted": len(usage.series) - len(shown),
    }


@dataclass
class VaultUsage:
    """Every chat of a vault, the totals, and the files that could not be read."""

    chats: list[ChatUsage] = field(default_factory=list)
    total: Totals = field(default_factory=Totals)
    damaged: list[tuple[str, str]] = field(default_factory=list)  # file, why


def chat_files(vault: Path) -> Iterator[tuple[str, Path]]:
    """``(chat_id, path)`` of each chat file in ``.memory/`` (not the embedding caches, set
    aside copies, journals or our own folder: a chat id has no dot)."""
    try:
        paths = sorted(memory_dir(vault).glob("*.json"))
    except OSError:
        return
    for path in paths:
        try:
            yield check_chat_id(path.stem), path
        except ChatIdError:
            continue


def vault_usage(vault: Path) -> VaultUsage:
    """Read every chat file of ``vault``; a damaged one is reported and skipped."""
    out = VaultUsage()
    for chat_id, path in chat_files(vault):
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError) as exc:
            out.damaged.append((str(path), _why(exc)))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            out.damaged.append((str(path), "not a chat: no list of messages"))
            continue
        usage = chat_usage(chat_id, data)
        out.chats.append(usage)
        out.total.add(usage.totals)
    return out


def _why(exc: Exception) -> str:
    """In the words ``smart-context doctor`` uses for the same files."""
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or exc})"
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    return f"not valid JSON ({exc})"


def vault_result(found: VaultUsage) -> dict[str, Any]:
    """``smart-context stats --json``: per chat, the total, the damaged files."""
    return {
        "chats": [
            {"chat_id": c.chat_id, "title": c.title, **c.totals.as_dict()} for c in found.chats
        ],
        "total": found.total.as_dict(),
        "damaged": [{"file": f, "error": why} for f, why in found.damaged],
    }
