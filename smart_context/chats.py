"""What a request needs from each chat file, kept in memory, and the selected topics.

A request must not re-read a 10,000-message chat file. In one process the plugin is the only
writer of ``topics`` and of its own ``smart_context`` key on the chat file, so the in-memory
view stays true; it is refreshed whenever a command or the background pass reads the chat
anyway. Another process on the same vault (``serve``'s page beside ``smart-context proxy``) may
change them too: a host that can say cheaply what a chat's other keys are now
(``memory.chat_state``, optional) lets :meth:`ChatViews.view` see such a change and read the
chat again; without it the view follows the next read.

A topic click takes effect in memory at once; writing it to the chat file (a full rewrite of a
possibly large file) happens in the background, the latest choice winning. A read that began
before a click must not undo it: each chat counts its clicks, and a read adopts the file's
selection only if no click happened while it was under way.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from smart_context.background import Coalescer
from smart_context.context.topic_scores import TopicQuery
from smart_context.errors import SmartContextError
from smart_context.host import ChatData, Memory, resolve
from smart_context.messages import conversation
from smart_context.paths import ChatId

STATE_KEY = "smart_context"  # our key on the chat file: {"active_topics": [...]}


@dataclass
class ChatView:
    """What a request needs from a chat file, kept in memory."""

    topics: list[dict[str, Any]] = field(default_factory=list)
    sticky: list[dict[str, Any]] = field(default_factory=list)
    active_topics: tuple[str, ...] = ()
    # the file's messages as last read (``messages`` picks the turns from them when first asked)
    raw_messages: list[Any] = field(default_factory=list, repr=False)
    # the regular topics as a click scores them (label and members), built once per read
    queries: tuple[TopicQuery, ...] = ()
    # the chat's ``context_items`` as stored (None: not yet written, the vault's seed applies)
    session: Any = None
    # the chat's ``context_settings`` as stored: its overrides of the selection settings
    context_settings: Any = None

    @functools.cached_property
    def messages(self) -> list[dict[str, Any]]:
        """The turns as last read: what a filter click highlights without re-reading the file
        (picked on first use: a write's new view is often never asked, and picking the turns
        of a 10,000-message chat is a Python step each)."""
        return conversation(self.raw_messages)

    @property
    def total_messages(self) -> int:
        return len(self.messages)


def clean_topics(raw: Any) -> list[dict[str, Any]]:
    """The stored topic list with anything malformed dropped (another writer may have erred)."""
    if not isinstance(raw, list):
        return []
    return [t for t in raw if isinstance(t, dict) and isinstance(t.get("label"), str)]


def signature(data: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a chat file's keys other than its messages a view is built from, cheap to
    compare: the selection, the session and its settings, and each topic's label, count and
    number of members (a map made again elsewhere changes them)."""
    state = data.get(STATE_KEY)
    active = state.get("active_topics") if isinstance(state, dict) else None
    topics = data.get("topics")
    marks = (
        tuple(
            (
                t.get("label"),
                t.get("count"),
                bool(t.get("sticky")),
                len(t["message_ids"]) if isinstance(t.get("message_ids"), list) else 0,
            )
            for t in topics
            if isinstance(t, dict)
        )
        if isinstance(topics, list)
        else ()
    )
    return (
        repr(active),
        repr(data.get("context_items")),
        repr(data.get("context_settings")),
        marks,
    )


def view_of(data: Mapping[str, Any], previous: ChatView | None = None) -> ChatView:
    """Build a :class:`ChatView` from a loaded chat file. A topic whose members are those of
    ``previous`` (the chat's view before) keeps its :class:`TopicQuery`: the member sets of a
    10,000-message chat's topics are not built again on every read and write of the file."""
    raw_messages = data.get("messages")
    messages: list[Any] = raw_messages if isinstance(raw_messages, list) else []
    topics = clean_topics(data.get("topics"))
    sticky_ids = {str(i) for t in topics if t.get("sticky") for i in (t.get("message_ids") or [])}
    sticky = (  # no scan of a long chat without sticky messages (most chats); copies: they
        # go into requests, and ``data`` may be the host's own (memory.chat_snapshot)
        [dict(m) for m in messages if isinstance(m, dict) and str(m.get("id")) in sticky_ids]
        if sticky_ids
        else []
    )
    state = data.get(STATE_KEY)
    active = state.get("active_topics", []) if isinstance(state, dict) else []
    active_topics = (
        tuple(t for t in active if isinstance(t, str) and t) if isinstance(active, list) else ()
    )
    known = _queries_of(previous) if previous is not None else {}
    queries = tuple(_query(t, known) for t in topics if not t.get("sticky"))
    return ChatView(
        topics,
        sticky,
        active_topics,
        messages,
        queries,
        data.get("context_items"),
        data.get("context_settings"),
    )


def _queries_of(view: ChatView) -> dict[str, tuple[Any, TopicQuery]]:
    """A view's regular topics by label: their members as stored, and their query."""
    regular = [t for t in view.topics if not t.get("sticky")]
    if len(regular) != len(view.queries):  # a view made by hand
        return {}
    pairs = zip(regular, view.queries, strict=True)
    return {t["label"]: (t.get("message_ids"), q) for t, q in pairs if q.label == t["label"]}


def _query(topic: Mapping[str, Any], known: Mapping[str, tuple[Any, TopicQuery]]) -> TopicQuery:
    ids = topic.get("message_ids")
    before = known.get(topic["label"])
    if before is not None and isinstance(ids, list) and before[0] == ids:
        return before[1]
    return TopicQuery(
        topic["label"], frozenset(map(str, ids)) if isinstance(ids, list) else frozenset()
    )


class ChatViews:
    """The in-memory view of every chat the plugin has seen, read through ``host.memory``."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self._views: dict[ChatId, ChatView] = {}
        self._saving: Coalescer[ChatId] = Coalescer(self._save_selection)
        self._clicks: dict[ChatId, int] = {}  # selections made per chat, to spot reads they outdate
        # reads under way, each with the count of our writes when it began (see :meth:`load`)
        self._reading: dict[ChatId, tuple[int, asyncio.Future[ChatData]]] = {}
        self._writes = 0
        self._signatures: dict[ChatId, tuple[Any, ...]] = {}  # of the file each view was built from

    def clicks(self, chat_id: ChatId) -> int:
        """How many selections were made in ``chat_id``: count before a read, for :meth:`adopt`."""
        return self._clicks.get(chat_id, 0)

    async def load(self, chat_id: ChatId) -> ChatData:
        """The latest chat file, and the in-memory view refreshed from it.

        A caller that asks while a read of the chat is under way, with none of our writes since
        it began, shares that read: the two passes after a reply start together, and reading a
        10,000-message file costs each of them some 15 ms of CPU (none from a host's
        ``chat_snapshot``). Treat the result as read-only.
        """
        running = self._reading.get(chat_id)
        if running is not None and running[0] == self._writes:
            return await asyncio.shield(running[1])
        entry = self._reading[chat_id] = (self._writes, asyncio.ensure_future(self._read(chat_id)))
        try:
            return await asyncio.shield(entry[1])
        finally:
            if self._reading.get(chat_id) is entry:  # not a later read's
                del self._reading[chat_id]

    async def _read(self, chat_id: ChatId) -> ChatData:
        clicks = self.clicks(chat_id)
        # a host that can hand its own copy to read spares copying every message
        read = getattr(self.memory, "chat_snapshot", None) or self.memory.load_chat
        data = await resolve(read(chat_id))
        if not isinstance(data, dict):
            raise SmartContextError(f"Chat {chat_id!r} could not be loaded.")
        self.adopt(chat_id, data, clicks)
        return data

    def adopt(self, chat_id: ChatId, data: Mapping[str, Any], clicks: int) -> ChatView:
        """Adopt a freshly read chat; ``clicks`` is :meth:`clicks` from when the read began."""
        old = self._views.get(chat_id)
        view = view_of(data, old)
        newer_in_memory = chat_id in self._saving.running or self.clicks(chat_id) != clicks
        if old is not None and newer_in_memory:
            view.active_topics = old.active_topics  # chosen after the file was read
        self._views[chat_id] = view
        self._signatures[chat_id] = signature(data)
        return view

    async def update(self, chat_id: ChatId, put: Callable[[ChatData], ChatData]) -> ChatView:
        """Change the chat file's keys through the host (``put`` gets the latest content and
        returns the new; it never changes the messages, which a host with ``update_state``
        does not even give it), then adopt what was written: a request after this sees it."""
        clicks = self.clicks(chat_id)
        self._writes += 1
        latest: Any = await resolve(self._writer()(chat_id, put))
        if isinstance(latest, dict):
            return self.adopt(chat_id, latest, clicks)
        await self.load(chat_id)  # a host whose update_chat returns nothing: read it back
        return self._views[chat_id]

    def _writer(self) -> Callable[[ChatId, Callable[[ChatData], ChatData]], Any]:
        """How the chat's keys are written: the host's ``update_state`` (the messages left
        alone, in place), else its ``update_chat``."""
        return getattr(self.memory, "update_state", None) or self.memory.update_chat

    async def view(self, chat_id: ChatId, fresh: bool = True) -> ChatView:
        """The chat's view, read from the host the first time, and again when another writer
        changed what it is built from (``fresh``; a caller that just asked passes False)."""
        if chat_id not in self._views or (fresh and await self._changed_elsewhere(chat_id)):
            await self.load(chat_id)
        return self._views[chat_id]

    async def _changed_elsewhere(self, chat_id: ChatId) -> bool:
        """Whether the chat file's selection, session, settings or topics are no longer those
        the view was built from, as far as a host with ``memory.chat_state`` can tell cheaply.
        A selection of ours still being saved is newer than the file: no."""
        state_of = getattr(self.memory, "chat_state", None)
        if state_of is None or chat_id in self._saving.running:
            return False
        try:
            state = await resolve(state_of(chat_id))
        except (SmartContextError, OSError, ValueError):  # the read that follows says why
            return True
        return isinstance(state, Mapping) and signature(state) != self._signatures.get(chat_id)

    def select(self, chat_id: ChatId, topics: Sequence[str]) -> None:
        """Select topics in memory now; the chat file follows in the background."""
        self._views[chat_id].active_topics = tuple(dict.fromkeys(topics))
        self._clicks[chat_id] = self.clicks(chat_id) + 1
        self._saving.request(chat_id)

    async def _save_selection(self, chat_id: ChatId) -> None:
        chosen = list(self._views[chat_id].active_topics)

        def put(data: ChatData) -> ChatData:
            state = data.get(STATE_KEY)
            mine = state if isinstance(state, dict) else {}
            return {**data, STATE_KEY: {**mine, "active_topics": chosen}}

        self._writes += 1
        latest = await resolve(self._writer()(chat_id, put))
        if isinstance(latest, dict) and self._views[chat_id].active_topics == tuple(chosen):
            self._signatures[chat_id] = signature(latest)  # our own write: nothing new there

    async def settle(self, timeout: float) -> None:
        """Let selections being saved reach the chat file."""
        await self._saving.drain(timeout)
