"""Turn order: what a filter or a budget keeps of a history still alternates user and assistant.

Some model servers and chat templates refuse a conversation whose roles do not alternate
("Conversation roles must alternate user/assistant/user/assistant"), and a model reads two user
turns in a row as a question it never answered. A history sent whole alternates as well as the
chat does; a part of it need not: a topic click that keeps a question but not its answer sends
that question beside the next one.

The rule: **a kept message brings its turn.** A user message brings the messages after it up to
the first answer; an answer brings the messages before it back to the user message it answers.
In a chat that alternates, that is the message's partner. In a chat with runs (two people
writing several messages in a row), it is the rest of the run that reaches across. Afterwards,
two messages of one role follow each other in what is sent only where the chat has no message of
the other role between them: the history never has two turns of the same role in a row that the
host itself would not have sent. Messages of other roles (system, tool) belong to no turn of
their own and are brought along when they sit inside one.

:func:`closure` applies the rule without a limit (a topic click); :func:`within` applies it
under a budget: a message whose turn does not fit is left out rather than sent alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Codes = npt.NDArray[np.int8]
Flags = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]

OTHER, USER, ASSISTANT = 0, 1, 2
_CODES = {"user": USER, "assistant": ASSISTANT}


def role_code(message: Mapping[str, Any]) -> int:
    """The turn role of one message: user, assistant or neither."""
    return _CODES.get(message.get("role"), OTHER)  # type: ignore[arg-type]


def role_codes(messages: Sequence[Mapping[str, Any]]) -> Codes:
    """:func:`role_code` of each message."""
    return np.fromiter((role_code(m) for m in messages), dtype=np.int8, count=len(messages))


def spans(codes: Codes, at: IntArray) -> tuple[IntArray, IntArray]:
    """For the messages at ``at``: the first and last position of the turn part each brings
    (inclusive). A user message reaches forward to the first answer after it (the chat's end
    when there is none); an answer back to the last user message before it (itself when there
    is none); any other message is its own span."""
    n = len(codes)
    start, stop = at.copy(), at.copy()
    answers = np.flatnonzero(codes == ASSISTANT)
    users = np.flatnonzero(codes == USER)
    is_user = codes[at] == USER
    if is_user.any():
        after = np.searchsorted(answers, at[is_user], side="right")
        padded = np.append(answers, n - 1)  # past the last answer: the chat's end
        stop[is_user] = padded[after]
    is_answer = codes[at] == ASSISTANT
    if is_answer.any():
        before = np.searchsorted(users, at[is_answer], side="left")  # users before, counted
        padded = np.append(-1, users)  # before the first user: the answer itself
        start[is_answer] = np.where(before > 0, padded[before], at[is_answer])
    return start, stop


def closure(codes: Codes, keep: Flags) -> Flags:
    """``keep`` with every kept message's turn (module docstring); no limit."""
    at = np.flatnonzero(keep)
    if not len(at):
        return keep
    start, stop = spans(codes, at)
    n = len(codes)
    change = np.bincount(start, minlength=n + 1) - np.bincount(stop + 1, minlength=n + 1)
    out: Flags = np.cumsum(change[:n]) > 0
    return out | keep


def within(
    codes: Codes, keep: Flags, tokens: npt.NDArray[np.integer[Any]], free: int, order: IntArray
) -> Flags:
    """``keep`` with every kept message's turn, taking at most ``free`` more tokens: the kept
    messages are visited in ``order`` (most valuable first); one whose turn does not fit is
    left out, and the tokens it freed serve the messages after it."""
    at = np.flatnonzero(keep)
    if not len(at):
        return keep
    start, stop = spans(codes, at)
    if np.array_equal(start, at) and np.array_equal(stop, at):
        return keep  # every kept message is a whole turn already (or has none)
    out = keep.copy()
    done = np.zeros(len(codes), dtype=bool)  # the messages whose turn is settled
    where = {int(i): k for k, i in enumerate(at.tolist())}
    for i in order.tolist():
        k = where.get(i)
        if k is None or not out[i] or done[i]:
            continue
        lo, hi = int(start[k]), int(stop[k]) + 1
        missing = ~out[lo:hi]
        cost = int(tokens[lo:hi][missing].sum())
        if cost <= free:
            out[lo:hi] = True
            done[lo:hi] = True
            free -= cost
        else:
            out[i] = False
            free += int(tokens[i])
    return out
