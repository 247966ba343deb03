"""A request's context, built in one place.

CONTRACT.md §9 fixes the order of what is sent: system prompt, memory, knowledge, tools, history,
current message. This module is the only one that knows it. Today the plugin shapes one section,
the history: the chat's sticky messages, and, when topics are selected, the messages close to
them (the topic filter). The sections the next systems add (context items, memory, a token
budget) are built here in that order, each from its own module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from smart_context.context.topic_filter import Decision, Selection, decide
from smart_context.errors import SmartContextError
from smart_context.messages import History, Message
from smart_context.paths import ChatId
from smart_context.services import Services


async def assemble(
    services: Services, chat_id: ChatId, history: History, topics: Sequence[str] | None = None
) -> Decision:
    """The history to send for one request and its record; embedding failures leave it whole.

    ``topics`` overrides the chat's selected topics (the command line's "what if").
    """
    view = await services.chats.view(chat_id)
    settings = services.settings
    selected = view.active_topics if topics is None else tuple(topics)
    active = selected if settings.embedding_search else ()
    scores = None
    error = services.config_error
    if active and len(history):
        try:
            store = await services.store()
            scores = await store.chat_scores(chat_id, history, active)
        except SmartContextError as exc:
            error = f"Topic filter skipped: {exc}"
    selection = Selection(active, settings.similarity_threshold, settings.embedding_search, error)
    return decide(history, view.sticky, selection, scores)


async def included(
    services: Services, chat_id: ChatId, messages: Sequence[Message]
) -> tuple[list[Any], str]:
    """Ids of the messages that a request would send now, and the mode."""
    decision = await assemble(services, chat_id, History(messages))
    return [m.get("id") for m in decision.history], decision.record.mode
