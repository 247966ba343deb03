"""The one-method Protocol every embedding backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from smart_context.vectors.ops import Matrix


class Embedder(Protocol):
    """Turns texts into unit vectors.

    ``model_id`` names the model and is written into the embedding cache: vectors of two
    different ``model_id`` are never compared. ``embed`` returns an ``(n, dim)`` float32 array
    whose rows are L2-normalized, one row per text, in order. Failures raise
    ``smart_context.errors.EmbeddingError`` with a message a person can act on. Batching and
    caching live outside the backends (:mod:`smart_context.store`).
    """

    model_id: str

    async def embed(self, texts: Sequence[str]) -> Matrix: ...
