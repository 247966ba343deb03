"""The message a request answers, as its searches read it: its text, its sentences (
query chunking: each sentence embedded on its own, scores max-pooled; at most 24, spread over
a long message) and their vectors,
embedded once per request for every section that searches (agent items, the vault's notes,
the budget's look for relevant history)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np

from smart_context.background import ahead
from smart_context.items.chunks import representative_chunks
from smart_context.store import VectorStore
from smart_context.vectors.ops import Matrix


class MessageQuery:
    """The message being answered: its text, its sentences and, once asked for, their vectors.

    The vectors are embedded once per request, whichever section asks first; a failure is
    raised to every section that asks (each says what it did without them)."""

    def __init__(self, text: str) -> None:
        self.text = text
        chunks = representative_chunks(text)
        self.sentences: tuple[str, ...] = tuple(chunks or ([text] if text.strip() else []))
        self._vectors: asyncio.Future[Matrix] | None = None

    def start(self, store: Callable[[], Awaitable[VectorStore]]) -> None:
        """Start embedding the sentences now, for a section that will ask (:meth:`vectors`):
        the model works while the request does the rest."""
        if self._vectors is None and self.sentences:
            # a section that stopped waiting (agent selection with no agent items after all)
            # must not leave a failure unread: the next section to ask reads it again
            self._vectors = ahead(self._embed(store))

    async def vectors(self, store: Callable[[], Awaitable[VectorStore]]) -> Matrix:
        """One unit row per sentence (``(0, 0)`` for an empty message)."""
        if not self.sentences:
            return np.zeros((0, 0), dtype=np.float32)
        self.start(store)
        assert self._vectors is not None
        return await asyncio.shield(self._vectors)

    async def _embed(self, store: Callable[[], Awaitable[VectorStore]]) -> Matrix:
        return await (await store()).embed(list(self.sentences))
