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

import binascii
import contextlib
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from smart_context.atomic import write_atomic
from smart_context.vectors.codec import from_hex
from smart_context.vectors.int8 import Codes, Scales
from smart_context.vectors.keyed import KeyedMatrix

log = logging.getLogger(__name__)

FORMAT = "smart-context/embeddings"
VERSION = 1
PIECE_BYTES = 1 << 18  # the most a piece of a file being written holds (file_pieces)
K = TypeVar("K", bound=KeyedMatrix)


@dataclass(frozen=True)
class Snapshot:
    """What a collection's file holds, as it was when taken (:func:`snapshot`), to be written
    out (:func:`write`) later, in a worker thread, while the collection changes; ``number``:
    the order it was taken in, in this process."""

    model_id: str
    dim: int
    keys: list[str]
    stored: tuple[Scales, Codes]
    number: int


_TAKEN = itertools.count(1)


def snapshot(vectors: KeyedMatrix) -> Snapshot:
    """The collection as it is now: a copy of its keys and its rows as kept, which stay as they
    are (:attr:`KeyedMatrix.stored`). Writing a 10,000-message chat's file out took 34 ms (366
    at 100,000) on the event loop; taking this takes a copy of the keys."""
    keys = list(vectors.keys)
    return Snapshot(vectors.model_id, vectors.dim, keys, vectors.stored, next(_TAKEN))


@dataclass
class _Written:
    """One file's writes: one at a time, and the number of the snapshot written last."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    number: int = 0


_WRITTEN: dict[str, _Written] = {}
_WRITTEN_GUARD = threading.Lock()


def write(path: Path, taken: Snapshot) -> bool:
    """Write ``taken`` to ``path`` atomically, in the order the snapshots were taken: one
    older than the snapshot last written there is dropped (False). Two threads may write one
    file at once (two passes, a collection closed to make room and opened again, a thread's
    write and the flush at shutdown), and the file must keep the newer rows, whichever thread
    finishes last."""
    with _WRITTEN_GUARD:
        written = _WRITTEN.setdefault(os.fspath(path), _Written())
    with written.lock:
        if taken.number < written.number:
            return False
        write_atomic(path, file_pieces(taken))
        written.number = taken.number
        return True


def to_json(vectors: KeyedMatrix | Snapshot) -> str:
    """The file content for ``vectors`` (format in the module docstring)."""
    return b"".join(file_pieces(vectors)).decode("ascii")


def file_pieces(vectors: KeyedMatrix | Snapshot) -> Iterator[bytes]:
    """The file content for ``vectors`` in pieces of at most about :data:`PIECE_BYTES`, each
    made in one short call: a thread writing a large file lets the event loop run between
    them (a 100,000-message file made in one ``json.dumps`` held the interpreter's lock, and
    every request with it, for a quarter of a second). The bytes are those of one
    ``json.dumps`` of the object with compact separators (ASCII: its strings escaped)."""
    head = {
        "format": FORMAT,
        "version": VERSION,
        "model": vectors.model_id,
        "dim": vectors.dim,
        "dtype": "int8",
    }
    yield json.dumps(head, separators=(",", ":"))[:-1].encode("ascii") + b',"keys":['
    keys = vectors.keys
    step = max(PIECE_BYTES // 64, 1)  # keys of some 40 characters
    for start in range(0, len(keys), step):
        listed = json.dumps(keys[start : start + step], separators=(",", ":"))[1:-1]
        yield (b"," if start else b"") + listed.encode("ascii")
    scales, codes = vectors.stored
    yield b'],"scales":"'
    yield from _hex_pieces(np.ascontiguousarray(scales, dtype="<f4"))
    yield b'","vectors":"'
    yield from _hex_pieces(np.ascontiguousarray(codes, dtype=np.int8))
    yield b'"}'


def _hex_pieces(array: np.ndarray) -> Iterator[bytes]:
    """The bytes of ``array`` as hex, in pieces (:func:`file_pieces`)."""
    raw = array.reshape(-1).view(np.uint8).data
    for start in range(0, len(raw), PIECE_BYTES // 2):
        yield binascii.hexlify(raw[start : start + PIECE_BYTES // 2])


def from_json(text: str | bytes, kind: type[K]) -> K:
    """Parse a cache file; raises ``ValueError`` describing what is wrong with it. A file laid
    out as :func:`file_pieces` writes it is read in pieces (:func:`_read_in_pieces`)."""
    if isinstance(text, bytes):
        read = _read_in_pieces(text)
        if read is not None:
            data, stored = read
            return kind(*_header(data), stored)
    data = json.loads(text)
    model, dim, keys = _header(data)
    return kind(model, dim, keys, from_hex(data, len(keys), dim))


def _header(data: Any) -> tuple[str, int, list[str]]:
    """The model, dimension and keys of a parsed cache file, checked."""
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
    return model, dim, keys


_KEYS, _SCALES, _VECTORS = b',"keys":[', b'],"scales":"', b'","vectors":"'


def _read_in_pieces(raw: bytes) -> tuple[dict[str, Any], tuple[Scales, Codes]] | None:
    """A file as :func:`file_pieces` lays it out, read in short calls, so that a thread reading
    a large one lets the event loop run between them (one ``json.loads`` and one
    ``bytes.fromhex`` of a 100,000-message file held the interpreter's lock, and every request,
    for 90 ms): the header and the keys parsed as JSON, the hex strings found where their
    lengths put them and read a piece at a time. ``None`` for any other layout (a file written
    by hand, whitespace in the hex): :func:`from_json` reads it whole, as before."""
    start = raw.find(_KEYS, 0, 4096)  # (quotes in a JSON string are escaped: never a match)
    end = raw.find(_SCALES, start) if start >= 0 else -1
    if end < 0:
        return None
    try:
        data = json.loads(raw[:start] + b"}")
        keys = json.loads(raw[start + len(_KEYS) - 1 : end + 1])
    except (ValueError, RecursionError):
        return None
    dim = data.get("dim") if isinstance(data, dict) else None
    if not isinstance(dim, int) or not isinstance(keys, list) or dim <= 0:
        return None
    rows = len(keys)
    scales_at = end + len(_SCALES)
    vectors_at = scales_at + 8 * rows + len(_VECTORS)
    stop = vectors_at + 2 * rows * dim
    if raw[vectors_at - len(_VECTORS) : vectors_at] != _VECTORS or raw[stop:].strip() != b'"}':
        return None
    try:
        scales = _from_hex_pieces(raw, scales_at, vectors_at - len(_VECTORS)).view("<f4")
        codes = _from_hex_pieces(raw, vectors_at, stop).view(np.int8).reshape(rows, dim)
    except ValueError:  # (binascii.Error) not hex
        return None
    return data | {"keys": keys}, (scales.astype(np.float32), codes)


def _from_hex_pieces(raw: bytes, start: int, stop: int) -> np.ndarray:
    """The bytes the hex ``raw[start:stop]`` spells, read a piece at a time."""
    out = np.empty((stop - start) // 2, dtype=np.uint8)
    step = PIECE_BYTES
    for at in range(start, stop, step):
        piece = binascii.unhexlify(raw[at : min(at + step, stop)])
        first = (at - start) // 2
        out[first : first + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
    return out


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
    """Write the cache atomically (:func:`write`, after any older snapshot of it) and mark it
    clean."""
    write(path, snapshot(vectors))
    vectors.mark_saved()
