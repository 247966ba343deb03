"""What the budget needs to know of each message, kept between requests: its token count, its
content key, its entities and its words (:mod:`smart_context.budget.words`, what the keyword
search scores; its turn partner is :func:`smart_context.turns.partners`).

A 10,000-message history comes with every request; counting its tokens and finding its entities
again each time would cost more than the whole assembly may. Like
:class:`smart_context.vectors.chat.ChatVectors`, the facts of the last history are kept, and a
history that starts the same (two list comparisons in C) only adds its new messages.

Requests on one chat run concurrently (several clients, or a request while a reply is stored),
and each awaits between reading the facts and using them. So :meth:`MessageFacts.update` hands
each request a :class:`Facts` snapshot of exactly its own history: arrays that later updates
replace rather than change, lists cut to its length (the words' postings grow in place, and
a snapshot reads them below its own length only). A history that is a prefix of the kept one
(a request that started before the last message was added) is served from the kept facts too,
instead of reading the chat again.

A long run of new messages (a chat met first, or read afresh after an edit) is read off the
event loop: :meth:`MessageFacts.read_ahead` reads it in a worker thread before the request needs
it (finding the entities of 10,000 messages is a few hundred milliseconds of Python, which on
the loop would hold every other request), and :meth:`MessageFacts.update` takes what it read
when the history still extends the facts the same way.

The facts are kept per chat, not per token counter: when the counter changes (a calibrated
estimate moving a step, another model on the chat), :meth:`MessageFacts.use` counts the tokens
again and keeps the rest (the entities are most of the cost). An estimate counts from the
characters kept per message, in one array operation; another counter from the next history's
texts.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.allocator import free_later
from smart_context.background import to_thread
from smart_context.budget.importance import entities
from smart_context.budget.tokens import PER_MESSAGE, Counter, Estimate
from smart_context.budget.words import Words, bm25
from smart_context.messages import History, common_start, message_text, pick
from smart_context.vectors.codec import cache_key
from smart_context.vectors.ops import appended

IntArray = npt.NDArray[np.intp]
Lengths = npt.NDArray[np.int32]
READ_AHEAD = 1_000  # new messages read in a worker thread (MessageFacts.read_ahead)


@dataclass(frozen=True)
class Facts:
    """The facts of one request's history of ``n`` messages: later updates only add past
    ``n``, so what it reads below ``n`` stays as it was."""

    n: int
    # the kept facts' own lists, not copies: they only grow (a history read afresh gets new
    # ones), so their first ``n`` entries stay this history's; read them below ``n`` only
    str_ids: list[str]  # the ids as text, as the store and the record use them
    keys: list[str]  # content keys, as the vectors and the text index use them
    tokens: IntArray  # what each message costs in the prompt, framing included
    generation: int  # of the kept facts this was cut from: memos over them compare it
    resets: int
    owner: int  # id() of the kept facts, so memos tell two chats' facts apart
    _position: Mapping[str, int]  # shared with the kept facts: positions past n are ignored
    _entity_index: Mapping[str, list[int]]
    _words: Mapping[str, array[int]]  # shared too: each word's postings (budget.words)
    word_counts: Lengths  # the words of each message, as BM25 counts them

    def position(self, message_id: str) -> int | None:
        """Where the message with this (text) id sits in the history, if it is there."""
        i = self._position.get(message_id)
        return i if i is not None and i < self.n else None

    def positions(self, message_ids: Iterable[str]) -> list[int]:
        """The positions of those of ``message_ids`` in the history (a lookup each)."""
        found = (self.position(mid) for mid in message_ids)
        return [i for i in found if i is not None]

    def mentions(self, entity: str) -> IntArray:
        """The positions of the messages that mention ``entity``."""
        at = np.asarray(self._entity_index.get(entity, ()), dtype=np.intp)
        out: IntArray = at[at < self.n]
        return out

    def text_scores(self, message: str, limit: int) -> npt.NDArray[np.float32]:
        """Each message's BM25 score for ``message``'s words, the best ``limit`` kept
        (:func:`smart_context.budget.words.bm25`)."""
        return bm25(self._words, self.word_counts, message, limit)


class Part:
    """A request's candidates as positions of the whole history's :class:`Facts`
    (``positions``: a topic filter's part of it, ``None``: all of it): their tokens, their
    ids, and any per-message array cut to them. What the per-turn budget and the cache-stable
    layout both choose from."""

    def __init__(self, facts: Facts, positions: IntArray | None) -> None:
        self.positions = positions
        self.str_ids = facts.str_ids
        self.n = facts.n if positions is None else len(positions)
        self.tokens = facts.tokens if positions is None else facts.tokens[positions]

    def name(self, i: int) -> str:
        """The id of the candidate at ``i``."""
        return self.str_ids[i if self.positions is None else int(self.positions[i])]

    def names(self, at: Sequence[int] | IntArray) -> list[str]:
        """The ids of the candidates at ``at``, read in one call."""
        where = np.asarray(at, dtype=np.intp)
        if self.positions is not None:
            where = self.positions[where]
        return pick(self.str_ids, where.tolist())

    def of(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """``values`` (one per message of the whole history) for the candidates."""
        return values if self.positions is None else values[self.positions]


@dataclass(frozen=True, eq=False)
class _Run:
    """What the facts learn of a run of new messages that starts at ``start``; pure, so it
    can be read in a worker thread."""

    start: int
    ids: list[Any]
    contents: list[Any]
    str_ids: list[str]
    keys: list[str]
    roles: list[str]
    tokens: IntArray
    counted: str  # the key of the counter that counted ``tokens``
    lengths: Lengths  # (2, n): each message's characters, in its text and its role
    entities: dict[str, list[int]]  # entity -> the positions of the messages that mention it
    words: Words  # the words each message says (budget.words)

    @classmethod
    def read(
        cls,
        messages: Sequence[Mapping[str, Any]],
        ids: list[Any],
        contents: list[Any],
        start: int,
        counter: Counter,
    ) -> _Run:
        counted = counter.key  # before counting: a calibration may move it meanwhile
        texts = [message_text(m) for m in messages]
        keys = [cache_key(str(m.get("id")), t) for m, t in zip(messages, texts, strict=True)]
        roles = [str(m.get("role")) for m in messages]
        tokens = _count(counter, texts, roles)
        lengths = np.array([list(map(len, texts)), list(map(len, roles))], dtype=np.int32)
        found: dict[str, list[int]] = {}
        for position, text in enumerate(texts, start):
            for entity in entities(text):  # one int object a message, however many it names
                found.setdefault(entity, []).append(position)
        str_ids = [str(i) for i in ids]
        said = Words.read(texts, start)
        return cls(
            start, ids, contents, str_ids, keys, roles, tokens, counted, lengths, found, said
        )

    def follows(self, known: int, ids: list[Any], contents: list[Any]) -> bool:
        """Whether this run is exactly the messages of ``ids``/``contents`` past ``known``."""
        return (
            self.start == known
            and len(ids) - known == len(self.ids)
            and ids[known:] == self.ids
            and contents[known:] == self.contents
        )


def _count(counter: Counter, texts: Sequence[str], roles: Sequence[str]) -> IntArray:
    """What each message costs in the prompt: its text, its role and the chat format's
    framing, as ``prompt_tokens`` counts them."""
    both = counter.count([*texts, *roles])
    return np.add(both[: len(texts)], both[len(texts) :], dtype=np.intp) + PER_MESSAGE


class MessageFacts:
    """The facts of one chat's last history; its token counts under one counter at a time
    (:meth:`use`)."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        # what the tokens were counted under: an estimate calibrates in place, so its key
        # moves on the object this holds
        self.counted = counter.key
        self.ids: list[Any] = []
        self.str_ids: list[str] = []  # the ids as text, as the store and the record use them
        self.position: dict[str, int] = {}  # text id -> its last position
        self.contents: list[Any] = []
        self.lineage: object = None  # of the history last read (messages.common_start)
        self._last: Facts | None = None  # the last snapshot: immutable, so it can be shared
        self.keys: list[str] = []
        self.roles: list[str] = []
        self.tokens: IntArray = np.zeros(0, dtype=np.intp)
        self.lengths: Lengths = np.zeros((2, 0), dtype=np.int32)  # as _Run.lengths
        self.uncounted = False  # the tokens are another counter's: the next update counts them
        self.entity_index: dict[str, list[int]] = {}
        self.words = Words()  # every message's words, for the keyword search
        self.generation = 0  # changes whenever the facts do: memos over them compare it
        # changes only when the facts are read afresh (an edit, a deletion): what holds for the
        # earlier messages, as the stored summaries over them, holds while messages are added
        self.resets = 0
        self._ahead: _Run | None = None  # new messages read in a worker thread (read_ahead)

    @property
    def last(self) -> Facts | None:
        """The facts of the history last read, if any."""
        return self._last

    def use(self, counter: Counter) -> MessageFacts:
        """Count with ``counter`` from now on: when it counts otherwise than the last one, the
        kept messages' tokens are counted again (at once for an estimate, from the characters
        kept; else by the next :meth:`update`, from its history's texts); nothing else is
        read again."""
        self.counter = counter
        if counter.key == self.counted:
            return self
        self.counted = counter.key
        self._ahead = None  # counted by the last counter
        if isinstance(counter, Estimate):
            self.tokens = counter.count_lengths(self.lengths).sum(axis=0) + PER_MESSAGE
            self.uncounted = False
        else:
            self.uncounted = bool(len(self.ids))
        self.generation += 1
        self._last = None
        return self

    def update(self, history: History) -> Facts:
        """The facts of ``history``: only its new messages are read when it extends the last
        one, none when it is a prefix of it; anything else (an edit, a deletion, another chat)
        reads it whole."""
        n = len(history.ids)
        known = self._known(history)
        # kept messages another counter counted, past a shorter history: read afresh (rare)
        if known < 0 or (self.uncounted and n < len(self.ids)):
            generation, resets, ahead = self.generation, self.resets, self._ahead
            self.__init__(self.counter)  # type: ignore[misc]
            self.generation, self.resets, self._ahead = generation + 1, resets + 1, ahead
            known = 0
        self.lineage = history.lineage
        if self.uncounted:
            self._recount(history)
        if n > known:
            self._append(history, known)
        last = self._last
        if last is not None and last.n == n and last.generation == self.generation:
            return last  # the budget and the usage of one request ask for the same
        self._last = self._snapshot(n)
        return self._last

    async def read_ahead(self, history: History) -> None:
        """Read ``history``'s new messages in a worker thread when they are many (at least
        :data:`READ_AHEAD`), for :meth:`update` to take; else leave them to it."""
        known = max(self._known(history), 0)
        ids, contents = history.ids, history.contents
        if len(ids) - known < READ_AHEAD:
            return
        if self._ahead is not None and self._ahead.follows(known, ids, contents):
            return  # another request on the chat read them
        run = await to_thread(
            _Run.read,
            history.messages[known:],
            ids[known:],
            contents[known:],
            known,
            self.counter,
        )
        self._ahead = run

    def shares(self, history: History) -> bool:
        """Whether these facts are of ``history``'s messages: it starts with them, or they with
        it, and they hold any (an :meth:`update` with it reads only what it adds)."""
        return bool(self.ids) and self._known(history) >= 0

    def _known(self, history: History) -> int:
        """How many messages the facts keep when ``history`` starts with them or they with it
        (a request that started before the last message was added); -1 when neither starts
        with the other (an edit, a deletion, another chat)."""
        same = common_start(
            history.ids, history.contents, self.ids, self.contents, history.lineage, self.lineage
        )
        return len(self.ids) if same >= 0 else -1

    def _recount(self, history: History) -> None:
        """Count the kept messages' tokens with the counter now in use, from the texts of
        ``history``, which starts with them."""
        texts = [message_text(m) for m in history.messages[: len(self.ids)]]
        self.tokens = _count(self.counter, texts, self.roles)
        self.uncounted = False

    def _snapshot(self, n: int) -> Facts:
        # the lists shared, not cut to ``n``: copying and then freeing a 100,000-message chat's
        # two lists took a fifth of its request (the tokens are a view, as cheap)
        return Facts(
            n,
            self.str_ids,
            self.keys,
            self.tokens[:n],
            self.generation,
            self.resets,
            id(self),
            self.position,
            self.entity_index,
            self.words.postings,
            self.words.counts[:n],
        )

    def _append(self, history: History, known: int) -> None:
        """Read the messages of ``history`` from ``known`` on (or take them as
        :meth:`read_ahead` read them). Every array is replaced, never changed in place, and
        lists only grow: snapshots already handed out stay valid."""
        ids, contents = history.ids, history.contents
        run, self._ahead = self._ahead, None
        if run is None or run.counted != self.counted or not run.follows(known, ids, contents):
            run = _Run.read(
                history.messages[known:], ids[known:], contents[known:], known, self.counter
            )
        self.position.update(zip(run.str_ids, range(known, len(ids)), strict=True))
        self.str_ids.extend(run.str_ids)
        self.keys.extend(run.keys)
        self.roles.extend(run.roles)
        self.tokens = appended(self.tokens, run.tokens)
        self.lengths = appended(self.lengths, run.lengths)
        for entity, at in run.entities.items():
            self.entity_index.setdefault(entity, []).extend(at)
        self.words.extend(run.words)
        # the history's own lists, no copy: a history's lists are never changed in place (its
        # index replaces them as the chat grows); the ones they replace are freed after the
        # request, not in it
        free_later(self.ids, self.contents)
        self.ids, self.contents = ids, contents
        self.generation += 1
