"""The knowledge index: the vault's notes, their passages and the passages' vectors, kept
current incrementally (the knowledge base).

- Each request looks at the notes with one ``stat`` per file (:func:`.notes.scan`); only a note
  whose stamp changed is read and cut again, and a deleted note leaves the index. Past
  :data:`LARGE_VAULT` notes that look costs a request more than it is worth (13 to 19 ms at
  2,000 notes, 33 to 51 ms at 5,000 on a 2-core machine: ``benchmarks/bench_note_scan.py``):
  a request then takes the notes as last seen and asks for a fresh look in the background
  (``on_stale``), so an edit counts from the request after that look, not the very next one.
- Passage vectors are the store's ``knowledge`` collection, saved in
  ``.memory/smart_context/knowledge.embeddings.json`` (the format of
  :mod:`smart_context.vectors.files`: atomic writes; a damaged file is set aside, logged and
  rebuilt) and keyed by the passage's content hash. A restart reads the notes again but embeds
  nothing embedded before; an edited note costs the embedding of its changed passages only.
- A request embeds at most ``INLINE`` missing passages itself (a note or two just edited). More
  than that (the first start on a large vault) is left to :meth:`KnowledgeIndex.index` in the
  background (``on_behind`` asks for it); meanwhile a passage without a vector is found by its
  words alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from smart_context.items.files import vault_root
from smart_context.items.lexical import LexicalIndex
from smart_context.knowledge.notes import Note, Scan, Stamp, read_note, scan
from smart_context.paths import memory_dir
from smart_context.store import VectorStore
from smart_context.vectors.int8 import Coded, CodedOnce
from smart_context.vectors.keyed import KeyedMatrix
from smart_context.vectors.ops import Matrix

log = logging.getLogger(__name__)

COLLECTION = "knowledge"
INLINE = 48  # passages a request embeds itself: a few edited notes, well under a second
LARGE_VAULT = 500  # notes past which a request no longer looks at every file (about 5 ms)
BATCH = 256  # passages per embedding call of the background pass
SAVE_EVERY = 8  # batches between saves of the background pass (a crash loses at most these)

IntArray = npt.NDArray[np.intp]
Progress = Callable[[int, int], Awaitable[None]]


def knowledge_vectors_file(vault: Path) -> Path:
    """Where the passage vectors of the vault's notes are kept."""
    return memory_dir(vault) / "smart_context" / "knowledge.embeddings.json"


@dataclass(frozen=True)
class Layout:
    """The notes of one moment, their passages laid end to end: note ``i``'s passages are
    ``chunks[starts[i]:starts[i + 1]]``, and ``owner[c]`` is the note of passage ``c``."""

    notes: tuple[Note, ...]
    chunks: tuple[str, ...]
    keys: tuple[str, ...]
    owner: IntArray
    starts: IntArray
    _lexical: list[LexicalIndex] = field(default_factory=list, compare=False, repr=False)

    def lexical(self) -> LexicalIndex:
        """The BM25 postings of the passages, built once per layout."""
        if not self._lexical:
            self._lexical.append(LexicalIndex.build(self.chunks))
        return self._lexical[0]


def layout_of(notes: Iterable[Note]) -> Layout:
    """``notes`` (in order) laid out for the search."""
    kept = tuple(notes)
    sizes = np.array([len(n.chunks) for n in kept], dtype=np.intp)
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    owner = np.repeat(np.arange(len(kept), dtype=np.intp), sizes)
    chunks = tuple(c for n in kept for c in n.chunks)
    keys = tuple(k for n in kept for k in n.keys)
    return Layout(kept, chunks, keys, owner, starts)


class KnowledgeIndex:
    """The notes of ``folders`` in ``vault`` (leaving out ``excluded`` folders), kept current
    (see the module docstring)."""

    def __init__(self, vault: Path, folders: Sequence[str], excluded: Collection[str] = ()):
        self.root = vault_root(vault)
        self.folders = tuple(folders)
        self.excluded = tuple(excluded)
        self.path = knowledge_vectors_file(vault)
        self.on_behind: Callable[[], None] | None = None  # asks for the background pass
        self.on_stale: Callable[[], None] | None = None  # asks for a look at the files, ditto
        self._notes: dict[str, Note] = {}
        self._skipped: dict[str, Stamp] = {}  # notes that could not be used, as they were
        self._problems: set[str] = set()
        self._stamps: dict[str, Stamp] | None = None
        self._layout = layout_of(())
        self._lock = asyncio.Lock()
        self._version = 0  # bumped whenever the collection's rows change
        self._memo: tuple[Layout, str, int, Matrix] | None = None
        self._int8 = CodedOnce()  # the vectors as the search scores them

    @property
    def latest(self) -> Layout:
        """The notes as last read, without looking at the files."""
        return self._layout

    def _looks_itself(self) -> bool:
        """Whether a request looks at the files itself (not in a large vault with someone to
        look in the background: see the module docstring)."""
        stamps = self._stamps
        return stamps is None or len(stamps) <= LARGE_VAULT or self.on_stale is None

    def files_seen(self) -> int | None:
        """How many note files a request's :meth:`look` stats, as of the last look (0: it
        does not look, in a large vault with someone to look in the background; ``None``: not
        looked yet, so unknown)."""
        if not self._looks_itself():
            return 0
        return None if self._stamps is None else len(self._stamps)

    def look(self) -> Scan | None:
        """What a request's :meth:`current` compares: the note files as they are now (a
        listing and a ``stat`` each; call it off the loop), or ``None`` when the request
        does not look."""
        return scan(self.root, self.folders, self.excluded) if self._looks_itself() else None

    async def current(self, found: Scan | None = None) -> Layout:
        """The notes for a request: as the files are now (:meth:`rescan`), or in a large vault
        with someone to look in the background, as last seen (see the module docstring).
        ``found``: :meth:`look`, when the request took it already in its own trip."""
        if not self._looks_itself() and self.on_stale is not None:
            self.on_stale()
            return self._layout
        return await self.rescan(found)

    async def rescan(self, found: Scan | None = None) -> Layout:
        """The notes as the files are now (``found``: as just looked at): only the changed
        ones read again."""
        # under a lock a request may wait for: asyncio's pool, never behind other background
        # work (background.to_thread)
        async with self._lock:
            if found is None:
                found = await asyncio.to_thread(scan, self.root, self.folders, self.excluded)
            for problem in set(found.problems) - self._problems:
                log.warning("Smart Context: knowledge base: %s", problem)
            self._problems = set(found.problems)
            if found.stamps != self._stamps:
                self._layout = await asyncio.to_thread(self._update, found.stamps)
                self._stamps = found.stamps
            return self._layout

    def _update(self, stamps: dict[str, Stamp]) -> Layout:
        notes: dict[str, Note] = {}
        skipped: dict[str, Stamp] = {}
        for source, stamp in stamps.items():
            old = self._notes.get(source)
            if old is not None and old.stamp == stamp:
                notes[source] = old
            elif self._skipped.get(source) == stamp:
                skipped[source] = stamp  # still the file that could not be used: said once
            else:
                note = read_note(self.root, source, stamp)
                if isinstance(note, str):
                    log.warning("Smart Context: note left out of the knowledge base: %s", note)
                    skipped[source] = stamp
                elif note.chunks:
                    notes[source] = note
        self._notes, self._skipped = notes, skipped
        layout = layout_of(notes.values())
        layout.lexical()  # here, in a thread: on the event loop it would stall every request
        return layout

    async def vectors(self, store: VectorStore, layout: Layout, inline: int = INLINE) -> Matrix:
        """``(passages, dim)``: each passage's vector, a zero row for one not embedded yet.
        Embeds up to ``inline`` missing passages now and asks for the background pass when
        more are missing; drops the vectors of passages no note has any more
        (:meth:`VectorStore.keyed_vectors`)."""
        model = store.embedder.model_id
        memo = self._memo
        if memo is not None and memo[0] is layout and memo[1:3] == (model, self._version):
            return memo[3]
        version = self._version
        matrix, missing = await store.keyed_vectors(
            COLLECTION, self.path, layout.keys, layout.chunks, inline
        )
        if missing and self.on_behind is not None:
            self.on_behind()
        self._memo = (layout, model, version, matrix)
        return matrix

    async def coded(self, store: VectorStore, layout: Layout, inline: int = INLINE) -> Coded:
        """:meth:`vectors` as int8 codes, encoded once per matrix, for the search."""
        return await self._int8.of(await self.vectors(store, layout, inline))

    async def index(self, store: VectorStore, progress: Progress | None = None) -> int:
        """Embed every passage that has no vector yet, ``BATCH`` at a time, saving as it goes
        (the background pass). Returns how many passages it embedded."""
        layout = await self.rescan()
        async with store.lock(COLLECTION):
            vectors = await store.collection(COLLECTION, lambda: self.path, KeyedMatrix)
            todo = list(_missing(layout, _rows(vectors, layout.keys)).items())
        for number, start in enumerate(range(0, len(todo), BATCH), 1):
            batch = todo[start : start + BATCH]
            embedded = await store.embed([text for _, text in batch])
            last = start + BATCH >= len(todo)
            async with store.lock(COLLECTION):
                found = await store.collection(COLLECTION, lambda: self.path, KeyedMatrix)
                vectors = self._open(store, found, int(embedded.shape[1]))
                vectors.add([key for key, _ in batch], embedded)
                self._version += 1
                taken = store.snapshot(vectors) if last or number % SAVE_EVERY == 0 else None
            await store.write(self.path, vectors, taken)
            if progress is not None:
                await progress(min(start + BATCH, len(todo)), len(todo))
        return len(todo)

    def _open(self, store: VectorStore, vectors: KeyedMatrix | None, dim: int) -> KeyedMatrix:
        """The collection to add to: ``vectors``, or a new one for this model."""
        if vectors is not None and vectors.dim == dim:
            return vectors
        fresh = KeyedMatrix(store.embedder.model_id, dim)
        store.keep_open(COLLECTION, self.path, fresh)
        self._version += 1
        return fresh


def _rows(vectors: KeyedMatrix | None, keys: Sequence[str]) -> IntArray:
    if vectors is None:
        return np.full(len(keys), -1, dtype=np.intp)
    return np.fromiter(map(vectors.row, keys), dtype=np.intp, count=len(keys))


def _missing(layout: Layout, rows: IntArray) -> dict[str, str]:
    """key -> passage text of the passages without a vector, each text once."""
    return {layout.keys[i]: layout.chunks[i] for i in np.flatnonzero(rows < 0).tolist()}
