"""The histories a chat's requests bring, read once: an append costs O(new), not O(chat).

A host sends the whole history with every request, as a fresh list of fresh dicts (a chat file
read again, a client resending it), so nothing tells us it is the list we saw before. Reading
every message's id and content again took a Python step per message on every request, and each
section that keeps something per chat (token counts, vector rows) then compared the whole lists
once more to see whether the chat had changed.

A :class:`HistoryIndex` keeps one chat's ids and contents as last read and checks a new history
against them *by sampling*: the messages it adds are read, and of the messages it shares with
the index, the first, the last and a window of :data:`PROBE` that moves along the chat on every
request are compared. When they agree, the history is taken as the index plus what it adds, and
it comes out with the index's :class:`Lineage`: a section that remembers what it read under the
same lineage knows, without comparing, that the two histories share their start. When a sample
disagrees (an edit, a deletion, another window of the chat), the history is read whole and the
lineage changes, as before.

A change the samples miss (one message edited in place, the history's length unchanged) is
caught by :meth:`HistoryIndex.verify`, which the background pass after each reply runs against
the stored chat: a disagreement there makes the next request read its history whole. Until
then, at most the requests in between work with the old text of that one message.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any

import numpy as np

from smart_context.errors import SmartContextError
from smart_context.messages import History, Message
from smart_context.turns import Codes, Roles, role_codes

PROBE = 256  # shared messages compared per request, besides the first and the last
MAX_CHATS = 64  # chats whose index is kept

_serial = count(1)


@dataclass(frozen=True)
class Lineage:
    """Which index read a history and in which of its generations: two histories of one
    lineage are both prefixes of the same messages, so the shorter one starts the longer."""

    index: int
    generation: int


class HistoryIndex:
    """One chat's ids and contents as the last requests brought them (module docstring)."""

    def __init__(self) -> None:
        self._serial = next(_serial)
        self.generation = 0
        self.ids: list[Any] = []
        self.contents: list[Any] = []
        self.codes: Codes = np.zeros(0, dtype=np.int8)  # each message's turn role
        self.roles = Roles.of(self.codes)  # where the user messages and the answers are
        self._probe = 0  # where the next window of samples starts
        self._doubt = False  # the background check found a change the samples may miss
        # each id's first position, and where the first repeated id sits (``None``: no
        # repeat yet); ``None`` for both when an id cannot be hashed (a hand-edited file)
        self.first: dict[Any, int] | None = {}
        self.repeat: int | None = None

    @property
    def lineage(self) -> Lineage:
        return Lineage(self._serial, self.generation)

    def read(self, messages: Sequence[Message]) -> History:
        """``messages`` as a :class:`History` of this index's lineage (module docstring)."""
        n, known = len(messages), len(self.ids)
        shared = min(n, known)
        if self._doubt or not self._agrees(messages, shared):
            self._start_over()
            known = 0
        if n > known:
            fresh = messages[known:]
            _check_messages(fresh, known)  # before the lists grow: they stay in step
            # new lists, never grown in place: a history handed out holds the index's own
            self.ids = [*self.ids, *map(_id, fresh)]
            self.contents = [*self.contents, *map(_content, fresh)]
            codes = role_codes(fresh)
            self.codes = np.concatenate((self.codes, codes))
            self.roles = self.roles.extended(Roles.of(codes, known))
            self._place(known)
        # the index's lists when the request has them all (they are replaced as they grow,
        # never changed in place, as the codes and the roles are), else copies cut to it
        whole = n == len(self.ids)
        roles = self.roles if whole else self.roles.before(n)
        ids, contents = (self.ids, self.contents) if whole else (self.ids[:n], self.contents[:n])
        history = History(messages, ids, contents, self.lineage, self.codes[:n], roles)
        if self.first is not None and (self.repeat is None or self.repeat >= n):
            history.first = self.first  # its ids are distinct: where each is, without a set
        return history

    def _place(self, start: int) -> None:
        """Note where the ids from ``start`` on first appear (a step per new message only)."""
        first = self.first
        if first is None:
            return
        try:
            for k in range(start, len(self.ids)):
                if first.setdefault(self.ids[k], k) != k and self.repeat is None:
                    self.repeat = k
        except TypeError:  # an id that is a list or a dict: decided the slow way
            self.first = self.repeat = None

    def verify(self, messages: Sequence[Message], read: History | None = None) -> bool:
        """Compare every message the index shares with ``messages`` (off the request path);
        ``False``, and the next :meth:`read` starts over, when one differs. ``read``: the
        messages with their ids and contents read, when the caller has them."""
        shared = min(len(messages), len(self.ids))
        try:
            read = History(messages[:shared]) if read is None else read
            ids, contents = read.ids[:shared], read.contents[:shared]
            same = ids == self.ids[:shared] and contents == self.contents[:shared]
        except AttributeError:  # not a message: the next read starts over, and refuses it
            same = False
        if not same:
            self._doubt = True
        return same

    def _agrees(self, messages: Sequence[Message], shared: int) -> bool:
        if not shared:
            return True
        start = self._probe if self._probe < shared else 0
        stop = min(shared, start + PROBE)
        self._probe = stop
        ids, contents = self.ids, self.contents
        sample = [messages[0], messages[shared - 1], *messages[start:stop]]
        places = [0, shared - 1, *range(start, stop)]
        try:  # one comprehension each, in C's stride: a Python step per sample cost 1.3 ms
            return [m.get("id") for m in sample] == [ids[i] for i in places] and [
                m.get("content") for m in sample
            ] == [contents[i] for i in places]
        except AttributeError:  # not a message: the history is read whole, and refused
            return False

    def _start_over(self) -> None:
        # new lists, never cleared in place: histories already handed out keep theirs
        self.ids, self.contents = [], []
        self.codes = np.zeros(0, dtype=np.int8)
        self.roles = Roles.of(self.codes)
        self.first, self.repeat = {}, None
        self.generation += 1
        self._probe = 0
        self._doubt = False


_NOT_A_MESSAGE = object()  # what a sample reads where the host put something else


def _id(message: Message) -> Any:
    return message.get("id") if isinstance(message, Mapping) else _NOT_A_MESSAGE


def _content(message: Message) -> Any:
    return message.get("content") if isinstance(message, Mapping) else _NOT_A_MESSAGE


def _check_messages(messages: Sequence[Any], start: int) -> None:
    """Refuse a history holding something other than messages, saying where: the plugin then
    leaves the request as the host made it (a step per new message only)."""
    for i, message in enumerate(messages, start):
        if not isinstance(message, Mapping):
            raise SmartContextError(
                f"the host's history holds a {type(message).__name__} at position {i}, where "
                "a message (a mapping with a role and content) should be"
            )


class HistoryIndexes:
    """The :class:`HistoryIndex` of each chat seen lately (a long-running host visits many)."""

    def __init__(self, max_chats: int = MAX_CHATS) -> None:
        self.max_chats = max_chats
        self._indexes: OrderedDict[str, HistoryIndex] = OrderedDict()

    def of(self, chat_id: str) -> HistoryIndex:
        index = self._indexes.get(chat_id)
        if index is None:
            index = self._indexes[chat_id] = HistoryIndex()
            while len(self._indexes) > self.max_chats:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(chat_id)
        return index

    def read(self, chat_id: str, messages: Sequence[Message]) -> History:
        """The request's history of ``chat_id``, read through the chat's index."""
        return self.of(chat_id).read(messages)

    def verify(
        self, chat_id: str, messages: Sequence[Message], read: History | None = None
    ) -> None:
        """:meth:`HistoryIndex.verify` for a chat already indexed; nothing for another."""
        index = self._indexes.get(chat_id)
        if index is not None:
            index.verify(messages, read)
