"""The per-chat embedding cache: ``.memory/{chat_id}.embeddings.json``.

File format (version 1), one JSON object::

    {
      "format": "smart-context/embeddings",
      "version": 1,
      "model": "all-MiniLM-L6-v2-int8-dq",      # the Embedder.model_id the vectors came from
      "dim": 384,
      "dtype": "int8",
      "keys": ["a1b2:9f86d081884c7d65...", ...], # {message_id}:{blake3 hex prefix of content}
      "scales": "<hex>",                         # one little-endian float32 per row
      "vectors": "<hex>"                         # len(keys) x dim int8, row-major
    }

Each unit vector is stored as int8 with its own scale (``row = int8 * scale``): cosine scores
move by about 0.001, below the three decimals we report. Hex rather than base64 because
Python decodes hex three times faster, and one blob rather than a list per entry lets a
10,000-message file (about 8 MB) load with one ``json.loads`` and one ``bytes.fromhex``.
Writes are atomic. A file that cannot
be read, or was written for another model or dimension, is set aside as
``{name}.corrupt-{time}`` (damaged) or simply replaced (other model) and rebuilt: never a crash.

In memory a chat's vectors are a :class:`ChatVectors`: the matrix plus a key index, and a memo
of the last content seen per message id so a warm request does not re-hash the history.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.atomic import write_atomic
from smart_context.vectors import (
    Matrix,
    cache_key,
    dequantize,
    message_text,
    quantize,
)

log = logging.getLogger(__name__)

FORMAT = "smart-context/embeddings"
_NO_ROWS: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
MAX_LABEL_SCORES = 64  # labels whose scores a chat keeps (each is 4 bytes per message)
VERSION = 1


class ChatVectors:
    """The cached vectors of one chat's messages under one embedding model."""

    def __init__(
        self, model_id: str, dim: int, keys: Sequence[str] = (), matrix: Matrix | None = None
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self._reset(keys, matrix)
        self.dirty = False

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
        # label -> its cosine score against rows [0, len(scores)): a selected topic's scores do
        # not change between requests, so a request only scores the rows added since.
        self._label_scores: dict[str, npt.NDArray[np.float32]] = {}
        # message id -> (text, row): lets a warm lookup compare strings instead of hashing
        self._seen: dict[str, tuple[str, int]] = {}
        # The last history located, for the common case of the same history plus a few new
        # messages: comparing two lists in C is far cheaper than a Python step per message.
        self._last: tuple[list[Any], list[Any], npt.NDArray[np.intp]] = ([], [], _NO_ROWS)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def matrix(self) -> Matrix:
        """The ``(len(self), dim)`` matrix of unit rows (a view, not a copy)."""
        return self._matrix[: len(self.keys)]

    def locate(
        self, messages: Sequence[Mapping[str, Any]], ids: list[Any] | None = None
    ) -> tuple[npt.NDArray[np.intp], list[int]]:
        """Row of each message in :attr:`matrix` (-1 when missing) and the indexes of the misses.

        ``ids`` are the messages' ids when the caller has them already.
        """
        if ids is None:
            ids = [m.get("id") for m in messages]
        contents = [m.get("content") for m in messages]
        last_ids, last_contents, last_rows = self._last
        known = len(last_ids)
        if not (
            known <= len(ids) and ids[:known] == last_ids and contents[:known] == last_contents
        ):
            known = 0
        tail, missing = self._locate_each(messages, known)
        rows = np.concatenate((last_rows[:known], tail)) if known else tail
        if not missing:
            self._last = (ids, contents, rows)
        return rows, missing

    def _locate_each(
        self, messages: Sequence[Mapping[str, Any]], start: int
    ) -> tuple[npt.NDArray[np.intp], list[int]]:
        seen, row_of = self._seen, self._row_of
        rows: list[int] = []
        missing: list[int] = []
        for i in range(start, len(messages)):
            message = messages[i]
            mid = str(message.get("id"))
            text = message_text(message)
            hit = seen.get(mid)
            if hit is not None and hit[0] == text:
                rows.append(hit[1])
                continue
            row = row_of.get(cache_key(mid, text), -1)
            if row < 0:
                missing.append(i)
            else:
                seen[mid] = (text, row)
            rows.append(row)
        return np.fromiter(rows, dtype=np.intp, count=len(rows)), missing

    def add(self, messages: Sequence[Mapping[str, Any]], vectors: Matrix) -> None:
        """Store one unit vector per message (same order)."""
        if vectors.shape != (len(messages), self.dim):
            raise ValueError(f"expected {len(messages)}x{self.dim} vectors, got {vectors.shape}")
        needed = len(self.keys) + len(messages)
        if needed > self._matrix.shape[0]:
            grown = np.zeros((max(needed, 2 * self._matrix.shape[0]), self.dim), dtype=np.float32)
            grown[: len(self.keys)] = self.matrix
            self._matrix = grown
        for message, vector in zip(messages, vectors):
            mid, text = str(message.get("id")), message_text(message)
            key = cache_key(mid, text)
            row = self._row_of.get(key)
            if row is None:
                row = len(self.keys)
                self.keys.append(key)
                self._row_of[key] = row
            else:
                self._label_scores.clear()  # a vector changed in place: scores are stale
            self._matrix[row] = vector
            self._seen[mid] = (text, row)
        self.dirty = True

    def label_scores(self, label: str, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine score of every row against one label's unit vector, computed incrementally."""
        done = self._label_scores.get(label)
        rows = len(self.keys)
        if done is None or len(done) > rows:
            done = self.matrix @ vector
        elif len(done) < rows:
            done = np.concatenate((done, self._matrix[len(done) : rows] @ vector))
        if len(self._label_scores) >= MAX_LABEL_SCORES and label not in self._label_scores:
            self._label_scores.clear()
        self._label_scores[label] = done
        return done

    def prune(self, live_messages: Sequence[Mapping[str, Any]]) -> int:
        """Drop the rows of deleted or edited messages; returns how many were dropped."""
        rows, _ = self.locate(live_messages)
        keep = np.unique(rows[rows >= 0])
        dropped = len(self.keys) - len(keep)
        if dropped:
            self._reset([self.keys[i] for i in keep], self.matrix[keep].copy())
            self.dirty = True
        return dropped


def to_json(vectors: ChatVectors) -> str:
    """The file content for ``vectors`` (format in the module docstring)."""
    return json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "model": vectors.model_id,
            "dim": vectors.dim,
            "dtype": "int8",
            "keys": vectors.keys,
            **quantize(vectors.matrix),
        },
        separators=(",", ":"),
    )


def from_json(text: str | bytes) -> ChatVectors:
    """Parse a cache file; raises ``ValueError`` describing what is wrong with it."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("not a Smart Context embedding cache")
    if data.get("version") != VERSION:
        raise ValueError(f"unsupported cache version {data.get('version')!r}")
    model, dim, keys = data.get("model"), data.get("dim"), data.get("keys")
    if not isinstance(model, str) or not isinstance(dim, int) or dim <= 0:
        raise ValueError("cache header lacks a model name or a positive dimension")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ValueError("cache keys are not a list of strings")
    if data.get("dtype") != "int8":
        raise ValueError(f"unsupported vector type {data.get('dtype')!r}")
    return ChatVectors(model, dim, keys, dequantize(data, len(keys), dim))


def load(path: Path, model_id: str, dim: int | None) -> ChatVectors | None:
    """The cache at ``path`` if it is sound and made by ``model_id``; else ``None``.

    A damaged file is renamed aside (kept for inspection, never silently destroyed); a sound
    file of another model is left for :func:`save` to replace.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("Smart Context: cannot read embedding cache %s (%s); rebuilding it", path, exc)
        return None
    try:
        cached = from_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        log.warning(
            "Smart Context: embedding cache %s is damaged (%s); moved to %s and rebuilding",
            path,
            exc,
            aside.name,
        )
        try:
            path.replace(aside)
        except OSError:
            pass  # unreadable and immovable: save() will overwrite it, which is the same outcome
        return None
    if cached.model_id != model_id or (dim is not None and cached.dim != dim):
        log.info(
            "Smart Context: embedding cache %s is for model %s/%d; re-embedding for %s",
            path,
            cached.model_id,
            cached.dim,
            model_id,
        )
        return None
    return cached


def save(path: Path, vectors: ChatVectors) -> None:
    """Write the cache atomically and mark it clean."""
    write_atomic(path, to_json(vectors))
    vectors.dirty = False
