"""The context-injection rule of docs/contract.md §6, as one pure function.

Given the history the host would send, the chat's sticky messages, the selected topics and
each message's best similarity to them, decide which messages go to the model and write the
record of why. No I/O, no embedding: the caller brings the scores.

Sticky messages the host's history no longer holds (a host may send only the last N messages)
are older than that window, so they are put first, in the order the chat file has them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from smart_context.context.topic_scores import TopicScores
from smart_context.messages import History, Message, pick, select
from smart_context.record import FALLBACK, FILTERED, FULL, ContextRecord, Kept
from smart_context.turns import closure

LAST_TURN = 2  # the history's last messages a filter always keeps: the turn just before


class Picked(Sequence[Any]):
    """The messages a filter kept, made into a list only when read whole: a budget after the
    filter reads a few hundred of the 60,000 a click keeps of a 100,000-message chat, by
    position; a request without one reads them all, in one C loop."""

    def __init__(
        self, everything: Sequence[Any], at: npt.NDArray[np.intp], whole: Callable[[], list[Any]]
    ) -> None:
        self._everything, self._at, self._whole = everything, at, whole
        self._list: list[Any] | None = None

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if self._list is not None:
            return self._list[i]
        if isinstance(i, slice):
            return pick(self._everything, self._at[i].tolist())
        return self._everything[int(self._at[i])]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.as_list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Picked):
            other = other.as_list()
        return isinstance(other, list) and self.as_list() == other

    __hash__ = None  # type: ignore[assignment]

    def as_list(self) -> list[Any]:
        """The kept messages, in order (made once)."""
        if self._list is None:
            self._list = self._whole()
        return self._list


@dataclass(frozen=True)
class Decision:
    """The history to send and the record of how it was chosen."""

    history: Sequence[Any]  # a list, or the filter's :class:`Picked`
    record: ContextRecord
    # the ids the record's lists are over (the history's own list when nothing was added: read-only)
    all_ids: list[Any] = field(default_factory=list)
    # ``history`` with its ids read, when it is the rule's input unchanged (the budget reuses it)
    source: History | None = None
    # the whole history the rule chose from, when the filter kept only part of it (usage)
    full: History | None = None
    # where each message of ``history`` is in ``all_ids``, when it is not simply the same order
    positions: npt.NDArray[np.intp] | None = None


@dataclass(frozen=True)
class Selection:
    """What the rule is asked to apply: the selected topics and how strict to be."""

    active_topics: tuple[str, ...]
    threshold: float | Literal["auto"]
    search_enabled: bool = True
    error: str | None = None  # why scores are missing, when they are


def _unique(
    history: History,
) -> tuple[Sequence[Message], list[Any], Callable[[Any], int | None], list[int] | None]:
    """Messages with exact repeats dropped, their ids, where an id sits among them (``None``:
    not there), and the positions kept (``None`` when nothing was dropped, the common case).

    A repeat is the same id *and* the same content: two different messages that a host gave one
    id are both kept, since dropping either would lose a message. Ids that cannot be hashed (a
    list in a hand-edited file) are compared as text. A history whose index knows its ids are
    distinct (:class:`~smart_context.history_index.HistoryIndex`) skips the whole check.
    """
    messages, ids = history.messages, history.ids
    if history.first is not None:
        return messages, ids, history.position, None
    try:
        present = set(ids)
    except TypeError:
        ids = [i if isinstance(i, (str, int)) else str(i) for i in ids]
        present = set(ids)
    if len(present) == len(ids):
        return messages, ids, _finder(ids, present), None
    # only the messages whose id is said more than once can be repeats: their contents are
    # compared (as text), the rest kept without a look (a 10,000-message chat with one repeat
    # took 20 ms a request when each content was written out)
    repeated = {mid for mid, times in Counter(ids).items() if times > 1 and mid is not None}
    seen: set[tuple[Any, str]] = set()
    dropped = []
    for i in [i for i, mid in enumerate(ids) if mid in repeated]:
        key = (ids[i], repr(messages[i].get("content")))
        if key in seen:
            dropped.append(i)
        seen.add(key)
    if not dropped:
        return messages, ids, _finder(ids, present), None
    keep = np.ones(len(ids), dtype=bool)
    keep[dropped] = False
    positions = np.flatnonzero(keep).tolist()
    kept_ids = [ids[i] for i in positions]
    return [messages[i] for i in positions], kept_ids, _finder(kept_ids, present), positions


def _finder(ids: list[Any], present: set[Any]) -> Callable[[Any], int | None]:
    """Where an id first sits in ``ids`` (few lookups: a scan in C each beats a dict built
    with a Python step per message)."""

    def find(message_id: Any) -> int | None:
        try:
            return ids.index(message_id) if message_id in present else None
        except TypeError:
            return None

    return find


def fallback_note(topics: Sequence[str]) -> str:
    """The words for a click that kept nothing (docs/contract.md §6): never "N of N in context"."""
    names = " or ".join(f"'{t}'" for t in topics)
    return f"no message is close enough to {names}: the full history is sent"


def decide(
    history: History,
    sticky: Sequence[Message],
    selection: Selection,
    scores: TopicScores | None,
) -> Decision:
    """Apply the rule. ``scores`` says which messages of ``history`` the selected topics keep
    (:mod:`.topic_scores`); ``None`` when not computed."""
    messages, ids, find_id, positions = _unique(history)
    if scores is not None and positions is not None:
        scores = TopicScores(scores.values[positions], scores.keep[positions], scores.cuts)
    sticky_ids = [m.get("id") for m in sticky]
    older = [m for m in sticky if find_id(m.get("id")) is None]

    def candidates() -> list[Any]:  # the whole history, older sticky messages first (a copy)
        return [*older, *messages] if older else list(messages)

    all_ids = [*(m.get("id") for m in older), *ids] if older else ids
    active = selection.active_topics if selection.search_enabled else ()
    cuts = scores.cuts if scores is not None and selection.threshold == "auto" else None
    record = partial(
        ContextRecord,
        active_topics=active,
        sticky_ids=tuple(sticky_ids),
        total_messages=len(older) + len(messages),
        threshold=selection.threshold,
        cuts={label: round(cut, 3) for label, cut in cuts.items()} if cuts else None,
        error=selection.error,
    )
    if not active or scores is None or not len(messages):
        source = history if not older and positions is None else None
        return Decision(candidates(), record(FULL), all_ids, source)

    values, keep = scores.values, scores.keep.copy()
    if not keep.any():
        best = round(float(values.max()), 3)
        fell_back = record(FALLBACK, best_score=best, note=fallback_note(active))
        return Decision(candidates(), fell_back, all_ids)

    for sid in sticky_ids:
        if (at := find_id(sid)) is not None:
            keep[at] = True
    keep[-LAST_TURN:] = True  # the turn the user's message follows, whatever its topic
    # a kept question brings its answer and an answer its question: the turns still alternate
    if positions is None:
        keep = closure(history.codes, keep, history.roles)
    else:
        keep = closure(history.codes[positions], keep)
    kept_at = np.flatnonzero(keep)
    kept_flags = np.concatenate((np.ones(len(older), dtype=bool), keep)) if older else keep
    # the ids and scores are written with the record: a budget may send only some of these
    filtered = record(FILTERED, kept=Kept(all_ids, kept_flags, len(older), values))
    where = np.concatenate((np.arange(len(older), dtype=np.intp), len(older) + kept_at))
    # the ids are known: no second read of every message's id
    whole = history if not older and positions is None else History(candidates(), all_ids)

    def kept() -> list[Any]:
        return [*older, *select(messages, keep)] if older else select(messages, keep)

    return Decision(
        Picked(whole.messages, where, kept), filtered, all_ids, full=whole, positions=where
    )
