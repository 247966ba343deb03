"""What one request reads from the memory store, in one go.

A request used to make a worker-thread trip for each read: the chat's direct messages and its
memories (the memory section) and the messages the user marked important (the budget). Each
trip costs the loop a hand-off and a wake-up, about 0.1 ms on an idle machine and far more on a
busy one, while the statements themselves take microseconds.
:func:`read_chat` makes them all in one trip, started when the request's plan is made, so the
store works while the topic rule runs; each section awaits the part it uses. A request whose
store can answer at once makes them on the event loop instead
(:func:`smart_context.context.plan.look_now`).

A read that fails (the store locked by another process past its timeout, damaged under us)
costs only its own part, with a log line: the request goes on without it (on the loop, it is
made again in the trip instead).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from smart_context.errors import SmartContextError
from smart_context.memory.db import MemoryDB
from smart_context.memory.records import DirectMessage, Memory

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ChatReads:
    """The store's answers for one request; ``failed`` names the parts that could not be read."""

    direct: list[DirectMessage] = field(default_factory=list)
    memories: list[Memory] = field(default_factory=list)
    marks: set[str] = field(default_factory=set)
    failed: tuple[str, ...] = ()


def read_chat(db: MemoryDB, chat_id: str, budget: bool, guard: bool = True) -> ChatReads:
    """Every read of one request (module docstring). ``budget``: whether the request has a
    budget, which reads the marks (else they are not read). ``guard`` false: a read that fails
    raises instead (the caller tries again another way)."""
    failed: list[str] = []

    def guarded(part: str, default: T, call: Callable[[], T]) -> T:
        if not guard:
            return call()
        try:
            return call()
        except SmartContextError as exc:
            log.warning("Smart Context: the request goes on without %s: %s", part, exc)
            failed.append(part)
            return default

    no_direct: list[DirectMessage] = []
    no_memories: list[Memory] = []
    marks: set[str] = set()
    direct = guarded("the direct messages", no_direct, lambda: db.live_direct(chat_id))
    memories = guarded("the memories", no_memories, lambda: db.memories(chat_id))
    if budget:
        marks = guarded("the important marks", marks, lambda: db.marks(chat_id))
    return ChatReads(direct, memories, marks, tuple(failed))
