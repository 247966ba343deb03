"""Pure numpy vector maths shared by every system: unit rows and pooled scores."""

from __future__ import annotations

from collections.abc import Sequence

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
