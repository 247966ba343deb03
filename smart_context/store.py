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
from smart_context.atomic import write_atomic
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
        vectors = np.asarray(await self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbeddingError(
                f"The embedding model {self.embedder.model_id} returned {vectors.shape[0]} vectors "
                f"for {len(texts)} texts."
            )
        if not np.isfinite(vectors).all():  # a NaN would be cached and poison every score
            raise EmbeddingError(
                f"The embedding model {self.embedder.model_id} returned vectors with NaN or "
                "infinite values."
            )
        return normalize_rows(vectors)

    async def _cached(self, chat_id: str) -> ChatVectors | None:
        vectors = self._chats.get(chat_id)
        if vectors is None:
            # a large cache takes tens of milliseconds to read: not on the event loop
            path = embeddings_file(self.vault, chat_id)
            vectors = await asyncio.to_thread(cache.load, path, self.embedder.model_id, None)
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

    def _lock(self, chat_id: str) -> asyncio.Lock:
        return self._locks.setdefault(chat_id, asyncio.Lock())

    async def _rows(
        self, chat_id: str, messages: Sequence[Mapping[str, Any]], ids: list[Any] | None = None
    ) -> tuple[ChatVectors, npt.NDArray[np.intp]]:
        """Rows of ``messages`` in the chat's vectors, embedding misses; call under the lock."""
        vectors = await self._cached(chat_id)
        rows, missing = (
            vectors.locate(messages, ids) if vectors else (None, list(range(len(messages))))
        )
        if missing:
            embedded = await self._embed([message_text(messages[i]) for i in missing])
            if vectors is None or vectors.dim != embedded.shape[1]:
                # a new model or dimension: start over, and embed every message for it
                vectors = ChatVectors(self.embedder.model_id, int(embedded.shape[1]))
                self._remember(chat_id, vectors)
                if len(missing) < len(messages):
                    missing = list(range(len(messages)))
                    embedded = await self._embed([message_text(m) for m in messages])
            vectors.add([messages[i] for i in missing], embedded)
            rows, _ = vectors.locate(messages, ids)
        assert vectors is not None and rows is not None and (rows >= 0).all()
        return vectors, rows

    async def message_vectors(
        self, chat_id: str, messages: Sequence[Mapping[str, Any]], ids: list[Any] | None = None
    ) -> tuple[ChatVectors, npt.NDArray[np.intp]]:
        """The chat's vectors and each message's row in them, embedding the misses in one call.

        The rows are valid until the next ``sync`` of the chat (which may prune); callers that
        need them across an ``await`` use :meth:`topic_scores` or :meth:`sync`, which hold the
        chat's lock throughout.
        """
        async with self._lock(chat_id):
            return await self._rows(chat_id, messages, ids)

    async def label_vectors(self, labels: Sequence[str]) -> Matrix:
        """Unit vectors of topic labels, embedded once per label and process."""
        wanted = list(dict.fromkeys(labels))
        found = {label: self._labels[label] for label in wanted if label in self._labels}
        todo = [label for label in wanted if label not in found]
        if todo:
            found.update(zip(todo, await self._embed(todo)))
            if len(self._labels) + len(todo) > MAX_LABELS:
                self._labels.clear()  # candidate phrases accumulate; re-embedding some is cheap
            self._labels.update((label, found[label]) for label in todo)
        if not labels:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[label] for label in labels])

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
        topics = await self.label_vectors(labels)
        async with self._lock(chat_id):  # no prune may renumber the rows until we are done
            vectors, rows = await self._rows(chat_id, messages, ids)
            if topics.shape[1] != vectors.dim:
                raise EmbeddingError(
                    f"Topic vectors have {topics.shape[1]} dimensions but message vectors have "
                    f"{vectors.dim}; the embedding model changed while running."
                )
            # Each label's scores over the whole chat are cached and extended with new rows
            # only; the history's rows are then picked out (cheaper than gathering the matrix).
            best = vectors.label_scores(labels[0], topics[0])
            for label, vector in zip(labels[1:], topics[1:]):
                best = np.maximum(best, vectors.label_scores(label, vector))
            scores: npt.NDArray[np.float32] = best[rows]
            return scores

    async def sync(self, chat_id: str, messages: Sequence[Mapping[str, Any]]) -> Matrix:
        """Embed what is new, drop what was deleted or edited, save; returns the rows in order."""
        async with self._lock(chat_id):
            vectors, rows = await self._rows(chat_id, messages)
            if vectors.prune(messages):
                rows, _ = vectors.locate(messages)
            ordered = vectors.matrix[rows]
            # Serialise a snapshot on the loop's side of the lock; write it in a thread.
            text = cache.to_json(vectors) if vectors.dirty else None
            vectors.dirty = False
        if text is not None:
            try:
                await asyncio.to_thread(write_atomic, embeddings_file(self.vault, chat_id), text)
            except OSError as exc:
                vectors.dirty = True
                log.warning("Smart Context: could not save embeddings of %s: %s", chat_id, exc)
        return ordered

    def flush(self) -> None:
        """Save every cache that changed since it was last written."""
        for chat_id, vectors in self._chats.items():
            if vectors.dirty:
                try:
                    cache.save(embeddings_file(self.vault, chat_id), vectors)
                except OSError as exc:
                    log.warning("Smart Context: could not save embeddings of %s: %s", chat_id, exc)
