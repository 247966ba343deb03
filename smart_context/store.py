"""Vectors for chats and topic labels: the cache in memory, on disk, and one embed call per miss set.

The store is the one place that talks to an :class:`Embedder`. Everything that needs vectors
(the context filter, the background pass, the offline topic extractor, and later rules and
references) asks the store, so a message is embedded once per model and content.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context import cache
from smart_context.cache import ChatVectors
from smart_context.embeddings.base import Embedder, normalize_rows
from smart_context.errors import EmbeddingError
from smart_context.paths import embeddings_file
from smart_context.vectors import Matrix, message_text

log = logging.getLogger(__name__)

MAX_LABELS = 20_000  # label vectors kept in memory (about 30 MB at 384 dimensions)


class VectorStore:
    """Per-chat message vectors (kept in memory between requests) and topic label vectors."""

    def __init__(self, vault: Path, embedder: Embedder, max_chats: int = 32) -> None:
        self.vault = Path(vault)
        self.embedder = embedder
        self.max_chats = max_chats
        self._chats: OrderedDict[str, ChatVectors] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._labels: dict[str, npt.NDArray[np.float32]] = {}

    async def _embed(self, texts: Sequence[str]) -> Matrix:
        vectors = await self.embedder.embed(list(texts))
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbeddingError(
                f"The embedding model {self.embedder.model_id} returned {vectors.shape[0]} vectors "
                f"for {len(texts)} texts."
            )
        return normalize_rows(vectors)

    def _cached(self, chat_id: str) -> ChatVectors | None:
        vectors = self._chats.get(chat_id)
        if vectors is None:
            vectors = cache.load(embeddings_file(self.vault, chat_id), self.embedder.model_id, None)
            if vectors is None:
                return None
            self._remember(chat_id, vectors)
        self._chats.move_to_end(chat_id)
        return vectors

    def _remember(self, chat_id: str, vectors: ChatVectors) -> None:
        self._chats[chat_id] = vectors
        self._chats.move_to_end(chat_id)
        while len(self._chats) > self.max_chats:
            old_id, old = self._chats.popitem(last=False)
            if old.dirty:
                cache.save(embeddings_file(self.vault, old_id), old)

    async def message_vectors(
        self, chat_id: str, messages: Sequence[Mapping[str, Any]], ids: list[Any] | None = None
    ) -> tuple[ChatVectors, npt.NDArray[np.intp]]:
        """The chat's vectors and each message's row in them, embedding the misses in one call."""
        async with self._locks.setdefault(chat_id, asyncio.Lock()):
            vectors = self._cached(chat_id)
            rows, missing = (
                vectors.locate(messages, ids) if vectors else (None, list(range(len(messages))))
            )
            if missing:
                new = [messages[i] for i in missing]
                embedded = await self._embed([message_text(m) for m in new])
                if vectors is None or vectors.dim != embedded.shape[1]:
                    vectors = ChatVectors(self.embedder.model_id, int(embedded.shape[1]))
                    self._remember(chat_id, vectors)
                vectors.add(new, embedded)
                rows, missing = vectors.locate(messages)
            assert vectors is not None and rows is not None
            return vectors, rows

    async def label_vectors(self, labels: Sequence[str]) -> Matrix:
        """Unit vectors of topic labels, embedded once per label and process."""
        todo = [label for label in dict.fromkeys(labels) if label not in self._labels]
        if len(self._labels) + len(todo) > MAX_LABELS:
            self._labels.clear()  # candidate phrases accumulate; re-embedding a few is cheap
            todo = list(dict.fromkeys(labels))
        if todo:
            for label, vector in zip(todo, await self._embed(todo)):
                self._labels[label] = vector
        if not labels:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._labels[label] for label in labels])

    async def topic_scores(
        self,
        chat_id: str,
        messages: Sequence[Mapping[str, Any]],
        labels: Sequence[str],
        ids: list[Any] | None = None,
    ) -> npt.NDArray[np.float32]:
        """Each message's best cosine similarity over ``labels``."""
        if not labels:
            return np.zeros(len(messages), dtype=np.float32)
        vectors, rows = await self.message_vectors(chat_id, messages, ids)
        topics = await self.label_vectors(labels)
        if topics.shape[1] != vectors.dim:
            raise EmbeddingError(
                f"Topic vectors have {topics.shape[1]} dimensions but message vectors have "
                f"{vectors.dim}; the embedding model changed while running."
            )
        # Each label's scores over the whole chat are cached and extended with new rows only;
        # the history's rows are then picked out (cheaper than gathering the matrix).
        best = vectors.label_scores(labels[0], topics[0])
        for label, vector in zip(labels[1:], topics[1:]):
            best = np.maximum(best, vectors.label_scores(label, vector))
        scores: npt.NDArray[np.float32] = best[rows]
        return scores

    async def sync(self, chat_id: str, messages: Sequence[Mapping[str, Any]]) -> Matrix:
        """Embed what is new, drop what was deleted or edited, save; returns the rows in order."""
        vectors, rows = await self.message_vectors(chat_id, messages)
        if vectors.prune(messages):
            rows, _ = vectors.locate(messages)
        if vectors.dirty:
            await asyncio.to_thread(cache.save, embeddings_file(self.vault, chat_id), vectors)
        return vectors.matrix[rows]

    def flush(self) -> None:
        """Save every cache that changed since it was last written."""
        for chat_id, vectors in self._chats.items():
            if vectors.dirty:
                try:
                    cache.save(embeddings_file(self.vault, chat_id), vectors)
                except OSError as exc:
                    log.warning("Smart Context: could not save embeddings of %s: %s", chat_id, exc)
