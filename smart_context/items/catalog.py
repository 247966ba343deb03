"""The vault's items as a request sees them: loaded again only when a file changed, chunked
once, embedded once per chunk text, and searched for one message.

Rules and references come from the vault's folders (:mod:`.files`); an edit on disk is seen on
the next call (one ``stat`` per file). Tools come from the MCP servers' last known tool
lists (:mod:`.servers`), which are refreshed in the background. Chunk vectors are the store's
``items`` collection, saved in ``.memory/smart_context/items.embeddings.json`` and keyed by
chunk content, so an edited item is embedded again and nothing else is (
incremental updates).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from smart_context.background import to_thread
from smart_context.items.chunks import chunk
from smart_context.items.expand import expand, relationship_graph
from smart_context.items.files import Stamp, folder_stamp, load_items
from smart_context.items.lexical import LexicalIndex, hybrid_scores
from smart_context.items.model import ITEM_TYPES, Item, ItemProblem, index_text
from smart_context.items.query import MessageQuery
from smart_context.items.select import Limits, select
from smart_context.items.servers import ToolServers
from smart_context.paths import memory_dir
from smart_context.store import VectorStore
from smart_context.vectors.int8 import CodedOnce
from smart_context.vectors.ops import Matrix

COLLECTION = "items"


def items_vectors_file(vault: Path) -> Path:
    """Where the chunk vectors of the vault's items are kept."""
    return memory_dir(vault) / "smart_context" / "items.embeddings.json"


@dataclass(frozen=True)
class Catalog:
    """The items of one moment: each item's chunks are rows ``owner == index`` of the index."""

    items: tuple[Item, ...]
    problems: tuple[ItemProblem, ...]
    chunks: tuple[str, ...]
    owner: np.ndarray
    # answers of :meth:`where`, worked out once per catalog instead of once per request
    _where: dict[tuple[tuple[str, ...], tuple[str, ...]], list[int]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def where(self, modes: Sequence[str], types: Sequence[str] = ITEM_TYPES) -> list[int]:
        """The places of the enabled items of ``types`` whose mode is in ``modes``."""
        key = (tuple(modes), tuple(types))
        found = self._where.get(key)
        if found is None:
            found = self._where[key] = [
                i
                for i, item in enumerate(self.items)
                if item.enabled and item.include in modes and item.type in types
            ]
        return found

    @property
    def agent_types(self) -> set[str]:
        """The types of the items agent selection can add."""
        return {self.items[i].type for i in self.where(("agent",))}


@dataclass(frozen=True)
class Found:
    """An item agent selection would add, its score, and how: ``"agent"`` (the message found
    it) or ``"expansion"`` (an item found before led to it, ``via``; :mod:`.expand`)."""

    item: Item
    score: float
    mode: str = "agent"
    via: Item | None = None


class ItemCatalog:
    """The vault's rules and references, kept current (see the module docstring)."""

    def __init__(
        self,
        vault: Path,
        rules_dir: str = "rules",
        references_dir: str = "references",
        servers: ToolServers | None = None,
    ):
        self.vault = Path(vault)
        self.dirs = (rules_dir, references_dir)
        self.servers = servers or ToolServers(self.vault)
        self._stamp: tuple[Stamp, Any] | None = None
        self._catalog = Catalog((), (), (), np.zeros(0, dtype=np.intp))
        self._lock = asyncio.Lock()
        # the chunk vectors of the current catalog, for the model that made them: a request
        # with no file changed reuses them instead of hashing every chunk again
        self._index: tuple[Catalog, str, Matrix] | None = None
        # made from them once, when a search first needs them: the BM25 postings of the
        # catalog's chunks, and the relationship graph of the vectors (see :mod:`.expand`)
        self._lexical: tuple[Catalog, LexicalIndex] | None = None
        self._graph: tuple[Matrix, Matrix] | None = None
        self._int8 = CodedOnce()  # the index as the search scores it

    @property
    def latest(self) -> Catalog:
        """The catalog as last read, without looking at the files."""
        return self._catalog

    def files_seen(self) -> int | None:
        """How many item files :meth:`look` stats, as of the last catalog loaded (``None``:
        none loaded yet, so unknown)."""
        return None if self._stamp is None else len(self._stamp[0])

    def look(self) -> Stamp:
        """The stamp of the item files as they are now (a directory listing and a ``stat``
        each; call it off the loop): what :meth:`current` compares."""
        return folder_stamp(self.vault, *self.dirs)

    async def current(self, files: Stamp | None = None) -> Catalog:
        """The items as the files are now: loaded again only when one changed. ``files``:
        :meth:`look` taken by the caller in its own trip off the loop (else taken here)."""
        # under a lock a request may wait for: asyncio's pool, never behind other background
        # work (background.to_thread)
        async with self._lock:
            if files is None:
                files = await asyncio.to_thread(self.look)
            stamp = (files, self.servers.stamp())
            self.servers.refresh_soon(self.servers.as_read())  # the config stamp() read
            if stamp != self._stamp:
                self._catalog = await asyncio.to_thread(self._load)
                self._stamp = stamp
            return self._catalog

    def _load(self) -> Catalog:
        items, problems = load_items(self.vault, *self.dirs)
        tools, tool_problems = self.servers.items()
        return catalog_of([*items, *tools], [*problems, *tool_problems])

    async def search(
        self,
        store: VectorStore,
        message: str,
        limits: Limits,
        modes: Sequence[str] = ("agent",),
        types: Sequence[str] = ITEM_TYPES,
        queries: Matrix | None = None,
        catalog: Catalog | None = None,
        sentences: Sequence[str] | None = None,
    ) -> list[Found]:
        """What agent selection adds for ``message``: enabled items of ``types`` whose mode is
        in ``modes``, best first, then what :meth:`expansion` adds to them. Embeds the chunks no one
        embedded yet and, unless ``queries`` holds them (:meth:`query_vectors`), the message's
        sentences; with ``limits.lexical_weight``, fuses keyword scores in. ``catalog`` is the
        one :meth:`current` gave this request (default: look at the files again)."""
        if catalog is None:
            catalog = await self.current()
        wanted = catalog.where(modes, types)
        if not wanted or not message.strip():
            return []
        index = await self._vectors(store, catalog)
        if queries is None:
            queries = await self.query_vectors(store, message)
        number = np.full(len(catalog.items), -1, dtype=np.intp)  # item -> its place in wanted
        number[wanted] = np.arange(len(wanted))
        rows = np.flatnonzero(number[catalog.owner] >= 0)
        weight = limits.lexical_weight
        scores = hybrid_scores(
            queries,
            await self._int8.of(index),
            sentences or MessageQuery(message).sentences,  # the rows of ``queries``
            await self._keywords(catalog) if weight > 0 else None,
            weight,
            rows,
        )
        chosen = select(scores, number[catalog.owner[rows]], len(wanted), limits)
        found = [Found(catalog.items[wanted[c.item]], c.score) for c in chosen]
        if limits.expansion_depth <= 0 or not found:
            return found
        return found + await self.expansion(store, found, limits, modes, catalog)

    async def expansion(
        self,
        store: VectorStore,
        found: Sequence[Found],
        limits: Limits,
        modes: Sequence[str] = ("agent",),
        catalog: Catalog | None = None,
        skip: Collection[str] = (),
    ) -> list[Found]:
        """The second pass: the items closest to what the first pass ``found`` (of any
        type: a reference about authentication leads to the HTTP tool), ``limits.
        expansion_depth`` passes deep, among enabled items whose mode is in ``modes`` or
        ``expansion``, leaving out the keys in ``skip`` (items the request has anyway: they
        must not take a pass's places). Uses the chunk vectors already indexed; embeds nothing
        new."""
        if limits.expansion_depth <= 0 or not found:
            return []
        if catalog is None:
            catalog = await self.current()
        index = await self._vectors(store, catalog)
        graph = await self._links(catalog, index)
        place = {item.key: i for i, item in enumerate(catalog.items)}
        start = [place[f.item.key] for f in found if f.item.key in place]
        allowed = np.zeros(len(catalog.items), dtype=np.bool_)
        allowed[catalog.where((*modes, "expansion"))] = True
        allowed[[place[key] for key in skip if key in place]] = False
        added = expand(graph, start, allowed, limits)
        items = catalog.items
        return [Found(items[e.item], e.score, "expansion", items[e.via]) for e in added]

    async def _keywords(self, catalog: Catalog) -> LexicalIndex:
        if self._lexical is None or self._lexical[0] is not catalog:
            lexical = await to_thread(LexicalIndex.build, catalog.chunks)
            self._lexical = (catalog, lexical)
        return self._lexical[1]

    async def _links(self, catalog: Catalog, index: Matrix) -> Matrix:
        if self._graph is None or self._graph[0] is not index:
            n = len(catalog.items)
            graph = await to_thread(relationship_graph, index, catalog.owner, n)
            self._graph = (index, graph)
        return self._graph[1]

    async def index(self, store: VectorStore) -> int:
        """Embed, ahead of any request, the chunks of the items agent selection can pick that
        have no vectors yet (incremental updates, off the request path). Returns
        how many chunks the catalog has; a vault with nothing to select costs nothing."""
        catalog = await self.current()
        if not catalog.where(("agent", "expansion")):
            return 0
        return len(await self._vectors(store, catalog))

    @staticmethod
    async def query_vectors(store: VectorStore, message: str) -> Matrix:
        """The vectors of the message's sentences (query chunking), one row each."""
        sentences = MessageQuery(message).sentences  # one rule for a message's sentences
        if not sentences:
            return np.zeros((0, 0), dtype=np.float32)
        return await store.embed(list(sentences))

    async def _vectors(self, store: VectorStore, catalog: Catalog) -> Matrix:
        memo = self._index
        model = store.embedder.model_id
        if memo is not None and memo[0] is catalog and memo[1] == model:
            return memo[2]
        path = items_vectors_file(self.vault)
        index = await store.text_vectors(COLLECTION, path, catalog.chunks)
        self._index = (catalog, model, index)
        return index


def catalog_of(items: Sequence[Item], problems: Sequence[ItemProblem]) -> Catalog:
    """Items with their chunks laid out for the index."""
    chunks: list[str] = []
    owner: list[int] = []
    for i, item in enumerate(items):
        parts = chunk(index_text(item)) or [item.name]
        chunks += parts
        owner += [i] * len(parts)
    return Catalog(tuple(items), tuple(problems), tuple(chunks), np.array(owner, dtype=np.intp))


def item_row(item: Item) -> dict[str, Any]:
    """An item as commands answer and ``smart-context items --json`` prints it."""
    return {
        "type": item.type,
        "name": item.name,
        "server_name": item.server_name,
        "description": item.description,
        "priority": item.priority_label,
        "include": item.include,
        "enabled": item.enabled,
        "source": item.source,
    }


def problem_rows(problems: Sequence[ItemProblem]) -> list[dict[str, str]]:
    """The vault's problems with its items, by file."""
    return [{"source": p.source, "message": p.message} for p in problems]
