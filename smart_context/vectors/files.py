"""Embedding files: a :class:`KeyedMatrix` on disk, e.g. ``.memory/{chat_id}.embeddings.json``.

File format (version 1), one JSON object::

    {
      "format": "smart-context/embeddings",
      "version": 1,
      "model": "all-MiniLM-L6-v2-u8-dq",        # the Embedder.model_id the vectors came from
      "dim": 384,
      "dtype": "int8",
      "keys": ["a1b2:9f86d081884c7d65...", ...], # a chat's: {message_id}:{blake3 hex prefix}
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

``load`` builds whichever :class:`KeyedMatrix` class the caller names (a chat's is
:class:`~smart_context.vectors.chat.ChatVectors`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path
from typing import TypeVar

from smart_context.atomic import write_atomic
from smart_context.vectors.codec import as_hex, from_hex
from smart_context.vectors.keyed import KeyedMatrix

log = logging.getLogger(__name__)

FORMAT = "smart-context/embeddings"
VERSION = 1
K = TypeVar("K", bound=KeyedMatrix)


def to_json(vectors: KeyedMatrix) -> str:
    """The file content for ``vectors`` (format in the module docstring)."""
    return json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "model": vectors.model_id,
            "dim": vectors.dim,
            "dtype": "int8",
            "keys": vectors.keys,
            **as_hex(*vectors.stored),
        },
        separators=(",", ":"),
    )


def from_json(text: str | bytes, kind: type[K]) -> K:
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
    return kind(model, dim, keys, from_hex(data, len(keys), dim))


def load(path: Path, kind: type[K], model_id: str, dim: int | None = None) -> K | None:
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
        cached = from_json(raw, kind)
    except (ValueError, UnicodeDecodeError) as exc:
        aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        log.warning(
            "Smart Context: embedding cache %s is damaged (%s); moved to %s and rebuilding",
            path,
            exc,
            aside.name,
        )
        # unreadable and immovable: save() will overwrite it, which is the same outcome
        with contextlib.suppress(OSError):
            path.replace(aside)
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


def save(path: Path, vectors: KeyedMatrix) -> None:
    """Write the cache atomically and mark it clean."""
    write_atomic(path, to_json(vectors))
    vectors.mark_saved()
