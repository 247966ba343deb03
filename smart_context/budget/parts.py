"""The parts of a request under a token budget (docs/contract.md §9) and what each costs: what goes
with every request besides the history (:class:`Fixed`), the budget's answer (:class:`Fitted`),
how summaries are sent at their place in time, and the record's ``budget`` part. Pure: the
choice of messages is :mod:`smart_context.budget.budgeter`'s.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.budget.plan import Span
from smart_context.budget.tokens import PER_REPLY, Counter, context_window, prompt_tokens
from smart_context.config import Settings
from smart_context.memory.records import Summary

REPLY_RESERVE = 0.25  # of a known context window, left for the reply (at most 4,096 tokens)
SECTIONS = ("system", "memory", "knowledge", "tools", "history", "summaries", "message")


@dataclass(frozen=True)
class Fixed:
    """What goes with every request besides the history: the system messages the plugin puts
    first (rules and references, memory), the tools and the current message."""

    system: Sequence[Mapping[str, Any]] = ()
    memory: Sequence[Mapping[str, Any]] = ()
    knowledge: Sequence[Mapping[str, Any]] = ()
    tools: Sequence[Any] = ()
    message: str = ""


@dataclass(frozen=True)
class Fitted:
    """The history to send (messages and summaries, in order of time) and the record's parts."""

    history: list[dict[str, Any]]
    kept: npt.NDArray[np.bool_]  # per candidate message
    record: dict[str, Any] = field(default_factory=dict)


def chat_model(settings: Settings, model: str | None) -> str | None:
    """The chat model to count for: the host's word, else the ``token_model`` setting."""
    return model or settings.token_model or None


def budget_limit(settings: Settings, model: str | None) -> int:
    """The request's budget: ``budget_tokens``, within the model's window less the reply's room
    when the window is known; 0 when there is no budget. ``model``: the host's word."""
    limit = settings.budget_tokens
    window = context_window(chat_model(settings, model))
    if limit and window:
        limit = min(limit, window - min(4096, int(window * REPLY_RESERVE)))
    return limit


def summary_message(summary: Summary) -> dict[str, str]:
    """How a summary is sent: a system message at its place in time."""
    kind = "Summary" if summary.level <= 2 else "Key facts"  # key facts beyond 100 back
    return {
        "role": "system",
        "content": (
            f"[{kind} of {summary.size} earlier messages of this conversation, left out to save "
            f"room]\n{summary.text}"
        ),
    }


def interleave(
    candidates: Sequence[Mapping[str, Any]],
    keep: np.ndarray,
    summaries: Sequence[tuple[Span, Summary]],
) -> list[dict[str, Any]]:
    """The kept messages in order, each summary before the first message at or after its
    start."""
    queue = sorted(summaries, key=lambda s: s[0].start)
    out: list[dict[str, Any]] = []
    q = 0
    for i in np.flatnonzero(keep).tolist():  # the kept few, not every message
        while q < len(queue) and queue[q][0].start <= i:
            out.append(summary_message(queue[q][1]))
            q += 1
        out.append(dict(candidates[i]))
    out.extend(summary_message(s[1]) for s in queue[q:])
    return out


def messages_cost(counter: Counter, messages: Sequence[Mapping[str, Any]]) -> int:
    """What ``messages`` add to a prompt: their text and framing, the reply's priming left
    out (it is counted once, with the current message)."""
    if not messages:
        return 0
    return prompt_tokens(counter, messages)["messages"] - PER_REPLY


def fixed_costs(counter: Counter, fixed: Fixed) -> dict[str, int]:
    """What each part of ``fixed`` costs, by section."""
    cost = functools.partial(messages_cost, counter)
    return {
        "system": cost(fixed.system),
        "memory": cost(fixed.memory),
        "knowledge": cost(fixed.knowledge),
        "tools": prompt_tokens(counter, [], fixed.tools)["tools"] if fixed.tools else 0,
        "message": prompt_tokens(counter, [{"role": "user", "content": fixed.message}])["total"],
    }


def budget_record(
    limit: int,
    costs: Mapping[str, int],
    history: int,
    summaries: int,
    recent_ids: list[str],
    relevant_ids: list[str],
    important_ids: list[str],
    summary_rows: Sequence[Summary],
    counter: Counter,
) -> dict[str, Any]:
    by_section = {**costs, "history": history, "summaries": summaries}
    by_section = {k: by_section[k] for k in SECTIONS}
    return {
        "budget": {
            "limit": limit,
            "used": sum(by_section.values()),
            "by_section": by_section,
            "counted_with": counter.name,
            "exact": counter.exact,
        },
        "recent_ids": recent_ids,
        "relevant_ids": relevant_ids,
        "important_ids": important_ids,
        "summaries": [
            {"from_id": r.from_id, "to_id": r.to_id, "level": r.level} for r in summary_rows
        ],
    }
