"""The cache-stable layout of a request (docs/contract.md §9, "The layout"), used when the chat
model's upstream caches prompt prefixes (:mod:`smart_context.budget.cache`).

A request is laid out in order of stability, so that each one starts with the bytes of the one
before it and the upstream serves that prefix from its cache:

1. the client's system prompt (the host puts it first, unchanged);
2. the tools: a set chosen at a cut and kept until the next;
3. one system message, byte-stable between cuts: the session's rules and references (``always``
   and ``manual``), the pinned messages the kept history does not hold, and the summaries of
   what the last cut left out, rendered with no count or time that moves per turn;
4. the kept history, from the cut on, append-only: every message since the cut goes;
5. what is chosen for this message: older messages recalled for it (with their dates), the
   rules and references agent selection chose, the memory section, the vault's notes; inside
   the user's message by default (``recalled_in = "user"``: every chat template takes it), or
   as a system message before it (``"system"``);
6. the user's message.

**Cut in steps.** A chat's :class:`Frame` holds where the kept history starts, the summaries
and the tools. It is kept while the request stays under the *high mark*: within the model's
window, a warm turn's bill (its prefix read from the cache) within the budget, and the bill of
the chat's sitting (the prefix written once when the cache is cold, then read) within the
budget a turn, on average, with what the chat left unspent before while its history is whole
(its ``credit``: the bill is judged over a conversation, a cold turn that writes the cache
being paid by the turns that read it). When it would pass it, the frame is cut once, down to
``cut_low_mark`` of the high mark: the oldest stretch gives way to its summaries and becomes
searchable for the recalled part. A cache that is cold anyway (idle past the upstream's
lifetime, another model, a restart, a topic click, an edited history) makes the cut free, so
the frame is made again then: whole, unless the sitting it starts would pass the high mark.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from smart_context.budget.cache import CacheModel
from smart_context.budget.facts import Facts, Part
from smart_context.budget.importance import top_hits
from smart_context.budget.parts import Fitted, budget_record, messages_cost, summary_message
from smart_context.budget.plan import Budget, Inputs, Span, choose_summaries, cut_start, recall
from smart_context.budget.tokens import Counter, context_window, prompt_tokens
from smart_context.memory.records import Summary
from smart_context.messages import History, Message, message_text
from smart_context.turns import Roles

MAX_FRAMES = 1024  # chats whose frame is kept in memory
MAX_COSTS = 4096  # texts whose token counts are kept
# The requests a chat's warm cache serves before it goes cold, until the chat shows its own
# (a running mean over its sittings): what a cold write is spread over in the high mark
FIRST_RUN = 10.0
RUN_MEMORY = 0.3  # a new sitting's weight in the running mean
# the most budget a chat may leave unspent and spend later, in turns of the budget: a chat's
# bill over any long stretch of it stays within the budget a turn
CREDIT_TURNS = 8
MIN_RELEVANCE = 1e-6
REPLY_RESERVE = 4096  # of a known window, left for the reply
RECALLED_TITLE = "Earlier messages of this conversation, recalled for the user's message"
PINNED_TITLE = "# Pinned messages of this conversation"
SUMMARY_TITLE = "# What earlier parts of this conversation said"

# why a frame was made again (the record's ``layout.cut``)
FIRST, COLD, CHANGED, CHANGED_PART, EDITED, OVER = (
    "first request",
    "cache cold",
    "model or filter changed",
    "pins or session items changed",
    "history edited",
    "over the budget",
)


@dataclass(frozen=True)
class Frame:
    """What stays the same between two cuts of a chat's requests (module docstring)."""

    key: tuple[Any, ...]  # model, cache, selected topics, where the chosen part goes
    start_id: str | None  # the kept history's first message (None: the whole history)
    summaries: tuple[Summary, ...]  # standing for what the cut left out, in order of time
    tools: tuple[Mapping[str, Any], ...]
    stable: str  # the stable system message as sent: a change to it breaks the prefix
    at: float  # when the chat's last request was made (the clock's seconds)
    prefix_tokens: int  # what the last request's stable part cost: its tools, 3 and 4
    plain_tokens: int  # what the plain client's last request cost
    turns: int = 1  # requests since the cache was last cold
    run: float = 10.0  # requests a warm cache serves, on average, in this chat
    credit: float = 0.0  # the budget its requests left unspent (spent over: below 0)


class Frames:
    """Each chat's frame, for the chats used last (at most :data:`MAX_FRAMES`)."""

    def __init__(self) -> None:
        self._frames: OrderedDict[str, Frame] = OrderedDict()
        self.costs: dict[tuple[str, str, str], int] = {}  # for :class:`Costs`
        # the last tools counted and their JSON (:class:`Costs`): a chat's tools rarely change
        self.tools_json: list[tuple[list[Mapping[str, Any]], str]] = []

    def get(self, chat_id: str) -> Frame | None:
        return self._frames.get(chat_id)

    def put(self, chat_id: str, frame: Frame) -> None:
        self._frames.pop(chat_id, None)
        while len(self._frames) >= MAX_FRAMES:
            self._frames.popitem(last=False)
        self._frames[chat_id] = frame


@dataclass(frozen=True)
class Parts:
    """What a request holds besides its history, rendered: the session's items (``stable``),
    what was chosen for this message (``chosen``: agent items, memory, notes), the tools the
    request would take if it cut now, and the message."""

    stable: str
    chosen: str
    tools: Sequence[Mapping[str, Any]]
    message: str
    sections: Mapping[str, str]  # the chosen part by section, for the budget's record


@dataclass(frozen=True)
class Laid:
    """The request as laid out: ``messages`` (what the host sends before the user's message),
    ``message`` (the user's message as sent), the tools, the record's parts, and the keep
    flags over the candidates."""

    messages: list[dict[str, Any]]
    message: str
    tools: list[Mapping[str, Any]]
    fitted: Fitted
    layout: dict[str, Any]
    cache: dict[str, Any]
    frame: Frame


def window_limit(cache: CacheModel, model: str | None, budget_tokens: int) -> int:
    """The most a request may hold, in tokens: a local server's window is the budget; a
    provider's is the model's window less the reply's room, where it is known."""
    window = None if cache.local else context_window(model)
    if window:
        return max(window - min(REPLY_RESERVE, window // 4), 0)
    return budget_tokens


def high_mark(
    cache: CacheModel, budget: int, window: int, new: int, run: float, credit: float = 0.0
) -> int:
    """The most a request may hold, within ``window``, while its bill stays within ``budget``:
    the prefix read from the cache and ``new`` tokens (the last turn and what goes with this
    message) not, on a warm turn; and over a ``run`` of requests (the cache goes cold between a
    chat's sittings), the prefix written once and read on the others, with the ``credit`` the
    chat left unspent spread over them."""
    high = window
    if cache.read > 0:
        high = min(high, int((budget - new) / cache.read) + new)
    if cache.lifetime > 0:
        turns = max(run, 1.0)
        price = cache.read + cache.write / turns
        high = min(high, int((budget + credit / turns - new) / price) + new)
    return max(high, 0)


@dataclass(frozen=True)
class Candidates:
    """The messages a request chooses from, as positions of the whole history's ``facts``
    (``positions``: a topic filter's part of it, else ``None``), the ``whole`` history they
    are of, and which of them the user pinned."""

    facts: Facts
    positions: np.ndarray | None
    messages: Sequence[Message]
    whole: History
    pinned: np.ndarray

    @cached_property
    def roles(self) -> Roles:
        """Where the candidates' user messages and answers are (read only for a cut)."""
        if self.positions is None:
            return self.whole.roles
        return Roles.of(self.whole.codes[self.positions])

    @cached_property
    def part(self) -> Part:
        """The candidates' tokens and ids (a filter's part gathered once: read a dozen times)."""
        return Part(self.facts, self.positions)

    @property
    def tokens(self) -> np.ndarray:
        return self.part.tokens

    def name(self, i: int) -> str:
        return self.part.name(i)

    def names(self, at: Sequence[int]) -> list[str]:
        return self.part.names(at)

    def at(self, message_id: str) -> int | None:
        """The candidate position of ``message_id``, if it is one."""
        found = self.facts.position(message_id)
        if found is None or self.positions is None:
            return found
        at = int(np.searchsorted(self.positions, found))
        return at if at < len(self.positions) and int(self.positions[at]) == found else None


@dataclass(frozen=True)
class Cut:
    """The layout decided for one request, before what is recalled for its message: why it was
    made again (``reason``; ``None``: the last one holds), where the kept history starts, its
    summaries, tools and stable system message, and what they cost."""

    reason: str | None
    start: int
    summaries: tuple[Summary, ...]
    tools: tuple[Mapping[str, Any], ...]
    tools_cost: int
    stable: str
    stable_cost: int
    high: int
    recall_room: int
    message_cost: int
    chosen_cost: int  # the items, memory and notes chosen for this message

    @property
    def recalls(self) -> bool:
        """Whether older messages may be recalled: the kept history does not start at the
        first (only then does the request need the search's scores)."""
        return self.start > 0 and self.recall_room > 0


def decide(
    found: Candidates,
    spans: tuple[list[Span], list[Summary]] | None,
    parts: Parts,
    old: Frame | None,
    key: tuple[Any, ...],
    now: float,
    cache: CacheModel,
    costs: Costs,
    limits: Limits,
) -> Cut:
    """Whether the chat's last layout holds for this request, else the new one (module
    docstring); ``spans``: the stored summaries (``None``: none, as under a topic filter)."""
    tokens, n = found.tokens, len(found.messages)
    reason, start = _kept_start(found, old, key, now, cache)
    kept = old if old is not None and reason is None else None
    tools = kept.tools if kept is not None else tuple(parts.tools)
    summaries = kept.summaries if kept is not None else ()
    stable = _stable_text(parts.stable, found, start, summaries)
    # a pin or a session item the user changed: the stable message is said again, the rest of
    # the layout holds (only what follows the tools is read anew, once)
    restated = kept is not None and stable != kept.stable
    recall_room = int(limits.recall_share * limits.budget)
    chosen_cost = costs.once(parts.chosen)
    message_cost = costs.message(parts.message)
    new = int(tokens[-2:].sum()) + chosen_cost + message_cost + recall_room
    # a sitting that has lasted longer than the chat's mean is likely to last longer still
    run = max(old.run, old.turns) if old is not None else FIRST_RUN
    # what the chat left unspent keeps its history whole; once it has been cut, only what it
    # overspent still counts (a cut chat's sittings each keep to the budget)
    credit = 0.0 if old is None else old.credit if old.start_id is None else min(old.credit, 0.0)
    high = high_mark(cache, limits.budget, limits.window, new, run, credit)
    fixed = costs.tools(tools) + costs.system(stable) + chosen_cost + message_cost + recall_room
    size = fixed + int(tokens[start:].sum())
    if reason is None and size > high and _pays(cache, size, start, high, run, limits):
        reason = OVER
    if reason is not None:  # the tools are chosen again
        tools = tuple(parts.tools)
    # made again with a cold cache: the whole history, unless the sitting it starts would pass
    # the high mark (a cut is free now, dear later) and cutting pays
    due = size + (run - 1) * int(tokens[-2:].sum()) > high
    cold_cut = due and _pays(cache, size, 0, high, run, limits, True)
    if reason == OVER or (reason is not None and cold_cut):
        summary_room = int(limits.summary_share * limits.budget) if spans else 0
        base = costs.tools(tools) + costs.system(parts.stable) + chosen_cost + message_cost
        room = int(limits.low_mark * high) - base - summary_room - recall_room
        start = cut_start(tokens, room, found.roles.users)
        summaries = tuple(_summaries(spans, start, n, summary_room)) if start else ()
        stable = _stable_text(parts.stable, found, start, summaries)
    return Cut(
        reason or (CHANGED_PART if restated else None),
        start,
        summaries,
        tools,
        costs.tools(tools),
        stable,
        costs.system(stable),
        high,
        recall_room,
        message_cost,
        chosen_cost,
    )


def lay_out(
    found: Candidates,
    cut: Cut,
    scores: np.ndarray | None,
    parts: Parts,
    old: Frame | None,
    key: tuple[Any, ...],
    now: float,
    cache: CacheModel,
    costs: Costs,
    limits: Limits,
) -> Laid:
    """The request as :func:`decide` laid it out, with the older messages recalled for its
    message by ``scores`` (each candidate's relevance; ``None`` when :attr:`Cut.recalls` is
    false, so the search need not run)."""
    n, start = len(found.messages), cut.start
    recalled = np.zeros(n, dtype=bool)
    if scores is not None and cut.recalls:
        scores = np.asarray(scores, dtype=np.float32).copy()
        recalled = _recalled(found, scores, start, cut.recall_room, limits.search)
    chosen = _chosen_text(found, recalled, parts.chosen)
    message, after = parts.message, []
    if chosen and limits.recalled_in == "system":
        after = [{"role": "system", "content": chosen}]
    elif chosen:
        message = f"<context>\n{chosen}\n</context>\n\n{parts.message}"
    system = [{"role": "system", "content": cut.stable}] if cut.stable else []
    # the host's own messages, as a request without a layout sends them: one slice of the
    # kept part (a filter's picks it in one C call)
    history: list[Any] = [*system, *found.messages[start:n], *after]
    keep = recalled.copy()
    keep[start:] = True
    prefix = cut.tools_cost + cut.stable_cost + int(found.tokens[start:].sum())
    record = _budget_record(found, keep, recalled, scores, cut, parts, costs, limits)
    start_id = found.name(start) if 0 < start < n else None
    sittings = _sittings(old, cut.reason)
    cached = cache.cached(old.prefix_tokens) if old is not None and cut.reason is None else 0
    cached = min(cached, prefix)
    # what this request is billed: its prefix read from the cache or written to it, and what
    # goes with its message new
    new = cut.message_cost + cut.chosen_cost + int(found.tokens[recalled].sum())
    billed = cache.billed(prefix + new, cached, prefix - cached)
    spent = (old.credit if old is not None else 0.0) + limits.budget - billed
    reserve = CREDIT_TURNS * limits.budget
    credit = min(max(spent, -reserve), reserve)
    frame = Frame(
        key, start_id, cut.summaries, cut.tools, cut.stable, now, prefix, 0, *sittings, credit
    )
    layout = {
        "kind": "stable",
        "cut": cut.reason,
        "start_id": start_id,
        "kept_messages": n - start,
        "recalled_ids": record["relevant_ids"],
        "recalled_in": limits.recalled_in,
        "high_mark": cut.high,
        "credit": round(credit),
    }
    cache_part = {
        "kind": cache.name,
        "read": cache.read,
        "write": cache.write,
        "cached_estimate": cached,
    }
    laid = Fitted(history, keep, record)
    return Laid(history, message, list(cut.tools), laid, layout, cache_part, frame)


def _pays(
    cache: CacheModel,
    size: int,
    start: int,
    high: int,
    run: float,
    limits: Limits,
    cold: bool = False,
) -> bool:
    """Whether cutting a request of ``size`` tokens back to the low mark pays within the
    sitting (``run`` requests): past the window it must be made. Else the turns save reading
    the stretch it drops (and, on a ``cold`` cache, writing it), and pay for writing the kept
    part again when the cache is warm, and for the recalled part each turn when the cut starts
    it (``start`` 0). At a read price of 0.1 and sittings of a few turns, a warm cut costs more
    than it saves: it waits for the cache to go cold."""
    if size > limits.window:
        return True
    low = limits.low_mark * high
    if size <= low:
        return False
    recalled = 0 if start > 0 else int(limits.recall_share * limits.budget)
    turns = max(run, 1.0)
    price = turns * cache.read + (cache.write if cold else 0.0)
    rewrite = 0.0 if cold else cache.write * low
    return price * (size - low) > rewrite + turns * recalled


def _sittings(old: Frame | None, reason: str | None) -> tuple[int, float]:
    """The requests since the cache was last cold, and the chat's running mean of them, after
    this request (``reason``: why its layout was made again, if it was)."""
    if old is None:
        return 1, FIRST_RUN
    if reason == COLD:
        return 1, (1 - RUN_MEMORY) * old.run + RUN_MEMORY * old.turns
    return old.turns + 1, old.run


def _kept_start(
    found: Candidates, old: Frame | None, key: tuple[Any, ...], now: float, cache: CacheModel
) -> tuple[str | None, int]:
    """Why the last frame cannot be kept whatever this request holds (``None``: it can), and
    where its kept history starts among the candidates."""
    if old is None:
        return FIRST, 0
    if old.key != key:
        return CHANGED, 0
    if cache.cold(now - old.at):
        return COLD, 0
    if old.start_id is None:
        return None, 0
    at = found.at(old.start_id)
    return (EDITED, 0) if at is None else (None, at)


def _recalled(
    found: Candidates, scores: np.ndarray, start: int, room: int, search: int
) -> np.ndarray:
    """Which candidates before ``start`` go with this message, by their ``scores`` (the pinned
    ones are in the stable part already: their scores are set to 0)."""
    scores[found.pinned] = 0.0
    hits = top_hits(scores[:start], search, floor=MIN_RELEVANCE)
    inputs = Inputs(found.tokens, found.pinned, scores, scores, hits)
    keep: np.ndarray = recall(inputs, start, room, search).keep
    return keep


def _budget_record(
    found: Candidates,
    keep: np.ndarray,
    recalled: np.ndarray,
    scores: np.ndarray | None,
    cut: Cut,
    parts: Parts,
    costs: Costs,
    limits: Limits,
) -> dict[str, Any]:
    """The record's budget part, in the shape the per-turn budget writes
    (:func:`~smart_context.budget.parts.budget_record`)."""
    n = len(found.messages)
    start, summaries = cut.start, cut.summaries
    summary_tokens = sum(costs.system(summary_message(s)["content"]) for s in summaries)
    by_section = {
        "system": max(cut.stable_cost - summary_tokens, 0),
        "memory": costs.once(parts.sections.get("memory", "")),
        "knowledge": costs.once(parts.sections.get("knowledge", "")),
        "tools": cut.tools_cost,
        "message": cut.message_cost,
    }
    recent = found.names(range(max(start, n - limits.recent), n))
    at = np.flatnonzero(recalled).tolist()
    relevant = found.names(at)
    history = int(found.tokens[keep].sum())
    record = budget_record(
        limits.budget,
        by_section,
        history,
        summary_tokens,
        recent,
        relevant,
        [],
        summaries,
        costs.counter,
    )
    record["reasons"] = (
        {}
        if scores is None
        else {
            name: {"why": "relevant", "score": round(score, 3)}
            for name, score in zip(relevant, scores[at].tolist(), strict=True)
        }
    )
    return record


def _summaries(
    spans: tuple[list[Span], list[Summary]] | None, start: int, n: int, room: int
) -> list[Summary]:
    """The stored summaries standing for the first ``start`` candidates, within ``room``: of
    the spans that end by the cut only (one reaching past it would be dropped after it was
    chosen, leaving nothing)."""
    if not spans or not spans[0] or room <= 0:
        return []
    inside = [k for k, span in enumerate(spans[0]) if span.end <= start]
    index = {k: j for j, k in enumerate(inside)}
    tree = [
        replace(spans[0][k], children=tuple(index[c] for c in spans[0][k].children if c in index))
        for k in inside
    ]
    left_out = np.zeros(n, dtype=bool)
    left_out[:start] = True
    chosen = choose_summaries(tree, left_out, room, np.zeros(n, dtype=np.float32), Budget(room))
    return [spans[1][inside[s]] for s in chosen]


def _stable_text(items: str, found: Candidates, start: int, summaries: Sequence[Summary]) -> str:
    """The byte-stable system message: the session's items, the pinned messages the kept
    history does not hold, and the summaries, in a fixed order and with nothing that moves."""
    parts = [items] if items else []
    pinned = [i for i in np.flatnonzero(found.pinned).tolist() if i < start]
    if pinned:
        lines = "\n".join(_line(found.messages[i]) for i in pinned)
        parts.append(f"{PINNED_TITLE}\n{lines}")
    if summaries:
        texts = "\n\n".join(summary_message(s)["content"] for s in summaries)
        parts.append(f"{SUMMARY_TITLE}\n{texts}")
    return "\n\n".join(parts)


def _chosen_text(found: Candidates, recalled: np.ndarray, chosen: str) -> str:
    """What goes with this message only: the recalled messages in order of time, then the
    items, memory and notes chosen for it."""
    parts = []
    at = np.flatnonzero(recalled).tolist()
    if at:
        lines = "\n".join(_line(found.messages[i]) for i in at)
        parts.append(f"{RECALLED_TITLE}:\n{lines}")
    if chosen:
        parts.append(chosen)
    return "\n\n".join(parts)


def _line(message: Message) -> str:
    """A message quoted in the context: its date when it has one, its role, its text."""
    when = message.get("created_at") or message.get("timestamp")
    date = when[:10] if isinstance(when, str) and len(when) >= 10 else ""
    role = str(message.get("role") or "user")
    head = f"[{date}, {role}]" if date else f"[{role}]"
    return f"{head} {message_text(message).strip()}"


class Costs:
    """What a request's parts cost as ``counter`` counts them; the parts a chat repeats turn
    after turn (its tools, its stable message) are counted once (``memo``, kept by
    :class:`Frames`)."""

    def __init__(
        self,
        counter: Counter,
        memo: dict[tuple[str, str, str], int],
        tools_json: list[tuple[list[Mapping[str, Any]], str]] | None = None,
    ) -> None:
        self.counter, self.memo = counter, memo
        # the last tools' JSON (:attr:`Frames.tools_json`): equal tools are compared in C, 2.6
        # us where writing them out took 70 (a request asks up to four times, the next the
        # same); equal as Python compares them, so a schema's 1 changed to 1.0 keeps the count
        # of 1: a token at most, in an estimate
        self._tools_json = [] if tools_json is None else tools_json

    def _known(self, kind: str, text: str, count: Callable[[], int]) -> int:
        key = (self.counter.key, kind, text)
        found = self.memo.get(key)
        if found is None:
            if len(self.memo) >= MAX_COSTS:
                self.memo.clear()  # counting again is cheap next to a leak
            found = self.memo[key] = count()
        return found

    def system(self, text: str) -> int:
        """A system message's cost, kept: a part the chat repeats turn after turn."""
        return self._known("system", text, lambda: self.once(text)) if text else 0

    def once(self, text: str) -> int:
        """A system message's cost, not kept: what is chosen for one message only."""
        return messages_cost(self.counter, [{"role": "system", "content": text}]) if text else 0

    def message(self, text: str) -> int:
        return int(prompt_tokens(self.counter, [{"role": "user", "content": text}])["total"])

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        if not tools:
            return 0
        listed = list(tools)
        if self._tools_json and self._tools_json[0][0] == listed:
            text = self._tools_json[0][1]
        else:
            text = json.dumps(listed, sort_keys=True, ensure_ascii=False)
            self._tools_json[:] = [(copy.deepcopy(listed), text)]  # the caller's may change
        return self._known(
            "tools", text, lambda: int(prompt_tokens(self.counter, [], listed)["tools"])
        )


@dataclass(frozen=True)
class Limits:
    """The layout's settings for one request."""

    budget: int  # the most a request may be billed, in new-token units
    window: int  # the most it may hold (:func:`window_limit`)
    low_mark: float
    recall_share: float
    summary_share: float
    recalled_in: str
    recent: int
    search: int
