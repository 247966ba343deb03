"""Embedding backends behind one Protocol; batching and caching live outside them."""

from __future__ import annotations

from smart_context.embeddings.base import Embedder, normalize_rows

__all__ = ["Embedder", "normalize_rows"]
