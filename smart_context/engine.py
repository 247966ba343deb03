"""Smart Context's state and operations, behind the hooks and commands.

The engine owns the host services, the settings, the vector store and, per chat, what it
needs on every request (topics, sticky messages, the selected topics), so that a request does
not re-read a 10,000-message chat file. The plugin is the only writer of ``topics`` and of its
own ``smart_context`` key on the chat file, so this in-memory view stays true; it is refreshed
whenever a command or the background pass reads the chat anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from smart_context import config
from smart_context.config import Settings
from smart_context.embeddings.base import Embedder
from smart_context.errors import SmartContextError
from smart_context.extraction import Coalescer, extract, rows_or_none
from smart_context.filtering import FULL, Decision, decide
from smart_context.host import resolve
from smart_context.paths import check_chat_id
from smart_context.store import VectorStore

log = logging.getLogger(__name__)

STATE_KEY = "smart_context"  # our key on the chat file: {"active_topics": [...]}
TOPICS_UPDATED = "smart_context.topics_updated"
FILTER_CHANGED = "smart_context.filter_changed"
MIN_MESSAGES_TO_MAP = 4  # fewer messages have no subjects worth a bubble cloud


@dataclass
class ChatView:
    """What a request needs from a chat file, kept in memory."""

    topics: list[dict[str, Any]] = field(default_factory=list)
    sticky: list[dict[str, Any]] = field(default_factory=list)
    active_topics: tuple[str, ...] = ()
    # the turns as last read: what a filter click highlights without re-reading the file
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total_messages(self) -> int:
        return len(self.messages)


def conversation(messages: Any) -> list[dict[str, Any]]:
    """The chat's real turns: user and assistant messages, not a host's notices or errors."""
    if not isinstance(messages, list):
        return []
    return [
        m
        for m in messages
        if isinstance(m, dict)
        and m.get("role") in ("user", "assistant")
        and "notice" not in m
        and "error" not in m
    ]


def clean_topics(raw: Any) -> list[dict[str, Any]]:
    """The stored topic list with anything malformed dropped (another writer may have erred)."""
    if not isinstance(raw, list):
        return []
    return [t for t in raw if isinstance(t, dict) and isinstance(t.get("label"), str)]


def view_of(data: Mapping[str, Any]) -> ChatView:
    """Build a :class:`ChatView` from a loaded chat file."""
    raw_messages = data.get("messages")
    messages: list[Any] = raw_messages if isinstance(raw_messages, list) else []
    topics = clean_topics(data.get("topics"))
    sticky_ids = {str(i) for t in topics if t.get("sticky") for i in (t.get("message_ids") or [])}
    sticky = [m for m in messages if isinstance(m, dict) and str(m.get("id")) in sticky_ids]
    state = data.get(STATE_KEY)
    active = state.get("active_topics", []) if isinstance(state, dict) else []
    active_topics = (
        tuple(t for t in active if isinstance(t, str) and t) if isinstance(active, list) else ()
    )
    return ChatView(topics, sticky, active_topics, conversation(messages))


class Engine:
    """Everything Smart Context does, as coroutines the hooks and commands call."""

    def __init__(self, host: Any, settings: Settings, embedder: Embedder | None = None) -> None:
        self.host = host
        self.settings = settings
        self._embedder = embedder
        self._store: VectorStore | None = None
        self._store_lock = asyncio.Lock()
        self._views: dict[str, ChatView] = {}
        self.current_chat_id: str | None = None
        self.background = Coalescer(self.refresh)
        self._saving = Coalescer(self._save_selection)
        self._picks: dict[str, int] = {}  # selections made per chat, to spot reads they outdate

    async def store(self) -> VectorStore:
        """The vector store, its embedder built on first use (loading a model takes a moment)."""
        async with self._store_lock:
            if self._store is None:
                from smart_context.embeddings.factory import make_embedder

                embedder = self._embedder or await make_embedder(self.settings, self.host)
                self._store = VectorStore(self.host.vault_path, embedder)
            return self._store

    async def load(self, chat_id: str) -> dict[str, Any]:
        """The latest chat file, and the in-memory view refreshed from it."""
        picked = self._picks.get(chat_id, 0)
        data = await resolve(self.host.memory.load_chat(check_chat_id(chat_id)))
        if not isinstance(data, dict):
            raise SmartContextError(f"Chat {chat_id!r} could not be loaded.")
        self._set_view(chat_id, data, picked)
        return data

    def _set_view(self, chat_id: str, data: Mapping[str, Any], picked: int) -> ChatView:
        """Adopt a freshly read chat; ``picked`` is the selection count when the read began."""
        view = view_of(data)
        old = self._views.get(chat_id)
        newer_in_memory = chat_id in self._saving.running or self._picks.get(chat_id, 0) != picked
        if old is not None and newer_in_memory:
            view.active_topics = old.active_topics  # chosen after the file was read
        self._views[chat_id] = view
        return view

    async def view(self, chat_id: str) -> ChatView:
        if chat_id not in self._views:
            await self.load(chat_id)
        return self._views[chat_id]

    def remember_chat(self, chat_id: str) -> str:
        self.current_chat_id = check_chat_id(chat_id)
        return chat_id

    async def decide(
        self,
        chat_id: str,
        history: Sequence[Mapping[str, Any]],
        topics: Sequence[str] | None = None,
    ) -> Decision:
        """The context rule for one request; embedding failures leave the history whole.

        ``topics`` overrides the chat's selected topics (the command line's "what if").
        """
        view = await self.view(chat_id)
        selected = view.active_topics if topics is None else tuple(topics)
        active = selected if self.settings.embedding_search else ()
        scores = None
        error = None
        ids = [m.get("id") for m in history]  # once, for the cache lookup and the rule
        if active and history:
            try:
                store = await self.store()
                scores = await store.topic_scores(chat_id, history, active, ids)
            except SmartContextError as exc:
                error = str(exc)
        decision = decide(
            history,
            view.sticky,
            active,
            scores,
            self.settings.similarity_threshold,
            self.settings.embedding_search,
            ids,
        )
        if error:
            decision.record.update(mode=FULL, error=f"Topic filter skipped: {error}")
        return decision

    async def included(
        self, chat_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Any], str]:
        """Ids of the messages that a request would send now, and the mode."""
        decision = await self.decide(chat_id, messages)
        return [m.get("id") for m in decision.history], str(decision.record["mode"])

    async def set_filter(self, chat_id: str, topics: Sequence[str]) -> dict[str, Any]:
        """Select topics for a chat and tell the UI what is now in context.

        The choice takes effect in memory at once; writing it to the chat file (a full rewrite
        of a possibly large file) happens in the background, latest choice wins.
        """
        view = await self.view(chat_id)
        if not view.messages and not view.topics:
            # a new chat, or a mistyped id: saving a choice would create an empty chat file
            if topics:
                raise SmartContextError(f"Chat {chat_id!r} has no messages to filter.")
            return await self.announce_filter(chat_id)
        view.active_topics = tuple(dict.fromkeys(topics))
        self._picks[chat_id] = self._picks.get(chat_id, 0) + 1
        self._saving.request(chat_id)
        return await self.announce_filter(chat_id)

    async def _save_selection(self, chat_id: str) -> None:
        chosen = list(self._views[chat_id].active_topics)

        def put(data: dict[str, Any]) -> dict[str, Any]:
            state = data.get(STATE_KEY)
            mine = state if isinstance(state, dict) else {}
            return {**data, STATE_KEY: {**mine, "active_topics": chosen}}

        await resolve(self.host.memory.update_chat(chat_id, put))

    async def announce_filter(self, chat_id: str) -> dict[str, Any]:
        """Emit ``filter_changed`` for a chat and return its payload (plus the mode)."""
        view = await self.view(chat_id)
        ids, mode = await self.included(chat_id, view.messages)
        active = list(view.active_topics) if self.settings.embedding_search else []
        payload = {
            "chat_id": chat_id,
            "active_topics": active,
            "included_ids": ids,
            "total_messages": view.total_messages,
        }
        await resolve(self.host.emit(FILTER_CHANGED, payload))
        return payload | {"mode": mode}

    async def topics(self, chat_id: str) -> dict[str, Any]:
        """The chat's topics and filter state, for the panel.

        A chat with substance but no topics yet (a vault made elsewhere, or before the plugin was
        installed) is mapped in the background now; ``topics_updated`` follows.
        """
        await self.load(chat_id)
        view = self._views[chat_id]
        ids, mode = await self.included(chat_id, view.messages)
        mapping = not view.topics and len(ids) >= MIN_MESSAGES_TO_MAP
        if mapping:
            self.schedule_refresh(chat_id)
        return {
            "chat_id": chat_id,
            "topics": view.topics,
            "total_messages": view.total_messages,
            "active_topics": list(view.active_topics),
            "included_ids": ids,
            "mode": mode,
            "embedding_search": self.settings.embedding_search,
            "extracting": mapping or chat_id in self.background.running,
        }

    async def set_search(self, enabled: bool) -> str | None:
        """Turn the topic filter on or off; returns a warning if ``.vault.toml`` was not updated."""
        self.settings = config.replace(self.settings, embedding_search=enabled)
        warning = None
        try:
            await asyncio.to_thread(
                config.write_setting, self.host.vault_path, "embedding_search", enabled
            )
        except (OSError, SmartContextError) as exc:
            warning = (
                f"Similarity mode changed for this session, but .vault.toml was not updated: {exc}"
            )
        if self.current_chat_id:
            await self.announce_filter(self.current_chat_id)
        return warning

    def schedule_refresh(self, chat_id: str) -> None:
        self.background.request(chat_id)

    async def refresh(self, chat_id: str) -> None:
        """The background pass: embed new messages, extract topics, write them, tell the UI."""
        data = await self.load(chat_id)
        everything = [m for m in data.get("messages") or [] if isinstance(m, dict)]
        turns = conversation(everything)
        vectors = None
        store = None
        try:
            store = await self.store()
            # Sync every message the host may put in a history (its notices too), so none is
            # embedded again on the request path; topics come from the real turns only.
            all_vectors = await store.sync(chat_id, everything)
            is_turn = {id(m) for m in turns}
            vectors = all_vectors[[i for i, m in enumerate(everything) if id(m) in is_turn]]
        except SmartContextError as exc:
            log.warning("Smart Context: could not embed chat %s: %s", chat_id, exc)
        found = await extract(
            self.host.llm,
            self.settings,
            turns,
            rows_or_none(vectors),
            self._views[chat_id].topics,
            store.label_vectors if store is not None else None,
        )
        if found is None:
            return
        new_topics = found.to_chat_topics()
        picked = self._picks.get(chat_id, 0)
        latest = await resolve(
            self.host.memory.update_chat(chat_id, lambda d: {**d, "topics": new_topics})
        )
        latest = latest if isinstance(latest, dict) else await self.load(chat_id)
        view = self._set_view(chat_id, latest, picked)
        await resolve(
            self.host.emit(
                TOPICS_UPDATED,
                {"chat_id": chat_id, "topics": view.topics, "total_messages": view.total_messages},
            )
        )

    async def settle(self, timeout: float = 10.0) -> None:
        """Let background work (topic passes, saving selections) finish."""
        await self.background.drain(timeout)
        await self._saving.drain(timeout)

    async def close(self) -> None:
        await self.settle()
        if self._store is not None:
            self._store.flush()
