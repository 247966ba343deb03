"""Turn order: what a filter or a budget keeps of a history still alternates user and assistant.

Some model servers and chat templates refuse a conversation whose roles do not alternate
("Conversation roles must alternate user/assistant/user/assistant"), and a model reads two user
turns in a row as a question it never answered. A history sent whole alternates as well as the
chat does; a part of it need not: a topic click that keeps a question but not its answer sends
that question beside the next one.

The rule: **a kept message brings its partner**, the nearest message of the other role: a user
message the first answer after it, an answer the last user message before it. In a chat that
alternates, that is the other half of its turn. In a chat with runs (two people writing several
messages in a row) it is the nearest message across, not the whole run: enough, and cheap.
Afterwards, two messages of one role follow each other in what is sent only where the chat has
no message of the other role between them: the history never has two turns of the same role in
a row that the host itself would not have sent. Messages of other roles (system, tool) have no
partner.

:func:`closure` applies the rule without a limit (a topic click); :func:`within` applies it
under a budget: a message whose partner does not fit is left out rather than sent alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Codes = npt.NDArray[np.int8]
Flags = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]

OTHER, USER, ASSISTANT = 0, 1, 2
_CODES = {"user": USER, "assistant": ASSISTANT}


def role_code(message: Mapping[str, Any]) -> int:
    """The turn role of one message: user, assistant or neither (an odd role, a list from a
    hand-edited file included)."""
    role = message.get("role")
    return _CODES.get(role, OTHER) if isinstance(role, str) else OTHER


def role_codes(messages: Sequence[Mapping[str, Any]]) -> Codes:
    """:func:`role_code` of each message."""
    return np.fromiter((role_code(m) for m in messages), dtype=np.int8, count=len(messages))


@dataclass(frozen=True)
class Roles:
    """Where a history's user messages and answers sit (ascending positions): what
    :func:`partners` searches. Read once per history; a chat's
    :class:`~smart_context.history_index.HistoryIndex` keeps them as the chat grows, so a
    request finds a few partners in O(few x log n) instead of scanning every role, and many
    (a topic click keeps thousands) in one gather from :meth:`table`, made once per chat and
    extended by what each request adds."""

    users: IntArray
    answers: IntArray
    # the table of the roles these extend, and where its entries stop being final (the first
    # user message with no answer after it can get one from what was added)
    earlier: tuple[IntArray, int] | None = field(default=None, compare=False, repr=False)
    _table: IntArray | None = field(default=None, init=False, compare=False, repr=False)

    @classmethod
    def of(cls, codes: Codes, start: int = 0) -> Roles:
        """The roles of ``codes``, their positions counted from ``start``."""
        return cls(
            np.flatnonzero(codes == USER) + start, np.flatnonzero(codes == ASSISTANT) + start
        )

    def extended(self, more: Roles) -> Roles:
        """These roles followed by ``more``'s (positions past these); a table of these made
        already is carried on, to be completed for what was added only."""
        earlier = self.earlier  # a table not made since is carried on as it was
        if self._table is not None:
            final = int(self.answers[-1]) + 1 if len(self.answers) else 0
            earlier = (self._table, final)
        return Roles(
            np.concatenate((self.users, more.users)),
            np.concatenate((self.answers, more.answers)),
            earlier,
        )

    def before(self, n: int) -> Roles:
        """The roles of the first ``n`` messages (views, no copy)."""
        users = self.users[: int(np.searchsorted(self.users, n))]
        answers = self.answers[: int(np.searchsorted(self.answers, n))]
        return Roles(users, answers)

    @property
    def has_table(self) -> bool:
        """Whether :meth:`table` was made already (or is carried from the roles these extend)."""
        return self._table is not None or self.earlier is not None

    def table(self) -> IntArray:
        """Every position's partner (module docstring), -1 for none, up to the last user
        message or answer: made on first use, from the earlier roles' table when there is one
        (only the positions past its last answer are searched again)."""
        if self._table is None:
            start, head = 0, np.zeros(0, dtype=np.intp)
            if self.earlier is not None:
                table, final = self.earlier
                start, head = final, table[:final]
            size = max(_last(self.users), _last(self.answers)) + 1
            tail = np.full(max(size - start, 0), -1, dtype=np.intp)
            users = self.users[int(np.searchsorted(self.users, start)) :]
            answers = self.answers[int(np.searchsorted(self.answers, start)) :]
            tail[users - start] = _answer_after(self.answers, users)
            tail[answers - start] = _user_before(self.users, answers)
            table = np.concatenate((head, tail))
            object.__setattr__(self, "_table", table)  # a cache: the roles stay as they are
            object.__setattr__(self, "earlier", None)  # the old table may go
            return table
        return self._table


def _last(positions: IntArray) -> int:
    return int(positions[-1]) if len(positions) else -1


def _answer_after(answers: IntArray, at: IntArray) -> IntArray:
    """The first answer after each position of ``at`` (-1: none)."""
    if not len(answers):
        return np.full(len(at), -1, dtype=np.intp)
    after = np.searchsorted(answers, at, side="right")
    found = answers[np.minimum(after, len(answers) - 1)]
    return np.where(after < len(answers), found, -1)  # past the last answer: none


def _user_before(users: IntArray, at: IntArray) -> IntArray:
    """The last user message before each position of ``at`` (-1: none)."""
    if not len(users):
        return np.full(len(at), -1, dtype=np.intp)
    before = np.searchsorted(users, at, side="left")
    found = users[np.maximum(before - 1, 0)]
    return np.where(before > 0, found, -1)  # before the first question: none


# past this many positions, :func:`partners` gathers from the roles' table (made once per
# chat) rather than searching, when the table is made already or they are a quarter of the
# history or more (making it costs about what searching that many does): a budget's few
# hits search, a topic click's thousands gather
MANY = 64


def _tabled(roles: Roles, asked: int, n: int) -> bool:
    """Whether partners for ``asked`` positions of a history of ``n`` come from the table."""
    return asked > MANY and (roles.has_table or 4 * asked >= n)


def partners(codes: Codes, at: IntArray, roles: Roles | None = None) -> IntArray:
    """For the messages at ``at``: the position of each one's partner (module docstring), -1
    for none (a question not answered yet, an answer before any question, another role).
    ``roles``: :meth:`Roles.of` ``codes``, when the caller has them."""
    if roles is not None and _tabled(roles, len(at), len(codes)):
        table = roles.table()
        if not len(table):  # no user message and no answer: nobody has a partner
            return np.full(len(at), -1, dtype=np.intp)
        found = table[np.minimum(at, len(table) - 1)]
        out: IntArray = np.where(at < len(table), found, -1)  # past it: other roles only
        return out
    out = np.full(len(at), -1, dtype=np.intp)
    is_user, is_answer = codes[at] == USER, codes[at] == ASSISTANT
    if not is_user.any() and not is_answer.any():
        return out
    roles = Roles.of(codes) if roles is None else roles
    # searched, never copied: a few lookups each in positions of the whole history
    if is_user.any():
        out[is_user] = _answer_after(roles.answers, at[is_user])
    if is_answer.any():
        out[is_answer] = _user_before(roles.users, at[is_answer])
    return out


def closure(codes: Codes, keep: Flags, roles: Roles | None = None) -> Flags:
    """``keep`` with every kept message's partner (module docstring); no limit."""
    if roles is not None and len(keep) > MANY:  # a click reads every position: the table
        table = roles.table()
        size = min(len(table), len(keep))  # past the table: other roles only
        # the kept positions, then their partners: a third of the time of a boolean mask over
        # the table (0.13 against 0.44 ms for 30,000 kept of 100,000)
        partner = table[np.flatnonzero(keep[:size])]
    else:
        partner = partners(codes, np.flatnonzero(keep), roles)
    out = keep.copy()
    out[partner[partner >= 0]] = True
    return out


def within(
    codes: Codes,
    keep: Flags,
    tokens: npt.NDArray[np.integer[Any]],
    free: int,
    order: IntArray,
    roles: Roles | None = None,
) -> Flags:
    """``keep`` with every kept message's partner, taking at most ``free`` more tokens: the
    kept messages are visited in ``order`` (their positions, most valuable first); one whose
    partner does not fit is left out, and the tokens it frees serve the messages after it."""
    at = np.flatnonzero(keep)
    found = partners(codes, at, roles)
    has = found >= 0
    at, found = at[has], found[has]
    if keep[found].all():
        return keep  # every kept message has its partner (or has none)
    # walked as Python ints, each array read in one go (a few hundred kept messages, read one
    # numpy element at a time, took a sixth of a long chat's budget)
    partner = dict(zip(at.tolist(), found.tolist(), strict=True))
    both = np.concatenate((at, found))
    cost = dict(zip(both.tolist(), tokens[both].tolist(), strict=True))
    kept = set(np.flatnonzero(keep).tolist())
    paired: set[int] = set()  # partners another kept message counts on
    added: list[int] = []
    dropped: list[int] = []
    for i in order.tolist():
        p = partner.get(i, -1)
        if p < 0 or i not in kept or i in paired:
            continue
        if p not in kept and cost[p] > free:
            kept.discard(i)  # sent alone it would break the order: the room goes to others
            dropped.append(i)
            free += cost[i]
            continue
        if p not in kept:
            kept.add(p)
            added.append(p)
            free -= cost[p]
        paired.update((i, p))
    out = keep.copy()
    out[dropped] = False
    out[added] = True  # (after: a message left out may come back as another's partner)
    return out
