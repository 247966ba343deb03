"""Which messages of a long history fit a token budget, and which summaries stand in for the
rest (docs/contract.md §9). Pure numpy: the caller brings counts and scores.

The history's room is what the budget leaves after the sections that always go (system prompt,
memory, knowledge, tools, the current message). It is filled in this order:

1. the whole history, when it fits (a chat that fits is sent whole);
2. the last turn (the last two messages), then up to ``recent`` last messages, newest first,
   while they stay within their share of the room;
3. pinned messages (sticky instructions, messages the user marked important), newest first;
4. the older messages the search found relevant to the current message, each with its
   partner (a question keeps its answer and an answer its question), best turn first: a hit's
   relevance plus :data:`TURN_WORTH` of its partner's. A turn that does not fit is skipped
   whole, never sent half (the turn order would drop the half), and the next one tried;
5. summaries of the stretches left out, from a share of the room kept for them, chosen on the
   summary tree (:func:`choose_summaries`);
6. whatever room is left: the remaining messages by importance score, highest first,
   down to ``importance_threshold``.

The recent messages' and the summaries' shares grow with the room: at ``full_room`` and above
they get all of it, below in proportion (a room of a tenth of it gives them a tenth of their
share). A small budget spends what it has on the messages the search found, instead of half of
it on the last ten messages of a conversation that has moved on.

Nothing is ever taken that would pass the room: a message that does not fit is skipped and the
next one tried, so the plan is as full as the greedy order allows and never over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.intp]
Flags = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float32]

# why a message is sent (``Plan.why``)
LEFT_OUT, RECENT, PINNED, RELEVANT, TURN, IMPORTANT, WHOLE = range(7)


# The room at which the recent messages and the summaries get their whole share: the default
# budget's, so a default request shares its room as before. On REALTALK's tune chats
# (benchmarks/public/bench_history.py) a budget of 5% of a chat (about 1,100 tokens) spent half
# its room on the last ten messages and a summary; the evidence kept at 5% / 10% with the shares
# whole at any room: 0.542 / 0.697; whole from 4,000 tokens: 0.590 / 0.743; from 8,000: 0.612 /
# 0.751; from 16,000: 0.620 / 0.752
FULL_ROOM = 8000
RECENT_SHARE = 0.5  # at a full room, ten messages of up to 400 tokens still all go
LAST_TURN = 2  # the last two messages go whatever their share: the turn the message answers
# What a hit's partner adds to the worth of its turn, times its relevance: on REALTALK's tune
# chats 0 kept 0.579 / 0.719 of the evidence at 5% / 10%, 0.15 0.596 / 0.736, 0.3 0.611 / 0.749,
# 0.5 0.612 / 0.751, 0.8 0.591 / 0.743
TURN_WORTH = 0.5


@dataclass(frozen=True)
class Span:
    """A stored summary that can stand in for positions ``start``..``end - 1`` of the history.

    Spans of one level never overlap; a span of level ``L + 1`` covers whole spans of level
    ``L`` (its ``children``, indexes into the same list), so the spans form a tree per stretch.
    """

    start: int
    end: int
    level: int
    tokens: int
    children: tuple[int, ...] = ()


@dataclass(frozen=True)
class Budget:
    """How the history's room is shared (settings of docs/contract.md §9)."""

    room: int  # tokens the history may use, summaries included
    recent: int = 10
    recent_share: float = RECENT_SHARE  # of a full room, the most the recent messages take
    summary_share: float = 0.1  # of a full room, kept for summaries until step 5
    full_room: int = FULL_ROOM  # a smaller room gives both shares in proportion
    relevant_limit: int = 100  # older messages the search may add (search_limit)
    importance_threshold: float = 0.0
    detailed_age: int = 50  # summaries of the last 50 messages are its detailed ones
    high_level_age: int = 100  # ...up to 100 back high-level ones; older: key facts only


@dataclass(frozen=True)
class Inputs:
    """Per message of the history, in order."""

    tokens: IntArray  # what the message costs in the prompt, framing included
    pinned: Flags
    relevance: Floats  # the search's score; 0 where the search found nothing
    importance: Floats  # the importance score, for step 6
    hits: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))  # best first
    # per hit, its partner (smart_context.turns.partners), -1 for none
    hit_partners: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))


@dataclass(frozen=True)
class Plan:
    """What goes: ``keep`` per message, the reason (``why``), and the summaries (indexes into
    the spans given), with what each part costs."""

    keep: Flags
    why: npt.NDArray[np.int8]
    summaries: list[int]
    message_tokens: int
    summary_tokens: int

    @property
    def whole(self) -> bool:
        return bool(self.keep.all())


def plan(inputs: Inputs, spans: Sequence[Span], budget: Budget) -> Plan:
    """The plan for one request (module docstring)."""
    tokens = inputs.tokens
    n = len(tokens)
    why = np.zeros(n, dtype=np.int8)
    if int(tokens.sum()) <= budget.room:
        why[:] = WHOLE
        return Plan(np.ones(n, dtype=bool), why, [], int(tokens.sum()), 0)
    filler = _Filler(tokens, why, budget.room)
    scale = min(1.0, budget.room / budget.full_room) if budget.full_room > 0 else 1.0
    _take_recent(filler, budget.recent, int(budget.recent_share * scale * budget.room))
    for i in np.flatnonzero(inputs.pinned)[::-1].tolist():
        filler.take(i, PINNED)
    reserve = int(budget.summary_share * scale * budget.room) if spans else 0
    filler.room -= reserve
    filler.take_turns(*_turns_by_worth(inputs, budget.relevant_limit))
    filler.room += reserve
    summary_room = budget.room - filler.used
    chosen = choose_summaries(spans, why == LEFT_OUT, summary_room, inputs.relevance, budget)
    summary_tokens = sum(spans[s].tokens for s in chosen)
    filler.room -= summary_tokens
    filler.fill(inputs.importance, budget.importance_threshold)
    return Plan(why != LEFT_OUT, why, chosen, filler.used, summary_tokens)


def _turns_by_worth(inputs: Inputs, limit: int) -> tuple[IntArray, IntArray]:
    """The first ``limit`` hits and the partner of each (-1: none), best turn first: a hit's
    relevance plus :data:`TURN_WORTH` times its partner's, so of two equal hits the one whose
    question or answer is relevant too goes first."""
    hits = inputs.hits[:limit]
    if len(inputs.hit_partners) < len(hits):
        raise ValueError(f"{len(hits)} hits but {len(inputs.hit_partners)} partners")
    partner = inputs.hit_partners[: len(hits)]
    relevance = inputs.relevance.astype(np.float64)
    worth = relevance[hits] + TURN_WORTH * np.where(partner >= 0, relevance[partner], 0.0)
    order = np.lexsort((np.arange(len(hits)), -np.round(worth, 9)))
    return hits[order], partner[order]


def _take_recent(filler: _Filler, recent: int, share: int) -> None:
    """The last turn, then the last ``recent`` messages newest first while they stay within
    ``share`` tokens: the first that would pass it ends the run (an older message must not
    be sent while a newer one is not)."""
    n = len(filler.tokens)
    for k, i in enumerate(range(n - 1, max(n - recent, 0) - 1, -1)):
        if k >= LAST_TURN and filler.used + int(filler.tokens[i]) > share:
            break
        filler.take(i, RECENT)


SCAN_AFTER_FULL = 256  # once the room is nearly full, how many more candidates are tried


class _Filler:
    """Takes messages while they fit."""

    def __init__(self, tokens: IntArray, why: npt.NDArray[np.int8], room: int) -> None:
        self.tokens, self.why, self.room, self.used = tokens, why, room, 0

    def take(self, i: int, reason: int) -> bool:
        """Take message ``i`` if it is not taken and fits; whether it is in the plan now."""
        if self.why[i] != LEFT_OUT:
            return True
        cost = int(self.tokens[i])
        if self.used + cost > self.room:
            return False
        self.used += cost
        self.why[i] = reason
        return True

    def take_turns(self, hits: IntArray, partners: IntArray) -> None:
        """Take each relevant message of ``hits`` with its partner (``partners``, -1: none),
        in that order, if both fit, else neither: sent alone, the hit would break the turn
        order. The hits and their partners are read in one gather each and walked as Python
        ints: a hundred hits read one numpy element at a time took a tenth of a long chat's
        budget."""
        if not len(hits):
            return
        has = partners >= 0
        mates = np.where(has, partners, hits)  # (a hit without a partner: its own cost, unused)
        near = np.concatenate((hits, partners[has]))
        taken = set(near[self.why[near] != LEFT_OUT].tolist())
        relevant: list[int] = []
        brought: list[int] = []
        used, room = self.used, self.room
        rows = zip(
            hits.tolist(),
            partners.tolist(),
            self.tokens[hits].tolist(),
            self.tokens[mates].tolist(),
            strict=True,
        )
        for i, j, cost, mate in rows:
            if i in taken:
                continue
            brings = j >= 0 and j not in taken
            if brings:
                cost += mate
            if used + cost > room:
                continue
            used += cost
            taken.add(i)
            relevant.append(i)
            if brings:
                taken.add(j)
                brought.append(j)
        self.why[relevant] = RELEVANT
        self.why[brought] = TURN
        self.used = used

    def fill(self, scores: Floats, threshold: float) -> None:
        """Take the messages left out, highest ``scores`` first, while they fit: the run that
        fits whole is taken at once (a 10,000-message chat is not walked in Python), then the
        next :data:`SCAN_AFTER_FULL` are tried one by one for the room that is left."""
        free = self.room - self.used
        if not len(self.tokens) or free < int(self.tokens.min()):
            return  # nothing fits (a full room, most often): nothing to sort
        left = np.flatnonzero(self.why == LEFT_OUT)
        left = left[scores[left] >= threshold]
        if len(left):
            # no more than this many can be taken or tried: sort only those that score at
            # least as high as the last of them (ties kept whole, so the order is the same as
            # sorting them all; 60,000 candidates of a 100,000-message chat took 4 ms)
            cheapest = int(self.tokens[left].min())
            if free < cheapest:
                return
            need = free // max(cheapest, 1) + SCAN_AFTER_FULL + 1
            if need < len(left):
                negated = -scores[left]
                left = left[negated <= np.partition(negated, need - 1)[need - 1]]
        order = left[np.argsort(-scores[left], kind="stable")]
        spent = np.cumsum(self.tokens[order])
        fits = int(np.searchsorted(spent, self.room - self.used, side="right"))
        if fits:
            self.why[order[:fits]] = IMPORTANT
            self.used += int(spent[fits - 1])
        # of the next ones, only those that fit the room left now can fit later (it only shrinks)
        after = order[fits : fits + SCAN_AFTER_FULL]
        for i in after[self.tokens[after] <= self.room - self.used].tolist():
            self.take(i, IMPORTANT)


def choose_summaries(
    spans: Sequence[Span], left_out: Flags, room: int, relevance: Floats, budget: Budget
) -> list[int]:
    """Summaries for the stretches left out, within ``room`` tokens, in order of time.

    Top-down on the tree: start from the largest spans over left-out messages, then, while room
    allows, replace a span by its children, newest and most relevant first, down to the level
    its age calls for (detailed for the last ``detailed_age`` messages, high-level up to
    ``high_level_age``, key facts beyond). A span whose messages are all sent is dropped; when
    even the largest spans do not fit, the oldest are dropped first.
    """
    if not spans or room <= 0:
        return []
    n = len(left_out)
    out_before = np.concatenate(([0], np.cumsum(left_out, dtype=np.intp)))

    def useful(s: int) -> bool:
        span = spans[s]
        return bool(out_before[min(span.end, n)] - out_before[min(span.start, n)] > 0)

    inner = {c for span in spans for c in span.children}
    frontier = [s for s in range(len(spans)) if s not in inner and useful(s)]
    frontier.sort(key=lambda s: spans[s].start)
    cost = sum(spans[s].tokens for s in frontier)
    while cost > room and frontier:  # even the coarsest do not fit: the oldest go first
        cost -= spans[frontier.pop(0)].tokens
    while True:
        best = _best_split(spans, frontier, useful, room - cost, relevance, n, budget)
        if best is None:
            break
        children = [c for c in spans[best].children if useful(c)]
        cost += sum(spans[c].tokens for c in children) - spans[best].tokens
        place = frontier.index(best)
        frontier[place : place + 1] = children
    return frontier


def _best_split(
    spans: Sequence[Span],
    frontier: list[int],
    useful: Callable[[int], bool],
    free: int,
    relevance: Floats,
    n: int,
    budget: Budget,
) -> int | None:
    """The span to replace by its children next: newest first, a relevant one before others."""
    best, best_key = None, (-np.inf, -np.inf)
    for s in frontier:
        span = spans[s]
        if not span.children or span.level <= _finest_level(n - span.end, budget):
            continue
        extra = sum(spans[c].tokens for c in span.children if useful(c)) - span.tokens
        if extra > free:
            continue
        key = (float(relevance[span.start : span.end].max(initial=0.0)) > 0, span.end)
        if key > best_key:
            best, best_key = s, key
    return best


def _finest_level(age: int, budget: Budget) -> int:
    """The most detailed summary level a stretch ``age`` messages back may use."""
    if age <= budget.detailed_age:
        return 1
    if age <= budget.high_level_age:
        return 2
    return 3


def cut_start(tokens: IntArray, room: int, users: IntArray) -> int:
    """Where a cut in steps starts the kept history (docs/contract.md §9): the earliest
    position whose messages up to the end fit ``room`` tokens, moved on to the next user
    message (``users``, ascending positions) so the kept history opens a turn. The last
    user message's turn is kept whatever it costs; a history with no user message is kept
    whole (there is no turn to start at)."""
    n = len(tokens)
    if n == 0 or len(users) == 0:
        return 0
    suffix = np.cumsum(tokens[::-1])[::-1]  # suffix[s]: what positions s.. cost
    # suffix decreases along the history: the first position that fits, by a search
    fits = int(np.searchsorted(-suffix, -room, side="left"))
    at = int(np.searchsorted(users, fits, side="left"))
    return int(users[min(at, len(users) - 1)])


def recall(inputs: Inputs, before: int, room: int, limit: int) -> Plan:
    """The older messages a cut left out that go with this message, within ``room`` tokens:
    the search's hits at positions under ``before``, best first, each alone (quoted with its
    date and role, a recalled message breaks no turn order; on REALTALK's tune chats, hits
    alone kept 0.725 of the questions' evidence where hits with their partners kept 0.680, at
    the same prefill); a hit that does not fit is skipped and the next one tried."""
    why = np.zeros(len(inputs.tokens), dtype=np.int8)  # LEFT_OUT
    hits = inputs.hits[:limit]
    hits = hits[hits < before]  # the kept history: sent already, never recalled
    taken, used = [], 0
    # the hits are distinct positions: each is tried once, in plain ints
    for i, cost in zip(hits.tolist(), inputs.tokens[hits].tolist(), strict=True):
        if used + cost <= room:
            used += cost
            taken.append(i)
    why[taken] = RELEVANT
    return Plan(why != LEFT_OUT, why, [], used, 0)
