"""The plugin's running parts, wired once in ``sidecar_startup`` and shared by hooks and commands.

Each job lives in its own module; this is only where they meet: the host, the settings, the
chat views, the vector store (built on first use: loading a model takes a moment) and the
background passes, each handed the parts it uses (:class:`TopicPass`, :class:`MemoryPass`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from smart_context.background import Coalescer
from smart_context.budget.budgeter import Budgeter
from smart_context.budget.cache_seen import CacheSeen
from smart_context.budget.calibration import Calibration
from smart_context.chats import ChatViews
from smart_context.config import Settings
from smart_context.context.layout import Frames
from smart_context.context.usage import UsageMeter
from smart_context.embeddings.base import Embedder
from smart_context.errors import SmartContextError
from smart_context.events import MEMORY_PROGRESS
from smart_context.history_index import HistoryIndexes
from smart_context.host import Host, resolve
from smart_context.items.catalog import ItemCatalog
from smart_context.knowledge.index import KnowledgeIndex
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import MemoryPass, refresh_memory
from smart_context.memory.unsent import UnsentLog
from smart_context.messages import History
from smart_context.paths import ChatId
from smart_context.store import VectorStore
from smart_context.topics.refresh import TopicPass, refresh

log = logging.getLogger("smart_context")


class Services:
    """What hooks and commands work with."""

    def __init__(
        self,
        host: Host,
        settings: Settings,
        embedder: Embedder | None = None,
        config_error: str | None = None,
    ) -> None:
        self.host = host
        self.settings = settings
        # a bad setting: the filter is off and every record and the panel say why
        self.config_error = config_error
        self.chats = ChatViews(host.memory)
        self.items = ItemCatalog(host.vault_path, settings.rules_dir, settings.references_dir)
        self.current_chat_id: ChatId | None = None
        self.histories = HistoryIndexes()  # each chat's history as its requests brought it
        self.frames = Frames()  # each chat's cache-stable layout between cuts
        self.cache_seen = CacheSeen()  # what the upstreams' replies said of their caches
        self.clock: Callable[[], float] = time.time  # when a cached prefix went cold
        self.topic_pass = TopicPass(
            chats=self.chats,
            store=self.store,
            settings=lambda: self.settings,  # set_similarity_mode replaces them
            llm=host.llm,
            emit=host.emit,
            history=self.histories.read,
        )
        self.background: Coalescer[ChatId] = Coalescer(self._after_reply)
        # the vault's notes (the knowledge base), indexed in the background
        self.knowledge = KnowledgeIndex(
            host.vault_path,
            settings.knowledge_folders,
            (settings.rules_dir, settings.references_dir),
        )
        self.knowledge.on_behind = self.index_knowledge
        self.knowledge.on_stale = lambda: self.indexing.request("notes")
        self.indexing: Coalescer[str] = Coalescer(self._index)
        self.items.servers.on_listed = self.index_items
        # long memory (docs/contract.md §9): the SQLite store, the budget, and its pass after
        # replies
        self.memory_db = MemoryDB(host.vault_path)
        # the token estimates of models without an offline tokenizer, as servers corrected them
        self.calibration = Calibration(host.vault_path)
        self.calibration.load()
        self.budget = Budgeter(settings, self.memory_db, self.calibration.estimates)
        self.usage = UsageMeter(self.budget)
        self.memory_pass = MemoryPass(
            chats=self.chats,
            db=self.memory_db,
            settings=lambda: self.settings,
            llm=host.llm,
            emit=host.emit,
            summaries_made=self._summaries_made,
            verify=self.histories.verify,
        )
        self.remembering: Coalescer[ChatId] = Coalescer(
            lambda chat_id: refresh_memory(self.memory_pass, chat_id)
        )
        self.unsent = UnsentLog()  # where the chat model's look back searches
        # the chat's topic click made after a reply's pass, for the next request (the plugin
        # sets it: context.assemble.click_ahead, which reads these services)
        self.click_ahead: Callable[[ChatId, History], Awaitable[None]] | None = None
        self._embedder = embedder
        self._store: VectorStore | None = None
        self._store_lock = asyncio.Lock()

    async def store(self) -> VectorStore:
        """The vector store, its embedder built on first use."""
        async with self._store_lock:
            if self._store is None:
                from smart_context.embeddings.factory import make_embedder

                embedder = self._embedder or await make_embedder(self.settings, self.host)
                self._store = VectorStore(self.host.vault_path, embedder)
            return self._store

    async def _after_reply(self, chat_id: ChatId) -> None:
        """The topic pass after a reply, then the next request's topic click, made ahead."""
        history = await refresh(self.topic_pass, chat_id)
        if self.click_ahead is not None:
            await self.click_ahead(chat_id, history)

    async def _summaries_made(self, chat_id: ChatId, covered: int) -> None:
        """New summaries of the chat's first ``covered`` messages: the budget plans its spans
        again, here in the background rather than in the next request."""
        await self.budget.summaries_changed(chat_id, covered)

    def index_items(self) -> None:
        """Embed the vault's new items in the background, so no request waits for it."""
        self.indexing.request("items")

    def index_knowledge(self) -> None:
        """Embed the vault's notes that have no vectors yet, in the background."""
        if self.settings.knowledge_folders and self.settings.knowledge_top_n:
            self.indexing.request("knowledge")

    async def _index(self, what: str) -> None:
        if what == "notes":  # a look at the files of a large vault: nothing to embed
            await self.knowledge.rescan()
            return
        try:
            store = await self.store()
            if what == "items":
                await self.items.index(store)
            else:
                await self.knowledge.index(store, self._knowledge_progress)
        except SmartContextError as exc:  # the request will say so, if it is still true then
            log.warning("Smart Context: %s not indexed ahead: %s", what, exc)

    async def _knowledge_progress(self, done: int, total: int) -> None:
        """The notes being indexed, for the panel's progress indicator (every chat's)."""
        payload = {"chat_id": None, "what": "notes", "done": done, "total": total}
        await resolve(self.host.emit(MEMORY_PROGRESS, payload))

    def schedule_refresh(self, chat_id: ChatId) -> None:
        """Map the chat's topics again and bring its long memory up to date, in the
        background (bursts coalesce)."""
        self.background.request(chat_id)
        self.remembering.request(chat_id)

    async def settle(self, timeout: float = 10.0) -> None:
        """Let background work (topic passes, saving selections) finish."""
        await self.background.drain(timeout)
        await self.remembering.drain(timeout)
        await self.indexing.drain(timeout)
        await self.chats.settle(timeout)

    async def close(self) -> None:
        """Finish background work and save every changed embedding file. Indexing items ahead
        is only a head start: it is stopped, not waited for (the next start goes on)."""
        await self.indexing.drain(timeout=0.5)
        await self.items.servers.close()
        await self.settle()
        if self._store is not None:
            self._store.flush()
        self.memory_db.close()
