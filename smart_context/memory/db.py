"""``MemoryDB``: the plugin's SQLite store at ``VAULT/.memory/smart_context.sqlite``.

What it keeps (see :mod:`smart_context.memory.schema`): conversation summaries (derived, may be
rebuilt), importance marks and stored memories (user data), and direct messages other plugins
post for a chat's context (with a priority and an expiry). The budget's keyword search reads the
words of the history itself (:mod:`smart_context.budget.words`), not an index kept here.

Concurrency: one connection, guarded by a lock, shared by every thread of the process (the
asyncio loop and ``asyncio.to_thread`` workers). Per-thread connections would leave one open per
pool thread that ever ran, closable only from that thread; a lock makes ``close()`` exact and
costs nothing here, because every call is a short statement. Between processes SQLite does the
work: WAL mode lets readers run beside a writer, every write is a ``BEGIN IMMEDIATE`` transaction
(a deferred one could fail to upgrade to a write without waiting), and the busy timeout of 5 s
lets a writer wait for another instead of failing.

Opening is lazy: constructing a ``MemoryDB`` touches no file; the first call opens (and creates
or migrates) the database. If the file was damaged it is set aside and :attr:`MemoryDB.problem`
says where it went.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from smart_context.errors import MemoryDBError, NotFoundError
from smart_context.memory.records import (
    MAX_DIRECT_CHARS,
    MAX_MEMORY_CHARS,
    DirectMessage,
    Memory,
    Summary,
    check_fraction,
    check_source,
    check_text,
    check_ttl,
)
from smart_context.memory.sqlite_file import BUSY_TIMEOUT_MS, open_database
from smart_context.paths import memory_dir

DB_NAME = "smart_context.sqlite"
HELD_SUMMARIES = 8  # chats whose summaries are kept in memory (MemoryDB.summaries), at most
# ...and summaries in all, over them (a 10,000-message chat has 1,250; the chat read last is kept
# whatever its size)
HELD_ROWS = 5_000
_SELECT_MEMORIES = (
    "SELECT id, content, chat_id, importance, source, created_at, updated_at FROM memories"
)
_MEMORIES_IN_ORDER = "ORDER BY importance DESC, created_at DESC, id DESC"


def database_path(vault: Path) -> Path:
    """``VAULT/.memory/smart_context.sqlite``."""
    return memory_dir(vault) / DB_NAME


class MemoryDB:
    """The memory database of one vault; safe to share between threads of one process."""

    def __init__(self, vault: Path) -> None:
        self.path = database_path(vault)
        self.problem: str | None = None
        """Set when opening found a damaged file and set it aside: a sentence for the user."""
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        # chat -> its summaries as read, and the connection and its data_version they are
        # current for: see summaries
        self._summaries: OrderedDict[str, list[Summary]] = OrderedDict()
        self._seen: tuple[sqlite3.Connection, int] | None = None

    def close(self) -> None:
        """Close the connection; a later call opens it again."""
        with self._lock:
            self._summaries.clear()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def at_once(self) -> Iterator[bool]:
        """Whether reads can be made now without waiting, for a caller on the event loop: the
        connection is open and no other thread of this process is using it. While ``True``,
        that stays so, and a read that would wait for another process fails at once
        (:class:`MemoryDBError`) instead of waiting up to the busy timeout."""
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            conn = self._conn
            if conn is None:  # opening may create or migrate the file
                yield False
                return
            try:
                conn.execute("PRAGMA busy_timeout = 0")
            except sqlite3.Error:
                yield False
                return
            try:
                yield True
            finally:
                try:
                    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                except sqlite3.Error:  # opened again, with its timeout, on the next call
                    conn.close()
                    self._conn = None
        finally:
            self._lock.release()

    def __enter__(self) -> MemoryDB:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- summaries (derived) ------------------------------------------------------------------

    def put_summaries(self, chat_id: str, rows: Iterable[Summary]) -> None:
        """Insert or replace ``rows`` (all of chat ``chat_id``) in one transaction."""
        rows = list(rows)
        values = [_summary_values(chat_id, row) for row in rows]
        with self._lock:  # the held summaries change with the table, for every reader
            try:
                with self._write() as conn:
                    conn.executemany(
                        "INSERT OR REPLACE INTO summaries (chat_id, level, from_id, to_id, "
                        "covers, size, text, tokens, source, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        values,
                    )
            except BaseException:
                self._summaries.pop(chat_id, None)
                raise
            held = self._summaries.get(chat_id)
            if held is not None:
                if all(_as_read(row) for row in rows):
                    by_key = {row.key: row for row in held} | {row.key: row for row in rows}
                    self._hold_summaries(chat_id, sorted(by_key.values(), key=_summary_order))
                else:  # a value SQLite would store as another type: read it back then
                    del self._summaries[chat_id]

    def summaries(self, chat_id: str) -> list[Summary]:
        """The chat's summaries, by level, then oldest first.

        Held in memory for the last :data:`HELD_SUMMARIES` chats read (:data:`HELD_ROWS`
        summaries in all, or the last chat's whatever their number), and kept in step with
        this object's own writes: the background pass and the budget each read a chat's
        summaries after each new one, 7 ms for the 1,250 of a 10,000-message chat. A write by
        another connection (another process) to any table changes the file's
        ``data_version``: every chat's are then read again."""
        with self._lock:
            self._check_held()
            held = self._summaries.get(chat_id)
            if held is None:
                rows = self._read(
                    "SELECT chat_id, level, from_id, to_id, covers, size, text, tokens, "
                    "source, created_at FROM summaries WHERE chat_id = ? "
                    "ORDER BY level, created_at, from_id, to_id",
                    (chat_id,),
                )
                held = [Summary(*row) for row in rows]
                self._hold_summaries(chat_id, held)
            else:
                self._summaries.move_to_end(chat_id)
            return list(held)

    def drop_summaries(
        self, chat_id: str, keys: Iterable[tuple[int, str, str]] | None = None
    ) -> None:
        """Delete all the chat's summaries, or those with the given ``(level, from_id, to_id)``."""
        with self._lock:
            held = self._summaries.pop(chat_id, None)
            if keys is None:
                with self._write() as conn:
                    conn.execute("DELETE FROM summaries WHERE chat_id = ?", (chat_id,))
                self._hold_summaries(chat_id, [])
                return
            gone = [(chat_id, level, from_id, to_id) for level, from_id, to_id in keys]
            with self._write() as conn:
                conn.executemany(
                    "DELETE FROM summaries WHERE chat_id = ? AND level = ? AND from_id = ? "
                    "AND to_id = ?",
                    gone,
                )
            if held is not None:
                dropped = {key[1:] for key in gone}
                self._hold_summaries(chat_id, [row for row in held if row.key not in dropped])

    def _hold_summaries(self, chat_id: str, rows: list[Summary]) -> None:
        held = self._summaries
        held[chat_id] = rows
        held.move_to_end(chat_id)
        while len(held) > 1 and (
            len(held) > HELD_SUMMARIES or sum(map(len, held.values())) > HELD_ROWS
        ):
            held.popitem(last=False)

    def _check_held(self) -> None:
        """Forget the held summaries when the connection is another or another connection
        has written to the file since they were read (the caller holds the lock)."""
        try:
            conn = self._connection()
            version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from exc
        if self._seen is None or self._seen[0] is not conn or self._seen[1] != version:
            self._summaries.clear()
            self._seen = (conn, version)

    # -- marks (user data) --------------------------------------------------------------------

    def set_mark(self, chat_id: str, message_id: str, important: bool) -> None:
        """Mark a message important, or (``important`` False) remove its mark."""
        with self._write() as conn:
            if important:
                conn.execute(
                    "INSERT OR IGNORE INTO marks (chat_id, message_id, marked_at) VALUES (?, ?, ?)",
                    (chat_id, message_id, time.time()),
                )
            else:
                conn.execute(
                    "DELETE FROM marks WHERE chat_id = ? AND message_id = ?", (chat_id, message_id)
                )

    def marks(self, chat_id: str) -> set[str]:
        """The ids of the chat's messages marked important."""
        rows = self._read("SELECT message_id FROM marks WHERE chat_id = ?", (chat_id,))
        return {row[0] for row in rows}

    # -- memories (user data) -----------------------------------------------------------------

    def add_memory(
        self,
        content: str,
        chat_id: str | None = None,
        importance: float = 0.5,
        source: str = "user",
        now: float | None = None,
    ) -> Memory:
        """Store a memory for ``chat_id`` (None: for every chat) and return it with its id."""
        content = check_text("memory", content, MAX_MEMORY_CHARS)
        importance = check_fraction("importance", importance)
        source = check_source(source)
        stamp = time.time() if now is None else now
        memory_id = self._insert(
            "INSERT INTO memories (content, chat_id, importance, source, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (content, chat_id, importance, source, stamp, stamp),
        )
        return Memory(memory_id, content, chat_id, importance, source, stamp, stamp)

    def memories(self, chat_id: str | None = None, include_global: bool = True) -> list[Memory]:
        """The chat's memories and (unless ``include_global`` is False) the global ones.

        Most important first, then newest. ``chat_id`` None gives the global ones only.
        """
        if chat_id is None:
            rows = self._read(f"{_SELECT_MEMORIES} WHERE chat_id IS NULL {_MEMORIES_IN_ORDER}")
        elif include_global:
            rows = self._read(
                f"{_SELECT_MEMORIES} WHERE chat_id = ? OR chat_id IS NULL {_MEMORIES_IN_ORDER}",
                (chat_id,),
            )
        else:
            rows = self._read(
                f"{_SELECT_MEMORIES} WHERE chat_id = ? {_MEMORIES_IN_ORDER}", (chat_id,)
            )
        return [Memory(*row) for row in rows]

    def all_memories(self) -> list[Memory]:
        """Every memory of every chat, in the order they were added."""
        return [Memory(*row) for row in self._read(f"{_SELECT_MEMORIES} ORDER BY id")]

    def update_memory(
        self, memory_id: int, content: str | None = None, importance: float | None = None
    ) -> Memory:
        """Change a memory's text and/or importance; ``NotFoundError`` if there is no such id."""
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = check_text("memory", content, MAX_MEMORY_CHARS)
        if importance is not None:
            changes["importance"] = check_fraction("importance", importance)
        with self._write() as conn:
            if changes:
                changes["updated_at"] = time.time()
                assignments = ", ".join(f"{column} = ?" for column in changes)
                conn.execute(
                    f"UPDATE memories SET {assignments} WHERE id = ?",  # noqa: S608 - our names
                    (*changes.values(), memory_id),
                )
            row = conn.execute(f"{_SELECT_MEMORIES} WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise NotFoundError(
                f"There is no stored memory with id {memory_id!r}; it may have been deleted. "
                "List the memories to see the current ids."
            )
        return Memory(*row)

    def delete_memory(self, memory_id: int) -> bool:
        """Delete one memory; False if there was none with that id."""
        with self._write() as conn:
            cursor = conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            return cursor.rowcount > 0

    def forget(self, chat_id: str, before: float) -> int:
        """Delete the chat's memories created before ``before``; return how many."""
        with self._write() as conn:
            cursor = conn.execute(
                "DELETE FROM memories WHERE chat_id = ? AND created_at < ?", (chat_id, before)
            )
            return cursor.rowcount

    # -- direct messages ----------------------------------------------------------------------

    def post_direct(
        self,
        chat_id: str,
        content: str,
        priority: float = 0.5,
        ttl_seconds: float | None = None,
        source: str | None = None,
        now: float | None = None,
    ) -> DirectMessage:
        """Post a message for the chat's context; expired messages of every chat go meanwhile."""
        content = check_text("direct message", content, MAX_DIRECT_CHARS)
        priority = check_fraction("priority", priority)
        ttl = check_ttl(ttl_seconds)
        source = None if source is None else check_source(source)
        stamp = time.time() if now is None else now
        expires_at = None if ttl is None else stamp + ttl
        message_id = self._insert(
            "INSERT INTO direct_messages (chat_id, content, priority, source, created_at, "
            "expires_at) VALUES (?, ?, ?, ?, ?, ?)",
            (chat_id, content, priority, source, stamp, expires_at),
            ("DELETE FROM direct_messages WHERE expires_at <= ?", (stamp,)),
        )
        return DirectMessage(message_id, chat_id, content, priority, source, stamp, expires_at)

    def live_direct(self, chat_id: str, now: float | None = None) -> list[DirectMessage]:
        """The chat's unexpired direct messages: highest priority first, then newest."""
        stamp = time.time() if now is None else now
        rows = self._read(
            "SELECT id, chat_id, content, priority, source, created_at, expires_at "
            "FROM direct_messages WHERE chat_id = ? "
            "AND (expires_at IS NULL OR expires_at > ?) "
            "ORDER BY priority DESC, created_at DESC, id DESC",
            (chat_id, stamp),
        )
        return [DirectMessage(*row) for row in rows]

    # -- a whole chat -------------------------------------------------------------------------

    def drop_chat(self, chat_id: str, user_data: bool = False) -> None:
        """Delete the chat's summaries and direct messages; with ``user_data``, also its
        memories and marks (global memories are never touched)."""
        tables = ["summaries", "direct_messages"]
        if user_data:
            tables += ["memories", "marks"]
        with self._write() as conn:
            self._summaries.pop(chat_id, None)
            for table in tables:
                conn.execute(f"DELETE FROM {table} WHERE chat_id = ?", (chat_id,))  # noqa: S608

    # -- connection ---------------------------------------------------------------------------

    def _insert(
        self,
        sql: str,
        args: tuple[Any, ...],
        before: tuple[str, tuple[Any, ...]] | None = None,
    ) -> int:
        """Insert one row (after the statement ``before``, in the same transaction); its id."""
        with self._write() as conn:
            if before is not None:
                conn.execute(*before)
            cursor = conn.execute(sql, args)
            assert cursor.lastrowid is not None
            return cursor.lastrowid

    def _connection(self) -> sqlite3.Connection:
        """The open connection, opening the file on first use (the caller holds the lock)."""
        if self._conn is None:
            self._conn, problem = open_database(self.path)
            if problem is not None:
                self.problem = problem
        return self._conn

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """All rows of one query."""
        with self._lock:
            try:
                return self._connection().execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise _failure(self.path, exc) from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed if the block ends, else rolled back."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _failure(self.path, exc) from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                # Also after a failed COMMIT (disk full): a transaction left open would make
                # every later BEGIN fail.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _failure(self.path, exc) from exc
                raise


def _failure(path: Path, exc: sqlite3.Error) -> MemoryDBError:
    """``exc`` as an error a person can act on: a lock held too long, or what SQLite said (a
    disk that is full or failing, a file damaged while open), so callers that carry on without
    the store (the budget, the memory section) catch one kind of error."""
    if "locked" in str(exc) or "busy" in str(exc):
        return MemoryDBError(
            f"The memory database at {path} stayed locked by another process for more than 5 "
            "seconds. Another Smart Context may be stuck in a long write; close it and retry."
        )
    return MemoryDBError(f"The memory database at {path} failed: {exc}")


def _summary_values(chat_id: str, row: Summary) -> tuple[Any, ...]:
    """The row's columns for ``INSERT``, after checking it belongs to ``chat_id``."""
    if row.chat_id != chat_id:
        raise ValueError(
            f"A summary of chat {row.chat_id!r} was passed to put_summaries for chat "
            f"{chat_id!r}; pass each chat's summaries with its own chat id."
        )
    return (
        row.chat_id,
        row.level,
        row.from_id,
        row.to_id,
        row.covers,
        row.size,
        row.text,
        row.tokens,
        row.source,
        row.created_at,
    )


def _summary_order(row: Summary) -> tuple[int, float, str, str]:
    """The order :meth:`MemoryDB.summaries` reads them in (SQLite compares text by its UTF-8
    bytes: the order of its code points, as Python compares ``str``)."""
    return (row.level, row.created_at, row.from_id, row.to_id)


def _as_read(row: Summary) -> bool:
    """Whether reading ``row`` back would give it as it is: every value of its column's type
    (SQLite would store ``3.0`` as ``3`` in an integer column, or ``"3"`` as ``3``)."""
    ints = (row.level, row.size, row.tokens)
    texts = (row.chat_id, row.from_id, row.to_id, row.covers, row.text, row.source)
    return (
        all(type(v) is int for v in ints)
        and all(type(v) is str for v in texts)
        and type(row.created_at) is float
    )
