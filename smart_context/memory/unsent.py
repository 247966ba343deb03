"""What each chat's latest request left out of its prompt: where the model's own look back
(the memory tool ``retrieve_context``) searches, so it finds what the budget did not send
rather than what the model already reads.

Kept per process for the chats asked lately; a chat without a record (the sidecar restarted, a
call made by hand) is searched whole. A request stores how to work its record out, not the
record: the set of a 10,000-message chat's unsent ids costs a Python step per message, and only
a request whose model looks back needs it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from smart_context.allocator import free_later
from smart_context.paths import ChatId

MAX_CHATS = 32  # chats whose record is kept; each holds the ids of its unsent messages


@dataclass(frozen=True)
class Unsent:
    """The ids of the messages a request had but did not send, and of the stored memories its
    memory section carried (those are in the prompt)."""

    message_ids: frozenset[str]
    memory_ids: frozenset[int]


def unsent_of(
    history: Iterable[Mapping[str, Any]],
    sent: Iterable[Mapping[str, Any]],
    memory_ids: Iterable[Any] = (),
) -> Unsent:
    """The :class:`Unsent` of a request whose chat had ``history`` before the message and whose
    prompt holds ``sent``; the message being answered is in neither, so it is never found."""
    return unsent_among([m.get("id") for m in history], sent, memory_ids)


def unsent_among(
    history_ids: Sequence[Any],
    sent: Iterable[Mapping[str, Any]],
    memory_ids: Iterable[Any] = (),
) -> Unsent:
    """:func:`unsent_of` for a history whose ids are already read."""
    # ids as text on both sides: a hand-edited file may hold a list or a number as an id
    sent_ids = {str(i) for m in sent if (i := m.get("id")) is not None}
    return Unsent(
        frozenset(text for i in history_ids if i is not None and (text := str(i)) not in sent_ids),
        frozenset(i for i in memory_ids if isinstance(i, int)),
    )


class UnsentLog:
    """The latest :class:`Unsent` of each chat, for the :data:`MAX_CHATS` chats asked lately."""

    def __init__(self, max_chats: int = MAX_CHATS) -> None:
        self.max_chats = max_chats
        self._latest: OrderedDict[ChatId, Unsent | Callable[[], Unsent]] = OrderedDict()

    def put(self, chat_id: ChatId, unsent: Unsent | Callable[[], Unsent]) -> None:
        """Record a request of ``chat_id`` (the latest wins): its :class:`Unsent`, or what
        works it out on first :meth:`get`. The one it replaces is freed after the request
        (it may hold the last reference to a long chat's ids)."""
        if (replaced := self._latest.get(chat_id)) is not None:
            free_later(replaced)
        self._latest[chat_id] = unsent
        self._latest.move_to_end(chat_id)
        while len(self._latest) > self.max_chats:
            self._latest.popitem(last=False)

    def get(self, chat_id: ChatId) -> Unsent | None:
        """The latest record of ``chat_id``, if one is kept."""
        found = self._latest.get(chat_id)
        if found is None or isinstance(found, Unsent):
            return found
        unsent = self._latest[chat_id] = found()
        return unsent
