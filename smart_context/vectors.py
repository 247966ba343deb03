"""Pure numpy helpers for the hot path: content keys, compact encoding, scoring.

Nothing here loops over vectors in Python: scoring a chat is one matrix product.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import blake3
import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]

HASH_HEX_DIGITS = 32  # CONTRACT.md §2 asks for at least 16; 128 bits makes collisions moot


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a history message; OpenAI-style content parts are joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if content is None else str(content)


def content_hash(text: str) -> str:
    """A blake3 hex digest prefix of a message's text."""
    return blake3.blake3(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_HEX_DIGITS]


def cache_key(message_id: str, text: str) -> str:
    """``{message_id}:{content_hash}``: an edited message gets a new key, hence a new vector."""
    return f"{message_id}:{content_hash(text)}"


def encode_matrix(matrix: Matrix) -> str:
    """Rows as little-endian float16, base64: a quarter of the size of float text, exact enough
    for cosine scores that are reported to three decimals."""
    return base64.b64encode(np.ascontiguousarray(matrix, dtype="<f2").tobytes()).decode("ascii")


def decode_matrix(text: str, rows: int, dim: int) -> Matrix:
    """Inverse of :func:`encode_matrix`; raises ``ValueError`` if the size does not match."""
    # No ``validate=True``: it doubles the decode time of a large cache, and the size check
    # below already rejects damaged text (stray characters change the decoded length).
    raw = base64.b64decode(text)
    if len(raw) != rows * dim * 2:
        raise ValueError(f"expected {rows}x{dim} float16 values, found {len(raw)} bytes")
    return np.frombuffer(raw, dtype="<f2").reshape(rows, dim).astype(np.float32)


def topic_scores(messages: Matrix, topics: Matrix) -> npt.NDArray[np.float32]:
    """Each message row's best cosine similarity over the topic rows (all rows unit length)."""
    if messages.shape[0] == 0 or topics.shape[0] == 0:
        return np.zeros(messages.shape[0], dtype=np.float32)
    sims = messages @ topics.T
    return sims.max(axis=1) if sims.shape[1] > 1 else sims[:, 0]
