"""The background topic pass of one chat, run after replies and when an unmapped chat is opened.

A pass loads the latest chat, brings its embedding file up to date (so the next filter click is
warm) and prunes deleted or edited messages, extracts topics (the fast model, or offline), writes
them with ``update_chat`` (messages appended meanwhile survive) and tells the UI.

It works with the :class:`TopicPass` it is given, nothing else: the composition root builds one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from smart_context.config import Settings
from smart_context.errors import SmartContextError
from smart_context.events import TOPICS_UPDATED
from smart_context.host import LLM, Emit, resolve
from smart_context.messages import conversation
from smart_context.paths import ChatId
from smart_context.topics.extract import extract
from smart_context.vectors.ops import Matrix

if TYPE_CHECKING:
    from smart_context.chats import ChatViews
    from smart_context.store import VectorStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicPass:
    """What the topic pass works with."""

    chats: ChatViews  # reads the chat, writes its topics with ``update_chat``
    store: Callable[[], Awaitable[VectorStore]]  # built on first use: a model takes a moment
    settings: Callable[[], Settings]  # read per pass: a command may replace them meanwhile
    llm: LLM  # the fast model that names the topics
    emit: Emit  # tells the UI (``topics_updated``)


class HasTopicPass(Protocol):
    """Something holding a wired :class:`TopicPass` (the composition root)."""

    @property
    def topic_pass(self) -> TopicPass: ...


async def refresh(parts: TopicPass | HasTopicPass, chat_id: ChatId) -> None:
    """One pass: embed new messages, extract topics, write them, tell the UI.

    ``refresh(services, chat_id)``, the CLI's call from before the pass had its own parts, is
    still understood until the CLI moves out of the package; new code passes the
    :class:`TopicPass`."""
    if not isinstance(parts, TopicPass):
        parts = parts.topic_pass
    data = await parts.chats.load(chat_id)
    everything = [m for m in data.get("messages") or [] if isinstance(m, dict)]
    turns = conversation(everything)
    store: VectorStore | None = None
    vectors = None
    try:
        store = await parts.store()
        # Sync every message the host may put in a history (its notices too), so none is
        # embedded again on the request path; topics come from the real turns only.
        all_vectors = await store.sync_chat(chat_id, everything)
        is_turn = {id(m) for m in turns}
        vectors = all_vectors[[i for i, m in enumerate(everything) if id(m) in is_turn]]
    except SmartContextError as exc:
        log.warning("Smart Context: could not embed chat %s: %s", chat_id, exc)
    view = await parts.chats.view(chat_id)
    found = await extract(
        parts.llm,
        parts.settings(),
        turns,
        _usable(vectors),
        view.topics,
        store.phrase_vectors if store is not None else None,
    )
    if found is None:
        return
    new_topics = found.to_chat_topics()
    view = await parts.chats.update(chat_id, lambda d: {**d, "topics": new_topics})
    payload = {"chat_id": chat_id, "topics": view.topics, "total_messages": view.total_messages}
    await resolve(parts.emit(TOPICS_UPDATED, payload))
    if store is not None:  # a click on a new bubble then embeds nothing
        try:
            await store.phrase_vectors([q.label for q in view.queries])
        except SmartContextError as exc:
            log.info("Smart Context: topic labels of %s not embedded yet: %s", chat_id, exc)


def _usable(vectors: Matrix | None) -> Matrix | None:
    """Vectors usable by the offline extractor (non-empty 2-D), else ``None``."""
    if vectors is None or vectors.ndim != 2 or vectors.shape[1] == 0:
        return None
    return np.asarray(vectors, dtype=np.float32)
