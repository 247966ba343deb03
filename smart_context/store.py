"""Vectors on demand: named collections in memory and on disk, one embed call per set of misses.

The store is the one place that talks to an :class:`Embedder`. Every system that needs vectors
asks it, so a text is embedded once per model and content:

- a **collection** is a named :class:`KeyedMatrix` saved in one file and kept in memory (the
  most recently used ones); chat ``c1`` is the collection ``chat:c1`` in
  ``.memory/c1.embeddings.json``, located by message (:class:`ChatVectors`); other systems name
  their own collection and file, and key their own rows;
- **phrases** (topic labels, candidate labels) are short texts embedded once per process;
- a text embedded moments ago is not embedded again (:data:`RECENT_TEXTS`): a request's
  message, embedded for its searches, is stored with its chat's vectors after the reply from
  the same vector, without a second call (a second run of the local model, or a second paid
  call to an embedding API).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from smart_context.background import to_thread
from smart_context.embeddings.base import Embedder
from smart_context.errors import EmbeddingError
from smart_context.messages import History, Message, message_text
from smart_context.paths import ChatId, embeddings_file
from smart_context.vectors import files
from smart_context.vectors.chat import ChatVectors
from smart_context.vectors.codec import content_hash, decode
from smart_context.vectors.int8 import Codes, Scales
from smart_context.vectors.keyed import KeyedMatrix, Rows
from smart_context.vectors.ops import Matrix, Scores, normalize_rows

log = logging.getLogger(__name__)

K = TypeVar("K", bound=KeyedMatrix)
MAX_PHRASES = 20_000  # phrase vectors kept in memory (about 30 MB at 384 dimensions)
# the last texts embedded whose vectors embed() keeps (module docstring): some 50 KB a vault at
# 384 dimensions, 200 KB at 1,536
RECENT_TEXTS = 32
RECENT_CHARS = 4_000  # kept only for a text this long at most (a key holds the text)


# a collection with no usable file (a chat not embedded yet) is looked for again after this
# long, not on every request: each look is a worker-thread trip
ABSENT_SECONDS = 10.0
SAVE_EVERY = 200  # changed rows of a chat's vectors before its file is written again


@dataclass(frozen=True)
class Synced:
    """A chat's vectors just after a sync, and the row of each message synced: rows are read
    when asked. A pass that joins a reply's two turns to the map reads a few hundred rows,
    not a copy of a 10,000-message chat. The arrays stay as they were: a later prune makes new
    ones, and a later sync only adds rows or writes a message's same vector again."""

    scales: Scales
    codes: Codes
    rows: Rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, at: Rows) -> Matrix:
        """The vectors of the messages at positions ``at``, in that order (a copy)."""
        rows = self.rows[at]
        return decode(self.scales[rows], self.codes[rows])

    @property
    def dim(self) -> int:
        return int(self.codes.shape[1]) if self.codes.ndim == 2 else 0

    def of(self, at: Rows) -> Synced:
        """The same vectors for the messages at positions ``at`` only, in that order."""
        return Synced(self.scales, self.codes, self.rows[at])

    def whole(self) -> Matrix:
        """Every message's vector, in order (a copy)."""
        return self[np.arange(len(self.rows))]


class VectorStore:
    """Collections of vectors kept in memory between requests, and phrase vectors."""

    def __init__(self, vault: Path, embedder: Embedder, max_open: int = 32) -> None:
        self.vault = Path(vault)
        self.embedder = embedder
        self.max_open = max_open
        # name -> (file, vectors); names are plain strings: hashing a Path costs a request 10 µs
        self._open: OrderedDict[str, tuple[Path, KeyedMatrix]] = OrderedDict()
        self._absent: dict[str, float] = {}  # collection -> when its file was found unusable
        # file -> the write under way of a collection closed to make room (keep_open)
        self._closing: dict[str, asyncio.Future[bool]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._phrases: dict[str, np.ndarray] = {}
        self._last_phrases: tuple[tuple[str, ...], Matrix] = ((), np.zeros((0, 0), np.float32))
        self._recent: OrderedDict[tuple[str, str], Matrix] = OrderedDict()  # (model, text)

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Unit vectors of ``texts`` in one call at most, checked: a bad reply never reaches a
        file. Those of the last :data:`RECENT_TEXTS` texts embedded are not asked for again."""
        model = self.embedder.model_id
        keys = [(model, text) for text in texts]
        known = [self._recent.get(key) for key in keys]
        missing = [i for i, vector in enumerate(known) if vector is None]
        if len(missing) == len(keys):
            out = await self._embedded(texts)
        else:
            dim = next(len(vector) for vector in known if vector is not None)
            out = np.empty((len(keys), dim), dtype=np.float32)
            for i, vector in enumerate(known):
                if vector is not None:
                    out[i] = vector
            if missing:
                fresh = await self._embedded([texts[i] for i in missing])
                if fresh.shape[1] == dim:
                    out[missing] = fresh
                else:  # the model's vectors changed size: all of them anew
                    self._recent.clear()
                    out = await self._embedded(texts)
        for key, row in zip(keys[-RECENT_TEXTS:], out[-RECENT_TEXTS:], strict=True):
            if len(key[1]) <= RECENT_CHARS:
                self._recent[key] = row.copy()
                self._recent.move_to_end(key)
        while len(self._recent) > RECENT_TEXTS:
            self._recent.popitem(last=False)
        return out

    async def _embedded(self, texts: Sequence[str]) -> Matrix:
        """The embedder's unit vectors of ``texts``, checked."""
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

    # ------------------------------------------------------------------ collections

    def lock(self, name: str) -> asyncio.Lock:
        """The lock of one collection: rows stay put while its holder uses them."""
        return self._locks.setdefault(name, asyncio.Lock())

    async def collection(self, name: str, path: Callable[[], Path], kind: type[K]) -> K | None:
        """The collection ``name`` for the current model, or ``None``; ``path()`` names its file
        (called only when the collection is not open: building a Path costs a request 5 µs)."""
        entry = self._open.get(name)
        if entry is None:
            absent = self._absent.get(name)
            if absent is not None and time.monotonic() - absent < ABSENT_SECONDS:
                return None
            file = path()
            closing = self._closing.get(str(file))
            if closing is not None:  # closed to make room a moment ago: read what it wrote
                await asyncio.wait([closing])
            # a large file takes tens of milliseconds to read: not on the event loop; and,
            # read under the collection's lock, which a request may wait for, never behind
            # other background work (background.to_thread)
            loaded = await asyncio.to_thread(files.load, file, kind, self.embedder.model_id)
            if loaded is None:
                self._absent[name] = time.monotonic()
                return None
            self.keep_open(name, file, loaded)
            return loaded
        self._open.move_to_end(name)
        vectors = entry[1]
        assert isinstance(vectors, kind)
        return vectors

    def keep_open(self, name: str, path: Path, vectors: KeyedMatrix) -> None:
        """Hold ``vectors`` in memory as collection ``name``, saved at ``path`` (the least used
        are saved and closed beyond ``max_open``)."""
        self._absent.pop(name, None)
        self._open[name] = (path, vectors)
        self._open.move_to_end(name)
        while len(self._open) > self.max_open:
            _, (old_path, old) = self._open.popitem(last=False)
            taken = self.snapshot(old)
            if taken is not None:
                self._close_soon(old_path, taken)

    def _close_soon(self, path: Path, taken: files.Snapshot) -> None:
        """Write a collection closed to make room, in a worker thread (on the event loop, a
        10,000-message chat's took 35 ms); opening it again waits for the write. Without a
        running loop, written here."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            try:
                files.write(path, taken)
            except OSError as exc:
                log.warning("Smart Context: could not save embeddings %s: %s", path.name, exc)
            return
        key = str(path)
        future: asyncio.Future[bool] = loop.run_in_executor(None, files.write, path, taken)
        self._closing[key] = future

        def written(done: asyncio.Future[bool]) -> None:
            if self._closing.get(key) is done:
                del self._closing[key]
            exc = None if done.cancelled() else done.exception()
            if exc is not None:  # the rows are embedded again when the chat is next read
                log.warning("Smart Context: could not save embeddings %s: %s", path.name, exc)

        future.add_done_callback(written)

    @staticmethod
    def snapshot(vectors: KeyedMatrix) -> files.Snapshot | None:
        """A changed collection as its file will hold it, taken under its lock (later changes
        cannot tear it); ``None`` when nothing changed. Write it with :meth:`write` after the
        lock."""
        if not vectors.dirty:
            return None
        vectors.mark_saved()
        return files.snapshot(vectors)

    async def write(self, path: Path, vectors: KeyedMatrix, taken: files.Snapshot | None) -> None:
        """Write a :meth:`snapshot` out in a thread, its text made there too; a failed write
        leaves the collection dirty."""
        if taken is None:
            return
        try:
            await to_thread(files.write, path, taken)
        except OSError as exc:
            vectors.dirty = True
            log.warning("Smart Context: could not save embeddings %s: %s", path.name, exc)

    def flush(self) -> None:
        """Save every collection that changed since it was last written."""
        for path, vectors in self._open.values():
            if vectors.dirty:
                try:
                    files.save(path, vectors)
                except OSError as exc:
                    log.warning("Smart Context: could not save embeddings %s: %s", path.name, exc)

    # ------------------------------------------------------------------ chats

    async def _chat_rows(
        self, name: str, chat_id: ChatId, history: History
    ) -> tuple[ChatVectors, Rows]:
        """Rows of ``history`` in the chat's vectors, embedding the misses in one call; call
        under the chat's lock."""

        def path() -> Path:
            return embeddings_file(self.vault, chat_id)

        vectors = await self.collection(name, path, ChatVectors)
        if vectors is not None:
            rows, missing = vectors.locate(history)
            if not missing:
                return vectors, rows
        elif not len(history):  # nothing to embed, nothing to keep: no file for an empty chat
            return ChatVectors(self.embedder.model_id, 0), np.zeros(0, dtype=np.intp)
        else:
            rows, missing = np.full(len(history), -1, dtype=np.intp), list(range(len(history)))
        embedded = await self.embed([message_text(history.messages[i]) for i in missing])
        if vectors is None or vectors.dim != embedded.shape[1]:
            # a new model or dimension: start over, and embed every message for it
            vectors = ChatVectors(self.embedder.model_id, int(embedded.shape[1]))
            self.keep_open(name, path(), vectors)
            if len(missing) < len(history):
                rows, missing = np.full(len(history), -1, dtype=np.intp), list(range(len(history)))
                embedded = await self.embed([message_text(m) for m in history.messages])
        return vectors, vectors.fill(history, rows, missing, embedded)

    def chat_rows(self, chat_id: ChatId, history: History) -> ChatRows:
        """``async with store.chat_rows(chat_id, history) as (vectors, rows)``: the chat's vectors
        and the row of each message of ``history``, the misses embedded in one call; the chat
        stays locked while the caller scores it (no prune may renumber)."""
        return ChatRows(self, chat_id, history)

    async def sync_chat(self, chat_id: ChatId, messages: Sequence[Message] | History) -> Matrix:
        """Embed what is new, drop what was deleted or edited, save; returns the rows in order.
        ``messages`` may come as a :class:`History` read through the chat's index."""
        return (await self.sync_rows(chat_id, messages)).whole()

    async def sync_rows(self, chat_id: ChatId, messages: Sequence[Message] | History) -> Synced:
        """:meth:`sync_chat`, with the vectors read only when asked (:class:`Synced`)."""
        history = messages if isinstance(messages, History) else History(messages)
        name = f"chat:{chat_id}"
        async with self.lock(name):
            vectors, rows = await self._chat_rows(name, chat_id, history)
            if vectors.prune(history):
                rows, _ = vectors.locate(history)
            synced = Synced(*vectors.stored, rows)
            path = embeddings_file(self.vault, chat_id)
            # rewriting a 10,000-message file (8 MB) for a reply's two vectors cost 75 ms of
            # CPU a reply: the file is written when first made, then every SAVE_EVERY changed
            # rows and at shutdown (a crash costs at most that many embeddings again)
            due = vectors.unsaved >= SAVE_EVERY or not path.exists()
            taken = self.snapshot(vectors) if due else None
        await self.write(path, vectors, taken)
        return synced

    async def known_scores(self, chat_id: ChatId, history: History, queries: Matrix) -> Scores:
        """Each message's best cosine over the rows of ``queries``, from the vectors the chat
        already has; a message without one scores 0. Nothing is embedded: a long chat's first
        request must not wait for thousands of messages (the background pass embeds them)."""
        name = f"chat:{chat_id}"
        out = np.zeros(len(history), dtype=np.float32)
        if not len(history) or not len(queries):
            return out
        async with self.lock(name):
            vectors = await self.collection(
                name, lambda: embeddings_file(self.vault, chat_id), ChatVectors
            )
            if vectors is None or vectors.dim != queries.shape[1] or not len(vectors):
                return out
            rows, _ = vectors.locate(history)
            found = rows >= 0
            if found.any():
                best = vectors.cosines(queries).max(axis=1)  # exact int8 sums, no copy
                out[found] = best[rows[found]]
        return out

    # ------------------------------------------------------------------ texts

    async def text_vectors(self, name: str, path: Path, texts: Sequence[str]) -> Matrix:
        """Unit vectors of ``texts`` in order, kept as collection ``name`` (saved at ``path``)
        and keyed by content: a text is embedded once, across restarts, and an edited one
        again; the misses go in one call, and texts no longer asked for are dropped."""
        keys = [content_hash(t) for t in texts]
        matrix, _ = await self.keyed_vectors(name, path, keys, texts)
        return matrix

    async def keyed_vectors(
        self,
        name: str,
        path: Path,
        keys: Sequence[str],
        texts: Sequence[str],
        inline: int | None = None,
    ) -> tuple[Matrix, int]:
        """``(len(keys), dim)`` unit vectors of ``texts`` (one per key, in order), kept as
        collection ``name`` (saved at ``path``) by ``keys``, and how many have none yet.

        The misses are embedded in one call, unless there are more than ``inline`` of them
        (``None``: no limit): then none is, and their rows are zero (a background pass embeds
        them into the same collection). Once every key asked for has a vector, the vectors of
        keys no longer asked for are dropped. A new model or dimension starts the collection
        over."""
        async with self.lock(name):
            vectors = await self.collection(name, lambda: path, KeyedMatrix)
            known = set(vectors.keys) if vectors is not None else set()
            todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in known}
            if todo and (inline is None or len(todo) <= inline):
                embedded = await self.embed(list(todo.values()))
                if vectors is None or vectors.dim != embedded.shape[1]:  # a new model
                    vectors = KeyedMatrix(self.embedder.model_id, int(embedded.shape[1]))
                    self.keep_open(name, path, vectors)
                    if len(todo) < len(set(keys)):
                        todo = dict(zip(keys, texts, strict=True))
                        embedded = await self.embed(list(todo.values()))
                vectors.add(list(todo), embedded)
                todo = {}
            if vectors is None:  # nothing embedded yet
                return np.zeros((len(keys), 0), dtype=np.float32), len(todo)
            rows = np.fromiter(map(vectors.row, keys), dtype=np.intp, count=len(keys))
            if not todo and vectors.keep(np.unique(rows).astype(np.intp)):
                rows = np.fromiter(map(vectors.row, keys), dtype=np.intp, count=len(keys))
            ordered = np.zeros((len(keys), vectors.dim), dtype=np.float32)
            found = rows >= 0
            ordered[found] = vectors.rows_at(rows[found])
            taken = self.snapshot(vectors)
        await self.write(path, vectors, taken)
        return ordered, len(todo)

    # ------------------------------------------------------------------ phrases

    async def phrase_vectors(self, phrases: Sequence[str]) -> Matrix:
        """Unit vectors of short texts (topic labels), embedded once per phrase and process."""
        asked = tuple(phrases)
        if self._last_phrases[0] == asked:  # a chat's labels, request after request
            return self._last_phrases[1]
        wanted = list(dict.fromkeys(phrases))
        found = {p: self._phrases[p] for p in wanted if p in self._phrases}
        todo = [p for p in wanted if p not in found]
        if todo:
            found.update(zip(todo, await self.embed(todo), strict=True))
            if len(self._phrases) + len(todo) > MAX_PHRASES:
                self._phrases.clear()  # candidate phrases accumulate; re-embedding some is cheap
            self._phrases.update((p, found[p]) for p in todo)
        if not phrases:
            return np.zeros((0, 0), dtype=np.float32)
        stacked = np.stack([found[p] for p in phrases])
        self._last_phrases = (asked, stacked)
        return stacked


class ChatRows:
    """The context of :meth:`VectorStore.chat_rows` (a plain class: a generator-based context
    manager costs a warm request several microseconds)."""

    def __init__(self, store: VectorStore, chat_id: ChatId, history: History) -> None:
        self.store, self.chat_id, self.history = store, chat_id, history
        self.name = f"chat:{chat_id}"
        self.lock = store.lock(self.name)

    async def __aenter__(self) -> tuple[ChatVectors, Rows]:
        await self.lock.acquire()
        try:
            return await self.store._chat_rows(self.name, self.chat_id, self.history)
        except BaseException:
            self.lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.lock.release()
