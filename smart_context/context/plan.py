"""One request's plan: what every section of the request reads, made once per request.

A request has several sections that search by the message (agent items, the vault's notes, the
budget's look for relevant history) and several that count tokens (the allocator, the notes'
room, the budget, usage). Each used to split the message into sentences, embed them "if not
done yet" and ask for the budget's limit on its own. The plan holds them once:

- the chat and its history as the host sent it (one :class:`~smart_context.messages.History`,
  its ids read once);
- the message, its sentences (seed 000's query chunking) and their vectors, embedded on first
  use and shared by every section that searches (:class:`MessageQuery`);
- the chat model's token counter and the budget's limit (0: no budget), and whether the host's
  model takes tools;
- the memory store's answers for the request (:mod:`smart_context.memory.reads`), read in one
  trip off the loop that starts with the plan.

The request path reads it top to bottom: ``plugin.pipeline_context`` makes the plan,
``context.assemble.assemble`` applies the topic rule, ``context.assemble.request_items`` builds
the sections and decides under the budget.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from smart_context.budget.tokens import Counter
from smart_context.items.query import MessageQuery
from smart_context.memory.reads import ChatReads
from smart_context.messages import History
from smart_context.paths import ChatId


@dataclass(frozen=True)
class RequestPlan:
    """What one request's sections read (module docstring)."""

    chat_id: ChatId
    history: History
    query: MessageQuery
    counter: Counter
    limit: int  # the budget's limit for this model; 0: no budget
    reads: asyncio.Future[ChatReads]  # under way while the topic rule runs
    model: str | None = None  # the host's chat model, when it says
    takes_tools: bool = True  # the host's word on its chat model

    @property
    def message(self) -> str:
        return self.query.text
