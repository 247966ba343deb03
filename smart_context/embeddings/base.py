"""The one-method Protocol every embedding backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into unit vectors.

    ``model_id`` names the model and is written into the embedding cache: vectors of two
    different ``model_id`` are never compared. ``embed`` returns an ``(n, dim)`` float32 array
    whose rows are L2-normalized, one row per text, in order. Failures raise
    ``smart_context.errors.EmbeddingError`` with a message a person can act on.
    """

    model_id: str

    async def embed(self, texts: Sequence[str]) -> Matrix: ...


def normalize_rows(matrix: npt.ArrayLike) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    unit: Matrix = (m / norms).astype(np.float32, copy=False)
    return unit
