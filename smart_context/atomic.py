"""Atomic file replacement: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path


def _process_umask() -> int:
    # Read once at import, while nothing else runs: os.umask can only be read by setting it.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _process_umask()


def write_atomic(path: Path, data: bytes | str | Iterable[bytes]) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, fsync, rename;
    ``data`` may come in pieces (an iterable of bytes), written as they come.

    The file keeps the permissions it had (a user's ``.vault.toml`` is theirs), and a new one
    gets those a plain ``open()`` would give it, not the temporary file's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        pieces: Iterable[bytes] = (data.encode("utf-8"),)
    else:
        pieces = (data,) if isinstance(data, bytes) else data
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o666 & ~_UMASK
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in pieces:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # not fchmod: Windows has no fchmod before Python 3.13
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
