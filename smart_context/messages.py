"""Chat messages as the plugin reads them: their text, the real turns, a history's ids.

A host hands us messages as dicts with at least ``id``, ``role`` and ``content``; anything else
may be missing or odd (a hand-edited file, another plugin). These helpers never raise on that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.turns import Codes, Roles, role_codes

Message = Mapping[str, Any]


def message_text(message: Message) -> str:
    """The text of a history message; the text parts of a list of parts (OpenAI style, or plain
    strings) are joined by newlines, other parts (images) are skipped."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (p.get("text") if isinstance(p, Mapping) else p for p in content)
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if content is None else str(content)


def conversation(messages: Any) -> list[dict[str, Any]]:
    """The chat's real turns: user and assistant messages, not a host's notices or errors."""
    if not isinstance(messages, list):
        return []
    return [messages[i] for i in turn_positions(messages)]


def turn_positions(messages: Sequence[Any]) -> list[int]:
    """Where the real turns of :func:`conversation` sit in ``messages``."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m, dict)
        and m.get("role") in ("user", "assistant")
        and "notice" not in m
        and "error" not in m
    ]


def common_start(
    ids: Sequence[Any],
    contents: Sequence[Any],
    last_ids: Sequence[Any],
    last_contents: Sequence[Any],
    lineage: object = None,
    last_lineage: object = None,
) -> int:
    """How many messages two histories share when one starts with the other (the length of the
    shorter), else -1: an edit, a deletion or another chat. Two histories of one ``lineage``
    (read through one :class:`~smart_context.history_index.HistoryIndex`, which checked them)
    share their start without a comparison; others cost two list comparisons in C, and only
    the longer list is cut, never a copy of the whole when the lengths are equal."""
    n = min(len(ids), len(last_ids))
    if lineage is not None and lineage == last_lineage:
        return n

    def cut(values: Sequence[Any]) -> Sequence[Any]:
        return values if len(values) == n else values[:n]

    same = cut(ids) == cut(last_ids) and cut(contents) == cut(last_contents)
    return n if same else -1


def select(values: Sequence[Any], flags: npt.NDArray[np.bool_]) -> list[Any]:
    """``values`` where ``flags`` (one per value) is true: in one C loop over the flags' bytes
    when many are (2.7 ms for half of 100,000 values, where :func:`pick` took 6.8), else picked
    at their positions (the 150 ids a budget sends of 100,000: 0.04 ms instead of 1.6; the two
    cost the same at about a quarter)."""
    if len(flags) != len(values):
        raise ValueError(f"{len(flags)} flags for {len(values)} values")
    flags = np.ascontiguousarray(flags, dtype=bool)
    if 4 * int(np.count_nonzero(flags)) < len(flags):
        return pick(values, np.flatnonzero(flags).tolist())
    return list(compress(values, flags.view(np.uint8).tobytes()))


def pick(values: Sequence[Any], at: Sequence[int]) -> list[Any]:
    """``values`` at the positions ``at``, in one C call: a filter keeps thousands of them."""
    if len(at) > 1:
        return list(itemgetter(*at)(values))
    return [values[i] for i in at]


class History:
    """The messages of one request with their ids and contents, read once.

    A 10,000-message history is touched from Python on every request; reading each id once and
    sharing the list between the sections keeps that cost down. Its lists are never changed in
    place, by it or by a reader: sections keep them as they are, without a copy. A history
    read through the chat's :class:`~smart_context.history_index.HistoryIndex` comes with its
    ids and contents already known and with a ``lineage``: sections compare it with what they
    read before without a step per message.
    """

    def __init__(
        self,
        messages: Sequence[Message],
        ids: list[Any] | None = None,
        contents: list[Any] | None = None,
        lineage: object = None,
        codes: Codes | None = None,
        roles: Roles | None = None,
    ) -> None:
        self.messages = messages
        self.ids: list[Any] = [m.get("id") for m in messages] if ids is None else ids
        self._contents = contents
        self.lineage = lineage
        # when the ids are known to be distinct: each id's position, possibly with ids past
        # this history's end (the index it came from has grown since); see :meth:`position`
        self.first: Mapping[Any, int] | None = None
        self._codes = codes  # each message's turn role, read on first use when not given
        self._roles = roles

    def __len__(self) -> int:
        return len(self.messages)

    def position(self, message_id: Any) -> int | None:
        """Where the message with ``message_id`` is, when :attr:`first` is known (a lookup);
        ``None`` when it is not in this history."""
        assert self.first is not None
        try:
            i = self.first.get(message_id)
        except TypeError:  # an id that cannot be hashed is no id of an indexed history
            return None
        return i if i is not None and i < len(self.ids) else None

    @property
    def codes(self) -> Codes:
        """Each message's turn role (:func:`smart_context.turns.role_codes`), read on first use
        unless the history's index knew them."""
        if self._codes is None:
            self._codes = role_codes(self.messages)
        return self._codes

    @property
    def roles(self) -> Roles:
        """Where its user messages and answers are (:class:`~smart_context.turns.Roles`),
        read once per history unless its index knew them."""
        if self._roles is None:
            self._roles = Roles.of(self.codes)
        return self._roles

    @property
    def contents(self) -> list[Any]:
        """Each message's raw ``content``, for comparing with a history seen before (read on
        first use; ``functools.cached_property`` takes a lock per access in Python 3.11)."""
        if self._contents is None:
            self._contents = [m.get("content") for m in self.messages]
        return self._contents


class ChatTurns:
    """Each chat's real turns (:func:`turn_positions`, with their ids as text) as the last pass
    read them. A history of the same lineage (read through the chat's index, so it starts with
    the messages read last time) is read from where the last one ended: the pass after a reply
    reads the reply, not the 10,000 messages before it."""

    MAX_CHATS = 64

    def __init__(self) -> None:
        self._chats: dict[Any, tuple[object, int, list[int], list[str]]] = {}

    def of(self, chat_id: Any, history: History) -> tuple[list[int], list[str]]:
        """Where ``history``'s real turns are, and their ids as text (new lists each call)."""
        n = len(history)
        memo = self._chats.get(chat_id)
        start, at, ids = 0, [], []
        lineage = history.lineage
        if memo is not None and lineage is not None and memo[0] == lineage and memo[1] <= n:
            start, at, ids = memo[1], memo[2], memo[3]
        messages = history.messages
        new = [start + i for i in turn_positions(messages[start:])]
        at = [*at, *new]
        ids = [*ids, *(str(messages[i].get("id")) for i in new)]
        if len(self._chats) >= self.MAX_CHATS and chat_id not in self._chats:
            self._chats.clear()  # a long-running sidecar visits many chats
        self._chats[chat_id] = (history.lineage, n, at, ids)
        return at, ids
