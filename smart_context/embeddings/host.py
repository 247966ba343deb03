"""Embedding through the host's configured embedding model (``host.llm.embed``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from smart_context.errors import EmbeddingError
from smart_context.host import LLM, resolve
from smart_context.vectors.ops import Matrix, normalize_rows


class HostEmbedder:
    """Vectors from ``host.llm.embed(texts, category=...)``.

    ``model_id`` names the host's model when the host tells it (an optional
    ``llm.model_name(category)``), so that changing the vault's embedding model invalidates the
    cache instead of comparing vectors of two models.
    """

    def __init__(
        self, llm: LLM, category: str = "embedding", model_name: str | None = None
    ) -> None:
        self.llm = llm
        self.category = category
        self.model_id = f"host:{model_name or category}"

    @classmethod
    async def from_host(cls, llm: LLM, category: str = "embedding") -> HostEmbedder:
        """Ask the host which model it uses, when it can say."""
        name = None
        model_name = getattr(llm, "model_name", None)
        if callable(model_name):
            try:
                name = await resolve(model_name(category))
            except Exception:  # an optional courtesy of the host; the category is a fine id  # noqa: BLE001
                name = None
        return cls(llm, category, name if isinstance(name, str) else None)

    async def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            raw = await resolve(self.llm.embed(list(texts), category=self.category))
        except Exception as exc:  # the host's service may raise anything; we report it plainly
            raise EmbeddingError(f"The vault's embedding model failed: {exc}") from exc
        try:
            matrix = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"The vault's embedding model returned malformed vectors: {exc}"
            ) from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or matrix.shape[1] == 0:
            raise EmbeddingError(
                f"The vault's embedding model returned {matrix.shape} for {len(texts)} texts."
            )
        return normalize_rows(matrix)
