"""Embedding backends behind one Protocol (:class:`Embedder`); batching and caching live outside
them, in :mod:`smart_context.store`."""

from __future__ import annotations

from smart_context.embeddings.base import Embedder

__all__ = ["Embedder"]
