"""Pure numpy vector maths shared by every system: unit rows and pooled scores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Scores = npt.NDArray[np.float32]


def normalize_rows(matrix: npt.ArrayLike) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    unit: Matrix = (m / norms).astype(np.float32, copy=False)
    return unit


def max_pool(columns: Sequence[Scores]) -> Scores:
    """Element-wise maximum of score arrays of one length: each row's best match over several
    queries (topic labels, query chunks). No query gives an empty array."""
    if not columns:
        return np.zeros(0, dtype=np.float32)
    best: Scores = columns[0]
    for column in columns[1:]:
        best = np.maximum(best, column)
    return best


def appended(kept: npt.NDArray[Any], new: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``kept`` with ``new`` after it along the last axis, as the start of an array with room
    to spare: the next call writes into that room, past the end of every view handed out
    (which stays as it was), and the array is made again, with room for as many more, only
    when the room runs out. An array that grows by a chat's turn then costs O(the turn), not
    a copy of the whole (a 100,000-message chat's token counts and lengths alone took a
    twentieth of its turn).

    The contract: ``kept`` is the longest view of its array anyone holds (the caller's latest
    result, kept in one place and replaced by this call's), appends to one array come one at a
    time (the callers run on the event loop), and what it hands out is only read. A view
    that is not the start of its own array (a column, an array of another owner's) is copied."""
    n, k = kept.shape[-1], new.shape[-1]
    room = kept.base
    if (
        isinstance(room, np.ndarray)
        and room.dtype == kept.dtype
        and room.shape[:-1] == kept.shape[:-1]
        and room.strides == kept.strides
        and room.ctypes.data == kept.ctypes.data
        and room.shape[-1] >= n + k
    ):
        room[..., n : n + k] = new
        return room[..., : n + k]
    room = np.empty((*kept.shape[:-1], max(2 * (n + k), 64)), dtype=kept.dtype)
    room[..., :n] = kept
    room[..., n : n + k] = new
    return room[..., : n + k]
