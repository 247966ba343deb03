"""The background topic pass of one chat, run after replies and when an unmapped chat is opened.

A pass loads the latest chat, brings its embedding file up to date (so the next filter click is
warm) and prunes deleted or edited messages, extracts topics (the fast model, or offline), writes
them through the host (``update_state`` or ``update_chat``: messages appended meanwhile
survive) and tells the UI.

It works with the :class:`TopicPass` it is given, nothing else: the composition root builds one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from smart_context.background import to_thread
from smart_context.chats import STATE_KEY
from smart_context.config import Settings
from smart_context.errors import SmartContextError
from smart_context.events import TOPICS_UPDATED
from smart_context.host import LLM, ChatData, Emit, resolve
from smart_context.messages import ChatTurns, History, Message, pick, turn_positions
from smart_context.paths import ChatId
from smart_context.topics.extract import extract
from smart_context.topics.grow import MAP_KEY, MapState, join_new, needs_full_map, read_state

if TYPE_CHECKING:
    from smart_context.chats import ChatView, ChatViews
    from smart_context.store import Synced, VectorStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicPass:
    """What the topic pass works with."""

    chats: ChatViews  # reads the chat, writes its topics (``ChatViews.update``)
    store: Callable[[], Awaitable[VectorStore]]  # built on first use: a model takes a moment
    settings: Callable[[], Settings]  # read per pass: a command may replace them meanwhile
    llm: LLM  # the fast model that names the topics
    emit: Emit  # tells the UI (``topics_updated``)
    # reads the chat's messages as a History; through the chat's index (history_index), the
    # pass after a reply reads only what the reply added
    history: Callable[[ChatId, Sequence[Message]], History] = lambda _chat, messages: History(
        messages
    )
    turns: ChatTurns = field(default_factory=ChatTurns)  # the real turns as the last pass read


async def refresh(parts: TopicPass, chat_id: ChatId, full: bool = False) -> History:
    """One pass: embed new messages, join them to the chat's map or make the map again
    (:mod:`smart_context.topics.grow` says which; ``full``: the user asked for a new map), write
    the topics, tell the UI. Returns the history it read."""
    data = await parts.chats.load(chat_id)
    everything = [m for m in data.get("messages") or [] if isinstance(m, dict)]
    try:
        history = parts.history(chat_id, everything)
    except SmartContextError:  # refused by the chat's index: read whole, and embedded below
        history = History(everything)
    at, turn_ids = parts.turns.of(chat_id, history)  # past the last pass's only
    turns = pick(everything, at)
    store: VectorStore | None = None
    usable: Synced | None = None  # the turns' vectors, read when asked
    try:
        store = await parts.store()
        # Sync every message the host may put in a history (its notices too), so none is
        # embedded again on the request path; topics come from the real turns only.
        synced = await store.sync_rows(chat_id, history)
        usable = synced.of(np.asarray(at, dtype=np.intp)) if synced.dim else None
    except SmartContextError as exc:
        log.warning("Smart Context: could not embed chat %s: %s", chat_id, exc)
    view = await parts.chats.view(chat_id)
    state = read_state(_ours(data).get(MAP_KEY))
    grow = not full and usable is not None and state is not None and turn_ids
    drifted: MapState | None = None  # the map that drifted, when that is why it is made again
    if grow and not needs_full_map(state, view.topics, turn_ids):
        assert usable is not None and state is not None
        # a 10,000-message chat's join reads thousands of rows: not on the requests' loop
        grown = await to_thread(join_new, view.topics, turns, turn_ids, usable, state)
        if not grown.drifted:
            if grown.state != state or grown.topics != view.topics:
                await _write(parts, chat_id, grown.topics, grown.state, everything, len(turns))
            return history
        drifted = grown.state
        log.info("Smart Context: chat %s drifted from its topic map; mapping it again", chat_id)
    found = await extract(
        parts.llm,
        parts.settings(),
        turns,
        await to_thread(usable.whole) if usable is not None else None,
        view.topics,
        store.phrase_vectors if store is not None else None,
    )
    if found is None:
        return history
    mapped = None
    if turn_ids:
        last, size = turn_ids[-1], len(turn_ids)
        mapped = MapState(last, size) if drifted is None else drifted.after_drift(last, size)
    view = await _write(parts, chat_id, found.to_chat_topics(), mapped, everything, len(turns))
    if store is not None:  # a click on a new bubble then embeds nothing
        try:
            await store.phrase_vectors([q.label for q in view.queries])
        except SmartContextError as exc:
            log.info("Smart Context: topic labels of %s not embedded yet: %s", chat_id, exc)
    return history


async def _write(
    parts: TopicPass,
    chat_id: ChatId,
    topics: list[dict[str, Any]],
    state: MapState | None,
    read: Sequence[Message],
    turns: int,
) -> ChatView:
    """Write the topics and the map's state through the host (messages appended meanwhile
    survive), and tell the UI. ``read``: the messages the pass read, ``turns`` of them real
    turns: the count the UI is told starts from them (:func:`_turns_now`)."""

    def put(data: ChatData) -> ChatData:
        out = {**data, "topics": topics}
        if state is not None:
            out[STATE_KEY] = {**_ours(data), MAP_KEY: state.as_dict()}
        return out

    view = await parts.chats.update(chat_id, put)
    total = _turns_now(view, read, turns)
    payload = {"chat_id": chat_id, "topics": view.topics, "total_messages": total}
    await resolve(parts.emit(TOPICS_UPDATED, payload))
    return view


def _turns_now(view: ChatView, read: Sequence[Message], turns: int) -> int:
    """The chat's real turns as written: the pass's own count plus those among the messages
    appended since it read them, when the chat only grew (its last message read is still in
    place); else counted afresh, a Python step per message."""
    now = view.raw_messages
    if read and len(now) >= len(read) and now[len(read) - 1] == read[-1]:
        return turns + len(turn_positions(now[len(read) :]))
    return view.total_messages


def _ours(data: Mapping[str, Any]) -> dict[str, Any]:
    """Our key on the chat file, or an empty one when it is missing or not a dict."""
    state = data.get(STATE_KEY)
    return dict(state) if isinstance(state, dict) else {}
