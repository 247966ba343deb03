"""One request's plan: what every section of the request reads, made once per request.

A request has several sections that search by the message (agent items, the vault's notes, the
budget's look for relevant history) and several that count tokens (the allocator, the notes'
room, the budget, usage). Each used to split the message into sentences, embed them "if not
done yet" and ask for the budget's limit on its own. The plan holds them once:

- the chat and its history as the host sent it (one :class:`~smart_context.messages.History`,
  its ids read once);
- the message, its sentences (query chunking) and their vectors, embedded on first
  use and shared by every section that searches (:class:`MessageQuery`);
- the chat model's token counter and the budget's limit (0: no budget), and whether the host's
  model takes tools;
- what the request reads from the memory store and the vault's files (:class:`Looked`): the
  store's answers (:mod:`smart_context.memory.reads`) and the stamps of the item and note
  files, read when the plan is made. On the event loop when the store can answer at once
  and there are few files to stat (:func:`look_now`), else in one trip to a worker thread
  that runs while the topic rule does.
  A trip costs a hand-off and a wake-up, far more on a busy machine than the reads themselves;
  reading on the loop must never wait, for another thread or another process;
- with such a budget, the budget's dense search, and with it the message's embedding, started
  with the plan so that they run while the topic rule and the sections do.

The request path reads it top to bottom: ``plugin.pipeline_context`` makes the plan,
``context.assemble.assemble`` applies the topic rule, ``context.assemble.request_items`` builds
the sections and decides under the budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from smart_context.background import to_thread
from smart_context.budget.tokens import Counter
from smart_context.errors import SmartContextError
from smart_context.items.files import Stamp
from smart_context.items.query import MessageQuery
from smart_context.knowledge.notes import Scan
from smart_context.memory.db import MemoryDB
from smart_context.memory.reads import ChatReads, read_chat
from smart_context.messages import History
from smart_context.paths import ChatId
from smart_context.vectors.ops import Scores


@dataclass(frozen=True)
class Looked:
    """What one request read from the store and the files (module docstring)."""

    reads: ChatReads  # the memory store's answers
    items: Stamp  # the item files (ItemCatalog.look)
    notes: Scan | None  # the note files (KnowledgeIndex.look); None: the request does not look


@dataclass(frozen=True)
class Look:
    """What one request reads, and from where: the store's answers for the chat (``budget``:
    whether the request has one, see :func:`~smart_context.memory.reads.read_chat`) and the
    stamps of the item and note files."""

    db: MemoryDB
    chat_id: str
    budget: bool
    items: Callable[[], Stamp]
    notes: Callable[[], Scan | None]


def look(what: Look) -> Looked:
    """The request's one trip off the loop (run it in a worker thread); never raises for a
    store that fails or a file that cannot be read: each part says so in its own way."""
    reads = read_chat(what.db, what.chat_id, what.budget)
    return Looked(reads, what.items(), what.notes())


QUICK_FILES = 50  # item or note files a request stats on the event loop, at most (about 0.2 ms)


def look_now(what: Look) -> Looked | None:
    """:func:`look` made on the event loop, when the store can answer at once
    (:meth:`MemoryDB.at_once`); ``None`` when it cannot (another thread of the process is
    using it, or another process would make it wait): then make the trip. The caller makes
    sure the files to stat are few (:data:`QUICK_FILES`).

    The trip costs more than the reads: the hand-off, and the worker's wait for the GIL while
    the loop runs the topic rule: 0.4 to 1 ms a request more than reading here on a 2-core
    machine (measured by a benchmark since removed, docs/benchmarks.md), where the reads take
    about 0.1 ms."""
    db = what.db
    with db.at_once() as ready:
        if not ready:
            return None
        try:
            reads = read_chat(db, what.chat_id, what.budget, guard=False)
        except SmartContextError:
            return None
    return Looked(reads, what.items(), what.notes())


async def look_soon(what: Look, few_files: bool) -> Looked:
    """:func:`look_now` (when ``few_files`` to stat) at the event loop's next turn, else
    the trip. Run as a task made after those the plan started (the message's embedding): they
    take their first steps before it, so the embedding is sent off (to its thread, or the
    network) before the reads hold the loop, not after."""
    now = look_now(what) if few_files else None
    return now if now is not None else await to_thread(look, what)


@dataclass(frozen=True)
class RequestPlan:
    """What one request's sections read (module docstring)."""

    chat_id: ChatId
    history: History
    query: MessageQuery
    counter: Counter
    limit: int  # the budget's limit for this model; 0: no budget
    looked: asyncio.Future[Looked]  # done, or under way in a worker thread
    model: str | None = None  # the host's chat model, when it says
    takes_tools: bool = True  # the host's word on its chat model
    # with a budget: each message's best cosine to the message's sentences (the budget's
    # dense search), under way while the topic rule and the sections run
    dense: asyncio.Future[Scores] | None = None

    @property
    def message(self) -> str:
        return self.query.text
