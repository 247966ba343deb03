"""A matrix of unit vectors addressed by string keys, grown in place, with memoised scores.

Every collection of vectors (a chat's messages, and later the vault's items, notes and stored
memories) is a :class:`KeyedMatrix` under one embedding model: what a key means is the caller's
business (a chat uses ``{message_id}:{content_hash}``).

The rows are kept as the cache file stores them: int8 codes and a float32 scale per row (a
quarter of float32's memory: 38 MB for a 100,000-message chat, not 154), scored exactly by
:mod:`.int8`. Float32 rows are decoded only for the few a caller asks for (:meth:`rows_at`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from smart_context.vectors.codec import decode, encode
from smart_context.vectors.int8 import Codes, Scales, coded_cosines, cosines, encode_queries
from smart_context.vectors.ops import Matrix, Scores, appended

Rows = npt.NDArray[np.intp]
MAX_MEMO_SCORES = 64  # queries whose scores a matrix keeps (each is 4 bytes per row)
# Values derived from the rows (a topic's vector and members...). Every extraction names its
# topics anew, so old entries are garbage: past this many, all are dropped and re-derived.
MAX_DERIVED = 256
V = TypeVar("V")


class KeyedMatrix:
    """Unit rows of one model and dimension, one per key; ``dirty`` until saved."""

    def __init__(
        self,
        model_id: str,
        dim: int,
        keys: Sequence[str] = (),
        stored: tuple[Scales, Codes] | None = None,
    ) -> None:
        """``stored``: the rows of ``keys`` as ``(scales, codes)`` (:func:`~.codec.encode`)."""
        self.model_id = model_id
        self.dim = dim
        self._reset(keys, stored)
        self.dirty = False
        self.unsaved = 0  # rows added or dropped since the collection was last saved

    def mark_saved(self) -> None:
        """The collection as it is now is on disk (or being written)."""
        self.dirty = False
        self.unsaved = 0

    def _reset(self, keys: Sequence[str], stored: tuple[Scales, Codes] | None) -> None:
        self.keys: list[str] = list(keys)
        self._row_of: dict[str, int] = {k: i for i, k in enumerate(self.keys)}
        rows = len(self.keys)
        if stored is not None and stored[1].shape == (rows, self.dim) and len(stored[0]) == rows:
            # a freshly read file: adopt its arrays instead of copying them
            self._scales: Scales = np.asarray(stored[0], dtype=np.float32)
            self._codes: Codes = np.asarray(stored[1], dtype=np.int8)
        else:
            self._scales = np.ones(max(rows, 16), dtype=np.float32)
            self._codes = np.zeros((max(rows, 16), self.dim), dtype=np.int8)
            if stored is not None and rows:
                self._scales[:rows], self._codes[:rows] = stored
        # query -> its cosine score against rows [0, len(scores)): a selected topic's scores do
        # not change between requests, so a request only scores the rows added since.
        # Kept with the query's vector as given and as encoded, for scoring the rows added since.
        self._scores: dict[str, tuple[Scores, npt.NDArray[np.float32], Scales, Codes]] = {}
        # what callers derive from existing rows (a topic's vector, its members' rows): valid
        # until a row changes in place or rows are renumbered, when both memos are cleared;
        # read with ``derived.get``, written with :meth:`remember` (which bounds it)
        self.derived: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def stored(self) -> tuple[Scales, Codes]:
        """The rows as kept, ``(scales, codes)``: views, not copies, that stay as they are
        while the collection changes (rows are added past them, and :meth:`add` changes a row
        in a copy), so a reader may hold them, off the loop too. Only read them."""
        n = len(self.keys)
        return self._scales[:n], self._codes[:n]

    @property
    def matrix(self) -> Matrix:
        """Every row decoded to float32 (a new ``(len(self), dim)`` array: for a few rows, use
        :meth:`rows_at`; to score them, :meth:`scores` or :meth:`cosines`)."""
        return decode(*self.stored)

    def rows_at(self, rows: Rows) -> Matrix:
        """The float32 vectors of ``rows``, in that order (a new array)."""
        return decode(self._scales[rows], self._codes[rows])

    def cosines(self, queries: Matrix) -> Matrix:
        """``(len(self), len(queries))`` cosines of every row with the unit ``queries``."""
        scales, codes = self.stored
        return cosines(codes, scales, queries)

    def row(self, key: str) -> int:
        """The row of ``key``, or -1."""
        return self._row_of.get(key, -1)

    def add(self, keys: Sequence[str], vectors: Matrix) -> Rows:
        """Store one unit vector per key (same order); a known key keeps its row, with the new
        vector (in new arrays: see :attr:`stored`).

        Returns the row of each key.
        """
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(f"expected {len(keys)}x{self.dim} vectors, got {vectors.shape}")
        scales, codes = encode(vectors)  # as the saved file gives them back after a restart
        n = len(self.keys)
        needed = n + len(keys)
        known = [self._row_of.get(key) for key in keys]
        if needed > len(self._codes) or any(row is not None for row in known):
            # new arrays: grown, or a row changed in a copy, never in the rows handed out
            # (:attr:`stored`: a file snapshot written in a thread, a pass's vectors)
            room = len(self._codes)
            size = room if needed <= room else max(needed, 2 * room)
            grown_scales = np.ones(size, dtype=np.float32)
            grown_codes = np.zeros((size, self.dim), dtype=np.int8)
            grown_scales[:n], grown_codes[:n] = self.stored
            self._scales, self._codes = grown_scales, grown_codes
        rows = np.empty(len(keys), dtype=np.intp)
        for i, (key, row) in enumerate(zip(keys, known, strict=True)):
            if row is None:
                row = self._row_of.get(key)  # (a key given twice: the first one's row)
            if row is None:
                row = len(self.keys)
                self.keys.append(key)
                self._row_of[key] = row
            else:  # a vector changed in place: memoised scores are stale
                self.forget()
            rows[i] = row
        self._scales[rows] = scales
        self._codes[rows] = codes
        self.dirty = True
        self.unsaved += len(rows)
        return rows

    def remember(self, key: str, value: V) -> V:
        """Keep ``value`` in :attr:`derived` under ``key``; returns it."""
        if key not in self.derived and len(self.derived) >= MAX_DERIVED:
            self.derived.clear()
        self.derived[key] = value
        return value

    def forget(self) -> None:
        """Drop memoised scores and derived values: the rows they came from changed."""
        self._scores.clear()
        self.derived.clear()

    def keep(self, rows: Rows) -> int:
        """Keep only ``rows`` (sorted, unique), renumbered from 0; returns how many were dropped."""
        dropped = len(self.keys) - len(rows)
        if dropped:
            self._reset(
                [self.keys[i] for i in rows.tolist()], (self._scales[rows], self._codes[rows])
            )
            self.dirty = True
            self.unsaved += dropped
        return dropped

    def scores(self, query: str, vector: npt.NDArray[np.float32]) -> Scores:
        """Cosine score of every row against ``query``'s unit vector, extended incrementally."""
        return self.scores_of([(query, vector)])[0]

    def scores_of(self, queries: Sequence[tuple[str, npt.NDArray[np.float32]]]) -> list[Scores]:
        """:meth:`scores` of each ``(query, unit vector)``, the rows added since they were last
        scored taken in one call of the kernel for all the queries that left off at the same
        row (a chat's topics, each request: one call, not one a topic)."""
        rows = len(self.keys)
        out: list[Scores | None] = [None] * len(queries)
        grown: dict[int, list[tuple[int, str, Any]]] = {}  # the row they left off at -> queries
        for k, (query, vector) in enumerate(queries):
            memo = self._scores.get(query)
            # another vector under the name (a topic whose members changed, say) scores every
            # row anew: extending its old scores would mix two queries' in one array
            if memo is not None and memo[1] is not vector and not np.array_equal(memo[1], vector):
                memo = None
            # the query as encoded before
            coded = (memo[2], memo[3]) if memo is not None else encode_queries(vector)
            if memo is None or len(memo[0]) > rows:
                scales, codes = self.stored
                out[k] = self._keep_scores(
                    query, coded_cosines(codes, scales, *coded)[:, 0], vector, coded
                )
            elif len(memo[0]) < rows:  # a chat grows by a turn: only its few rows are scored
                grown.setdefault(len(memo[0]), []).append((k, query, memo))
            else:
                out[k] = self._keep_scores(query, memo[0], vector, coded)
        for start, group in grown.items():
            added = coded_cosines(
                self._codes[start:rows],
                self._scales[start:rows],
                np.concatenate([memo[2] for _, _, memo in group]),
                np.concatenate([memo[3] for _, _, memo in group]),
            )  # column by column what each query alone gives: the same integer sums, scaled
            for column, (k, query, memo) in enumerate(group):
                done = appended(memo[0], added[:, column])  # into the memo's spare room
                out[k] = self._keep_scores(query, done, memo[1], (memo[2], memo[3]))
        assert all(done is not None for done in out)  # every query took one way above
        return [done for done in out if done is not None]

    def _keep_scores(
        self,
        query: str,
        done: Scores,
        vector: npt.NDArray[np.float32],
        coded: tuple[Scales, Codes],
    ) -> Scores:
        if len(self._scores) >= MAX_MEMO_SCORES and query not in self._scores:
            self._scores.clear()
        self._scores[query] = (done, vector, *coded)
        return done
