"""What the budget needs to know of each message, kept between requests: its token count, its
content key, its entities and the other half of its turn.

A 10,000-message history comes with every request; counting its tokens and finding its entities
again each time would cost more than the whole assembly may. Like
:class:`smart_context.vectors.chat.ChatVectors`, the facts of the last history are kept, and a
history that starts the same (two list comparisons in C) only adds its new messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.budget.importance import entities
from smart_context.budget.tokens import PER_MESSAGE, Counter
from smart_context.messages import History, message_text
from smart_context.vectors.codec import cache_key

IntArray = npt.NDArray[np.intp]


class MessageFacts:
    """The facts of one chat's last history, under one token counter."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.ids: list[Any] = []
        self.str_ids: list[str] = []  # the ids as text, as the store and the record use them
        self.position: dict[str, int] = {}  # text id -> its last position
        self.contents: list[Any] = []
        self.keys: list[str] = []
        self.roles: list[str] = []
        self.tokens: IntArray = np.zeros(0, dtype=np.intp)
        self.entity_index: dict[str, list[int]] = {}
        self.partner: IntArray = np.zeros(0, dtype=np.intp)
        self.generation = 0  # changes whenever the facts do: memos over them compare it
        # changes only when the facts are read afresh (an edit, a deletion): what holds for the
        # earlier messages, as the stored summaries over them, holds while messages are added
        self.resets = 0

    def update(self, history: History) -> None:
        """Bring the facts to ``history``: only its new messages are read when it extends the
        last one; anything else (an edit, a deletion, another chat) reads it whole."""
        ids, contents = history.ids, history.contents
        known = len(self.ids)
        if not (
            known <= len(ids) and ids[:known] == self.ids and contents[:known] == self.contents
        ):
            generation, resets = self.generation, self.resets
            self.__init__(self.counter)  # type: ignore[misc]
            self.generation, self.resets = generation + 1, resets + 1
            known = 0
        if known == len(ids):
            return
        new = history.messages[known:]
        fresh = [str(i) for i in ids[known:]]
        self.position.update(zip(fresh, range(known, len(ids)), strict=True))
        self.str_ids.extend(fresh)
        texts = [message_text(m) for m in new]
        self.keys.extend(cache_key(str(m.get("id")), t) for m, t in zip(new, texts, strict=True))
        self.roles.extend(str(m.get("role")) for m in new)
        # a message costs its text, its role and the chat format's framing, as prompt_tokens
        roles = self.roles[known:]
        both = self.counter.count([*texts, *roles])
        counts = np.add(both[: len(texts)], both[len(texts) :], dtype=np.intp) + PER_MESSAGE
        self.tokens = np.concatenate((self.tokens, counts))
        for offset, text in enumerate(texts):
            for entity in entities(text):
                self.entity_index.setdefault(entity, []).append(known + offset)
        self.partner = turn_partners(self.roles)
        self.ids, self.contents = list(ids), list(contents)
        self.generation += 1


def turn_partners(roles: Sequence[str]) -> IntArray:
    """For each message, the other half of its turn: a user message's answer right after it,
    an answer's question right before it; -1 when there is none."""
    n = len(roles)
    out = np.full(n, -1, dtype=np.intp)
    user = np.array([r == "user" for r in roles], dtype=bool)
    assistant = np.array([r == "assistant" for r in roles], dtype=bool)
    if n < 2:
        return out
    pairs = np.flatnonzero(user[:-1] & assistant[1:])
    out[pairs] = pairs + 1
    out[pairs + 1] = pairs
    return out
