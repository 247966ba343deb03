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
- what the request reads off the event loop, in one trip that starts with the plan while the
  topic rule runs (:class:`Looked`): the memory store's answers
  (:mod:`smart_context.memory.reads`) and the stamps of the vault's item and note files. Each
  trip to a worker thread costs a hand-off and a wake-up, far more on a busy machine than the
  reads themselves.

The request path reads it top to bottom: ``plugin.pipeline_context`` makes the plan,
``context.assemble.assemble`` applies the topic rule, ``context.assemble.request_items`` builds
the sections and decides under the budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from smart_context.budget.tokens import Counter
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
    """What one request read off the loop (module docstring)."""

    reads: ChatReads  # the memory store's answers
    items: Stamp  # the item files (ItemCatalog.look)
    notes: Scan | None  # the note files (KnowledgeIndex.look); None: the request does not look


def look(
    db: MemoryDB,
    chat_id: str,
    message: str,
    search: int,
    items: Callable[[], Stamp],
    notes: Callable[[], Scan | None],
    checked: Sequence[tuple[str, str]] = (),
) -> Looked:
    """The request's one trip off the loop (run it in a worker thread); never raises for a
    store that fails or a file that cannot be read: each part says so in its own way.
    ``checked``: see :func:`~smart_context.memory.reads.read_chat`."""
    return Looked(read_chat(db, chat_id, message, search, checked), items(), notes())


@dataclass(frozen=True)
class RequestPlan:
    """What one request's sections read (module docstring)."""

    chat_id: ChatId
    history: History
    query: MessageQuery
    counter: Counter
    limit: int  # the budget's limit for this model; 0: no budget
    looked: asyncio.Future[Looked]  # under way while the topic rule runs
    model: str | None = None  # the host's chat model, when it says
    takes_tools: bool = True  # the host's word on its chat model
    # with a budget: each message's best cosine to the message's sentences (the budget's
    # dense search), under way while the topic rule and the sections run
    dense: asyncio.Future[Scores] | None = None

    @property
    def message(self) -> str:
        return self.query.text
