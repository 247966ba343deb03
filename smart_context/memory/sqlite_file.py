"""Opening the memory database file: settings, version check, migrations, damaged files set aside.

Opening is the one place that decides what happens to a file we did not write, so its rules are
strict:

- a file from a newer Smart Context (``user_version`` above :data:`LATEST_VERSION`) is refused
  with :class:`MemoryDBError` before anything is written to it: never downgraded, never moved;
- a file SQLite reports as damaged (not a database, malformed, or ``quick_check`` not "ok") is
  renamed to ``<name>.corrupt-<UTC time>`` with its ``-wal`` and ``-shm`` files (named so SQLite
  still pairs them when someone opens the set-aside copy to recover it), and a fresh database is
  created in its place; the caller gets a sentence for the person to read;
- any other failure (locked for longer than the busy timeout, no permission, disk full) is a
  :class:`MemoryDBError` and the file stays where it is: it is not damaged.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from smart_context.errors import MemoryDBError
from smart_context.memory.schema import LATEST_VERSION, MIGRATIONS

BUSY_TIMEOUT_MS = 5000
# SQLITE_CORRUPT and SQLITE_NOTADB: the only primary result codes that mean the bytes are bad.
_DAMAGE_CODES = frozenset({11, 26})


class _Damaged(Exception):
    """The file's bytes are not a usable database; ``str()`` is SQLite's description."""


def open_database(path: Path) -> tuple[sqlite3.Connection, str | None]:
    """A ready connection to ``path``, and a problem sentence if a damaged file was set aside.

    The connection is in autocommit mode (``isolation_level=None``): the caller opens its own
    ``BEGIN IMMEDIATE`` transactions. It may be used from any thread, one at a time.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for _attempt in range(3):
        identity = _identity(path)
        try:
            return _open_checked(path), None
        except _Damaged as damaged:
            if _identity(path) != identity:
                continue  # another process replaced the file meanwhile: look at the new one
            aside = set_aside(path)
            try:
                return _open_checked(path), _set_aside_problem(path, aside, str(damaged))
            except _Damaged as again:
                raise MemoryDBError(
                    f"A fresh memory database at {path} could not be created ({again}); "
                    "check the disk and the folder's permissions."
                ) from again
    raise MemoryDBError(
        f"The memory database at {path} kept changing while it was being opened; "
        "another program may be replacing it. Close the other Smart Context processes and retry."
    )


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to the existing database at ``path``, for reading user data out
    (an export): nothing is created, migrated or set aside. A damaged file, or one of a newer
    Smart Context, is a :class:`MemoryDBError` that says so; the file is left as it is."""
    try:
        _inspect(path)
    except _Damaged as damaged:
        raise MemoryDBError(
            f"The memory database at {path} is damaged ({damaged}); it was left as it is. "
            f"SQLite's '.recover' command (sqlite3 {path} .recover) may read its memories back; "
            "the sidecar sets the file aside and starts a fresh one when it next opens it."
        ) from damaged
    try:
        return sqlite3.connect(_read_only_uri(path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise MemoryDBError(f"The memory database at {path} could not be read: {exc}") from exc


def set_aside(path: Path) -> Path:
    """Rename ``path`` (and its ``-wal``/``-shm``) to a free ``.corrupt-<UTC time>`` name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    number = 1
    while aside.exists():
        number += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{number}")
    for suffix in ("-wal", "-shm", ""):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.replace(companion, aside.with_name(aside.name + suffix))
    return aside


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the file's header (0 for a new, empty file)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    assert isinstance(version, int)
    return version


def _open_checked(path: Path) -> sqlite3.Connection:
    """Inspect an existing file read-only, then connect, switch to WAL and migrate."""
    if path.exists():
        _inspect(path)
    conn = _connect(path)
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise MemoryDBError(
                f"The memory database at {path} could not switch to WAL mode (it stayed in "
                f"{mode!r} mode); it needs a local disk that supports shared memory files."
            )
        # NORMAL is durable across application crashes in WAL mode, and much cheaper than FULL.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(path, conn)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise _open_error(path, exc) from exc
        raise
    return conn


def _read_only_uri(path: Path) -> str:
    """The URI of a read-only connection to ``path`` that writes nothing beside it.

    A read-only connection to a WAL database still creates its ``-wal`` and ``-shm`` files when
    they are missing (a database closed cleanly has none), and cannot remove them again, so
    reading would leave two new files in the vault. With no ``-wal`` file every committed page
    is in the main file: it is opened as ``immutable`` then, which creates nothing. A ``-wal``
    file means a writer is running (or crashed): its pages are needed, so the usual read-only
    connection reads them, sharing the files that are already there.
    """
    uri = f"{path.absolute().as_uri()}?mode=ro"
    if not path.with_name(path.name + "-wal").exists():
        uri += "&immutable=1"
    return uri


def _inspect(path: Path) -> None:
    """Refuse a newer schema and raise ``_Damaged`` for bad bytes, without writing anything.

    Read-only on purpose: a read-write connection that finds the main file damaged deletes its
    ``-wal`` file on close, and that file may hold the most recent memories.
    """
    try:
        conn = sqlite3.connect(_read_only_uri(path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise _open_error(path, exc) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _refuse_newer(path, user_version(conn))
        _quick_check(conn)
    except sqlite3.DatabaseError as exc:
        raise _open_error(path, exc) from exc
    finally:
        conn.close()


def _connect(path: Path) -> sqlite3.Connection:
    """A read-write connection in autocommit mode, usable from any thread (one at a time)."""
    try:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except sqlite3.Error as exc:
        raise _open_error(path, exc) from exc
    return conn


def _open_error(path: Path, exc: sqlite3.Error) -> Exception:
    """``_Damaged`` when SQLite says the bytes are bad, else a ``MemoryDBError`` to act on."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _DAMAGE_CODES:
        return _Damaged(str(exc))
    return MemoryDBError(
        f"The memory database at {path} could not be opened: {exc}. If another program holds it "
        "locked, close it and retry; otherwise check the folder's permissions and free space."
    )


def _quick_check(conn: sqlite3.Connection) -> None:
    """Raise ``_Damaged`` unless SQLite's quick integrity check answers "ok"."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    if [tuple(row) for row in rows] != [("ok",)]:
        detail = "; ".join(str(row[0]) for row in rows[:3])
        raise _Damaged(f"integrity check failed: {detail}")


def _refuse_newer(path: Path, version: int) -> None:
    """Raise ``MemoryDBError`` for a file written by a newer Smart Context."""
    if version > LATEST_VERSION:
        raise MemoryDBError(
            f"The memory database at {path} has schema version {version}, but this Smart "
            f"Context only knows versions up to {LATEST_VERSION}: it was written by a newer "
            "Smart Context. Upgrade Smart Context to use it; the file was left as it is."
        )


def _migrate(path: Path, conn: sqlite3.Connection) -> None:
    """Apply the missing migrations in one write transaction (or none: the file stays as it was)."""
    if user_version(conn) == LATEST_VERSION:
        return  # the common case takes no write lock
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = user_version(conn)  # again: another process may have migrated meanwhile
        _refuse_newer(path, version)
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {LATEST_VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _set_aside_problem(path: Path, aside: Path, detail: str) -> str:
    """The sentence a person reads after a damaged database was replaced by a fresh one."""
    return (
        f"The memory database {path} was damaged ({detail}), so it was set aside as {aside} "
        "and a fresh, empty one was created. Stored memories and importance marks in it were "
        f"NOT deleted: they remain in {aside.name}, which SQLite's '.recover' command "
        f"(sqlite3 {aside} .recover) may be able to read back. Summaries and the search index "
        "are rebuilt on their own."
    )


def _identity(path: Path) -> tuple[int, int] | None:
    """The file's (device, inode), to notice another process replacing it; None if absent."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino)
