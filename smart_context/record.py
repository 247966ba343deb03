"""The context record: what a request was sent with, and why (docs/contract.md §6).

:class:`ContextRecord` is the topic rule's part of ``ctx.metadata["smart_context"]``: the rule
builds one, a failure builds one with :meth:`ContextRecord.failed`, and :meth:`as_dict` writes the
host's shape. :class:`RequestRecord` is the whole record of a request, one part per section
(the rule's, the memory section's, the notes', the budget's, usage), made once when the request
is decided; nothing patches the dict it writes. The host stores the record with every reply, so
it stays small as chats grow: it carries **either** ``included_ids`` **or** ``excluded_ids``,
whichever list is shorter, and the scores of at most :data:`MAX_SCORES` messages, rounded to
three decimals; :func:`included_ids` expands a stored record again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from smart_context.messages import pick, select

# the most kept messages the record scores, the latest: a click on a subject of a 100,000-message
# chat keeps tens of thousands, and the record is stored with every reply
MAX_SCORES = 500

Mode = Literal["full", "filtered", "fallback"]
FULL: Mode = "full"
FILTERED: Mode = "filtered"
FALLBACK: Mode = "fallback"


@dataclass(frozen=True, eq=False)
class Kept:
    """What a topic filter kept, written into the record only when the record is written: a
    10,000-message chat's filter keeps thousands of messages, and a budget then sends a few
    hundred of them. ``flags`` say which of ``all_ids`` were kept; the first ``offset`` of them
    are sticky messages older than the history (they have no score), and ``values`` is each
    history message's similarity."""

    all_ids: Sequence[Any]
    flags: npt.NDArray[np.bool_]
    offset: int
    values: npt.NDArray[np.floating[Any]]

    def ids(self) -> tuple[str, list[Any]]:
        return shorter_ids(self.all_ids, self.flags)

    def scores(self, sent: npt.NDArray[np.bool_] | None = None) -> tuple[dict[Any, float], int]:
        """The latest :data:`MAX_SCORES` kept history messages' scores, rounded, and how many
        more were kept without one in the record; ``sent``: only those sent (over
        ``all_ids``), when a budget sent part of what the filter kept."""
        flags = self.flags if sent is None else self.flags & sent
        at = np.flatnonzero(flags[self.offset :])
        omitted = max(len(at) - MAX_SCORES, 0)
        at = at[omitted:]
        ids = pick(self.all_ids, (at + self.offset).tolist())
        rounded = np.round(self.values[at].astype(np.float64), 3).tolist()
        return dict(zip(ids, rounded, strict=True)), omitted


@dataclass(frozen=True)
class ContextRecord:
    """What one request sent, in the user's words."""

    mode: Mode
    active_topics: tuple[str, ...]
    sticky_ids: tuple[Any, ...]
    total_messages: int
    threshold: float | Literal["auto"] | None = None
    cuts: dict[str, float] | None = None  # with "auto": the similarity each topic asked for
    # ("included_ids" | "excluded_ids", ids): the shorter side, see the module docstring
    ids: tuple[str, list[Any]] = field(default_factory=lambda: ("excluded_ids", []))
    kept: Kept | None = None  # a filter's ids and scores, written with the record
    best_score: float | None = None  # on fallback: the closest any message came
    note: str | None = None  # on fallback, in words: the filter did nothing, and why
    error: str | None = None  # a person can read it; the history was left whole

    @classmethod
    def failed(cls, total_messages: int, error: str) -> ContextRecord:
        """The record of a request whose history was left as it was because of ``error``."""
        return cls(FULL, (), (), total_messages, error=error)

    def as_dict(self, sent: npt.NDArray[np.bool_] | None = None) -> dict[str, Any]:
        """The host's shape (``ctx.metadata["smart_context"]``), JSON-ready. ``sent``: which of
        the ids the rule chose from a budget sent, when it sent part of what the rule kept: the
        scores are then of the messages sent (the caller writes their ids)."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "active_topics": list(self.active_topics),
            "sticky_ids": list(self.sticky_ids),
            "total_messages": self.total_messages,
        }
        if self.threshold is not None:
            out["threshold"] = self.threshold
        if self.cuts is not None:
            out["cuts"] = self.cuts
        if self.kept is not None:
            out["scores"], omitted = self.kept.scores(sent)
            if omitted:
                out["scores_omitted"] = omitted
        if self.best_score is not None:
            out["best_score"] = self.best_score
        if self.note is not None:
            out["note"] = self.note
        if sent is None:
            name, ids = self.kept.ids() if self.kept is not None else self.ids
            out[name] = ids
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class MemoryPart:
    """The memory section sent: live direct messages and stored memories, and how many left out."""

    direct_ids: tuple[Any, ...]
    memory_ids: tuple[Any, ...]
    left_out: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "direct_ids": list(self.direct_ids),
            "memory_ids": list(self.memory_ids),
            "left_out": self.left_out,
        }


@dataclass(frozen=True)
class RequestRecord:
    """The record of one request (docs/contract.md §6-§9), one part per section."""

    rule: ContextRecord  # the topic rule: mode, topics, sticky, scores
    # the shorter id list of what was sent, when the budget narrowed the rule's history, and
    # which of the ids the rule chose from those are
    sent_ids: tuple[str, list[Any]] | None = None
    sent: npt.NDArray[np.bool_] | None = None
    memory: MemoryPart | None = None
    knowledge: tuple[Mapping[str, Any], ...] | None = None  # the vault notes cited
    # the budget's part: ``budget``, ``recent_ids``, ``relevant_ids``, ``important_ids``,
    # ``summaries``, ``reasons`` (budget/parts.budget_record, budget/reasons)
    budget: Mapping[str, Any] | None = None
    usage: Mapping[str, Any] | None = None
    # the function names sent as the request's tools: the items' and the plugin's own (the
    # memory tools), all counted in the budget's ``tools``; none for a model that takes none
    tools: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The host's shape, JSON-ready."""
        narrowed = self.sent_ids is not None
        out = self.rule.as_dict(self.sent if narrowed else None)
        if self.tools is not None:
            out["tools"] = list(self.tools)
        if self.sent_ids is not None:  # the rule wrote no ids: these are of what was sent
            out[self.sent_ids[0]] = self.sent_ids[1]
        if self.memory is not None:
            out["memory"] = self.memory.as_dict()
        if self.knowledge is not None:
            out["knowledge"] = [dict(note) for note in self.knowledge]
        if self.budget is not None:
            out.update(self.budget)
        if self.usage is not None:
            out["usage"] = dict(self.usage)
        return out


def shorter_ids(
    all_ids: Sequence[Any], kept: npt.NDArray[np.bool_] | None
) -> tuple[str, list[Any]]:
    """``included_ids`` or ``excluded_ids``, whichever is shorter: stored records stay small.
    ``kept`` says which of ``all_ids`` were sent; ``None``: all of them."""
    if kept is None:
        return ("excluded_ids", [])
    count = int(kept.sum())
    if count <= len(all_ids) - count:
        return ("included_ids", select(all_ids, kept))
    return ("excluded_ids", select(all_ids, ~kept))


def included_ids(record: Mapping[str, Any], candidate_ids: Sequence[Any]) -> list[Any]:
    """Expand a stored record back to the ids it sent, given the ids it chose from, in order."""
    if "included_ids" in record:
        return list(record["included_ids"])
    excluded = set(record.get("excluded_ids", ()))
    return [i for i in candidate_ids if i not in excluded]


def json_safe(value: Any) -> Any:
    """A deep copy of ``value`` that JSON can store: a plugin's odd value (a numpy float, a
    set) is kept as its text instead of making the reply impossible to save. What a JSON round
    trip (``default=str``) gives, but its strings are the ones given, not copies: a reply's
    record names hundreds of messages by the ids the chat already holds, and kept with every
    reply, copies of them were most of a long chat's memory. A key JSON cannot carry raises
    ``TypeError`` and a cycle ``ValueError``, as ``json.dumps`` does."""
    return _copy(value, set())


def _copy(value: Any, path: set[int]) -> Any:
    if isinstance(value, str):
        return value  # immutable: shared, not copied
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        return int(value)  # a subclass (an enum) as JSON writes it
    if isinstance(value, float):
        return float(value)  # numpy's float64 too; NaN and infinities stay, as json keeps them
    if isinstance(value, dict | list | tuple):
        if id(value) in path:
            raise ValueError("Circular reference detected")
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return {_key(k): _copy(v, path) for k, v in value.items()}
            return [_copy(v, path) for v in value]
        finally:
            path.discard(id(value))
    return str(value)


def _key(key: Any) -> str:
    """A dict key as JSON writes it."""
    if isinstance(key, str):
        return key
    if key is None or key is True or key is False:
        return json.dumps(key)
    if isinstance(key, float):
        return json.dumps(float(key))
    if isinstance(key, int):
        return json.dumps(int(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
