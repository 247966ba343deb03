"""A matrix of unit vectors addressed by string keys, grown in place, with memoised scores.

Every collection of vectors (a chat's messages, and later the vault's items, notes and stored
memories) is a :class:`KeyedMatrix` under one embedding model: what a key means is the caller's
business (a chat uses ``{message_id}:{content_hash}``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from smart_context.vectors.codec import as_stored
from smart_context.vectors.ops import Matrix, Scores

Rows = npt.NDArray[np.intp]
MAX_MEMO_SCORES = 64  # queries whose scores a matrix keeps (each is 4 bytes per row)
# Values derived from the rows (a topic's vector and members...). Every extraction names its
# topics anew, so old entries are garbage: past this many, all are dropped and re-derived.
MAX_DERIVED = 256
V = TypeVar("V")


class KeyedMatrix:
    """Unit rows of one model and dimension, one per key; ``dirty`` until saved."""

    def __init__(
        self, model_id: str, dim: int, keys: Sequence[str] = (), matrix: Matrix | None = None
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self._reset(keys, matrix)
        self.dirty = False
        self.unsaved = 0  # rows added or dropped since the collection was last saved

    def mark_saved(self) -> None:
        """The collection as it is now is on disk (or being written)."""
        self.dirty = False
        self.unsaved = 0

    def _reset(self, keys: Sequence[str], matrix: Matrix | None) -> None:
        self.keys: list[str] = list(keys)
        self._row_of: dict[str, int] = {k: i for i, k in enumerate(self.keys)}
        rows = len(self.keys)
        if matrix is not None and matrix.shape == (rows, self.dim) and matrix.dtype == np.float32:
            self._matrix = matrix  # a freshly decoded file: adopt it instead of copying 15 MB
        else:
            self._matrix = np.zeros((max(rows, 16), self.dim), dtype=np.float32)
            if matrix is not None and rows:
                self._matrix[:rows] = matrix
        # query -> its cosine score against rows [0, len(scores)): a selected topic's scores do
        # not change between requests, so a request only scores the rows added since.
        self._scores: dict[str, Scores] = {}
        # what callers derive from existing rows (a topic's vector, its members' rows): valid
        # until a row changes in place or rows are renumbered, when both memos are cleared;
        # read with ``derived.get``, written with :meth:`remember` (which bounds it)
        self.derived: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def matrix(self) -> Matrix:
        """The ``(len(self), dim)`` matrix of unit rows (a view, not a copy)."""
        return self._matrix[: len(self.keys)]

    def row(self, key: str) -> int:
        """The row of ``key``, or -1."""
        return self._row_of.get(key, -1)

    def add(self, keys: Sequence[str], vectors: Matrix) -> Rows:
        """Store one unit vector per key (same order); a known key is overwritten in place.

        Returns the row of each key.
        """
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(f"expected {len(keys)}x{self.dim} vectors, got {vectors.shape}")
        vectors = as_stored(vectors)  # what the saved file gives back after a restart
        needed = len(self.keys) + len(keys)
        if needed > self._matrix.shape[0]:
            grown = np.zeros((max(needed, 2 * self._matrix.shape[0]), self.dim), dtype=np.float32)
            grown[: len(self.keys)] = self.matrix
            self._matrix = grown
        rows = np.empty(len(keys), dtype=np.intp)
        for i, key in enumerate(keys):
            row = self._row_of.get(key)
            if row is None:
                row = len(self.keys)
                self.keys.append(key)
                self._row_of[key] = row
            else:  # a vector changed in place: memoised scores are stale
                self.forget()
            rows[i] = row
        self._matrix[rows] = vectors
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
            self._reset([self.keys[i] for i in rows.tolist()], self.matrix[rows].copy())
            self.dirty = True
            self.unsaved += dropped
        return dropped

    def scores(self, query: str, vector: npt.NDArray[np.float32]) -> Scores:
        """Cosine score of every row against ``query``'s unit vector, extended incrementally."""
        done = self._scores.get(query)
        rows = len(self.keys)
        if done is None or len(done) > rows:
            done = self.matrix @ vector
        elif len(done) < rows:
            done = np.concatenate((done, self._matrix[len(done) : rows] @ vector))
        if len(self._scores) >= MAX_MEMO_SCORES and query not in self._scores:
            self._scores.clear()
        self._scores[query] = done
        return done
