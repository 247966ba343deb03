"""``MemoryDB``: the plugin's SQLite store at ``VAULT/.memory/smart_context.sqlite``.

What it keeps (see :mod:`smart_context.memory.schema`): conversation summaries and a full-text
index of messages (derived, may be rebuilt), importance marks and stored memories (user data),
and direct messages other plugins post for a chat's context (with a priority and an expiry).

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
from collections.abc import Iterable, Iterator, Sequence
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
from smart_context.memory.search_query import (
    chat_key,
    query_tokens,
    word_expression,
    words_expression,
)
from smart_context.memory.sqlite_file import BUSY_TIMEOUT_MS, open_database
from smart_context.paths import memory_dir

DB_NAME = "smart_context.sqlite"
MAX_VARIABLES = 500  # ids per statement, well under SQLite's limit on parameters
WEIGHED_FROM = 1_000  # rows from which a search leaves out the words most rows hold
HELD_DRIFT = 0.1  # ...each word's count kept while the index's size stays within this share
MAX_HELD = 10_000  # ...for at most this many words
# the rows a search of a long chat scores, about, at most: its rarest words are searched, while
# the rows holding them add up to no more than this (scoring costs some 2 microseconds a row)
SCORED_ROWS = 1_000
QUICK_COUNTS = 8  # the words a search made on the event loop counts first, at most
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
        # word -> (the index's row bound when counted, its rows up to half of it): see _weighed
        self._held: dict[str, tuple[int, int]] = {}
        # chats found to have more than SCORED_ROWS messages indexed: see _long_chat
        self._long: set[str] = set()
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

    # -- message text index (derived) ---------------------------------------------------------

    def indexed_keys(self, chat_id: str) -> dict[str, str]:
        """``message_id -> key`` of the chat's indexed messages, to find what changed."""
        rows = self._read("SELECT message_id, key FROM message_text WHERE chat_id = ?", (chat_id,))
        return dict(rows)

    def indexed(self, chat_id: str, messages: Sequence[tuple[str, str]]) -> frozenset[str]:
        """The content keys of ``messages`` (``(message_id, key)``) the index holds as they are."""
        wanted = dict(messages)
        found: set[str] = set()
        ids = list(wanted)
        for start in range(0, len(ids), MAX_VARIABLES):
            chunk = ids[start : start + MAX_VARIABLES]
            rows = self._read(
                "SELECT message_id, key FROM message_text WHERE chat_id = ? "  # noqa: S608
                f"AND message_id IN ({', '.join('?' * len(chunk))})",
                (chat_id, *chunk),
            )
            found.update(key for message_id, key in rows if wanted.get(message_id) == key)
        return frozenset(found)

    def index_messages(self, chat_id: str, rows: Iterable[tuple[str, str, str]]) -> None:
        """Index ``(message_id, key, content)`` rows, replacing a message's earlier text."""
        ckey = chat_key(chat_id)
        values = [(chat_id, message_id, key, content, ckey) for message_id, key, content in rows]
        with self._write() as conn:
            # An upsert, not INSERT OR REPLACE: REPLACE's implicit delete fires no trigger, so
            # the old words would stay in the FTS index.
            conn.executemany(
                "INSERT INTO message_text (chat_id, message_id, key, content, chat_key) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (chat_id, message_id) DO UPDATE SET "
                "key = excluded.key, content = excluded.content, chat_key = excluded.chat_key",
                values,
            )

    def unindex(self, chat_id: str, message_ids: Iterable[str], up_to: int | None = None) -> None:
        """Remove messages from the index; ``up_to``: only rows at or below that row id
        (:meth:`last_row` taken before the caller read the chat: a message indexed since,
        by a request, is newer than what the caller saw, not gone). Row ids are not
        AUTOINCREMENT: when the top rows are deleted meanwhile (another chat dropped), a new row
        can reuse an id under the bound and be dropped; the next pass indexes it again."""
        bound = up_to if up_to is not None else -1  # -1: no bound
        with self._write() as conn:
            self._held.clear()  # rows deleted: the words' counts are counted again
            self._long.clear()  # and the chats' lengths
            conn.executemany(
                "DELETE FROM message_text WHERE chat_id = ? AND message_id = ? "
                "AND (? < 0 OR rowid <= ?)",
                [(chat_id, message_id, bound, bound) for message_id in message_ids],
            )

    def last_row(self) -> int:
        """The largest row id of the text index (0 when empty): rows added later are above it,
        and a message indexed again in place keeps its row."""
        return int(self._read("SELECT coalesce(max(rowid), 0) FROM message_text")[0][0])

    def search(
        self, chat_id: str, query: str, limit: int, whole: bool = False
    ) -> list[tuple[str, float]]:
        """The chat's messages matching any word of ``query``: ``(message_id, score)``, best first.

        ``score`` is minus FTS5's bm25 (larger is better). Any text is a safe query: only its
        words are searched (see :mod:`smart_context.memory.search_query`). A long chat searches
        its rarest words (:meth:`_bounded`), unless ``whole`` (the benchmarks' plain BM25).
        """
        tokens = query_tokens(query)
        if not tokens or limit < 1:
            return []
        with self._lock:  # the counts and the search in one go
            weighed = self._weighed(tokens)
            words = [t for t, _ in weighed] if whole else self._bounded(chat_id, weighed)
            # Words that few rows of the whole index hold are searched without the chat's key:
            # the join keeps the chat's rows, and FTS5 scores no more than those few instead of
            # walking the key's rows (half of a search finding 200 messages in a chat of 10,000).
            # The chat's key has weight 0, so the scores are the same.
            counts = dict(weighed)
            few = sum(counts[word] or 0 for word in words) <= SCORED_ROWS
            expression = words_expression(None if few else chat_id, words)
            if expression is None:
                return []
            # Weight 0 for the chat_key column: it is in every row of the chat and must not rank.
            rows = self._read(
                "SELECT m.message_id, -bm25(message_fts, 1.0, 0.0) AS score FROM message_fts "
                "JOIN message_text AS m ON m.rowid = message_fts.rowid "
                "WHERE message_fts MATCH ? AND m.chat_id = ? "
                "ORDER BY bm25(message_fts, 1.0, 0.0) LIMIT ?",
                (expression, chat_id, limit),
            )
        return [(message_id, float(score)) for message_id, score in rows]

    def _bounded(self, chat_id: str, weighed: list[tuple[str, int | None]]) -> list[str]:
        """The words :meth:`_weighed` kept, cut to the rarest, in a chat of more than
        :data:`SCORED_ROWS` messages, so that the rows holding them add up to at most that
        (the rarest word is always kept). FTS5 scores every row that holds any searched word,
        in time that grows with them: a message sharing its words with a sixth of a
        10,000-message chat scored 3,300 rows (6 to 10 ms). The words left out are the
        commonest, the ones BM25 weighs least; the dense search still reads every message.

        A word's rows are counted over the whole index (its count from :meth:`_weighed`), an
        upper bound of the chat's own: in a vault of many chats a long chat may leave out a
        word it holds less often than that."""
        tokens = [token for token, _ in weighed]
        counted = [(n, k) for k, (_, n) in enumerate(weighed) if n is not None]
        if len(counted) < len(tokens) or sum(n for n, _ in counted) <= SCORED_ROWS:
            return tokens  # a small index (no counts), or few rows to score
        if not self._long_chat(chat_id):
            return tokens
        kept: list[int] = []
        total = 0
        for n, k in sorted(counted):
            if kept and total + n > SCORED_ROWS:
                break
            kept.append(k)
            total += n
        return [tokens[k] for k in sorted(kept)]

    def quick(self, chat_id: str, query: str) -> bool:
        """Whether :meth:`search` of ``query`` in the chat is quick enough to make on the event
        loop: an index of fewer than :data:`WEIGHED_FROM` rows, or one where the search walks
        about :data:`SCORED_ROWS` rows at most and no word needs a long count. It walks every
        row of the whole index holding a word it keeps: few when the words kept hold
        :data:`SCORED_ROWS` rows or fewer together; in a chat of more messages than that, whose
        search keeps its rarest words within that many (:meth:`_bounded`), when its rarest word
        is in that many at most (measured at worst: 1.1 ms at 10,000 messages, 2.6 ms at
        100,000). A shorter chat searches all its words, however many rows of other chats
        hold them (5 to 21 ms with common words in an index of 10,000 to 100,000 rows): the
        trip, then.

        A word not counted yet is counted here, up to :data:`SCORED_ROWS` + 1 rows (0.02 ms
        for a rare word, 0.1 ms to find one common), :data:`QUICK_COUNTS` of them at most; a
        word found in more is counted in full by the search, in a worker thread (0.4 to 2.5
        ms at 10,000 messages, 3 to 28 ms at 100,000)."""
        with self._lock:
            rows = self.last_row()
            if rows < WEIGHED_FROM:
                return True
            if len(self._held) + QUICK_COUNTS > MAX_HELD:
                return False  # a count kept here could clear those the search then reads
            half = (rows + 1) // 2
            bound = min(half, SCORED_ROWS + 1)
            kept: list[int] = []
            counts = 0
            for token in query_tokens(query):
                held = self._held_count(token, rows)
                if held is None:
                    if counts == QUICK_COUNTS:
                        return False
                    counts += 1
                    held = self._count(token, bound)
                    if held == bound:
                        return False  # in many rows: how many is counted in the search
                    self._hold(token, rows, held)  # below the bound: all of its rows
                if held < half:
                    kept.append(held)
            if sum(kept) <= SCORED_ROWS:
                return True
            return min(kept) <= SCORED_ROWS and self._long_chat(chat_id)

    def _long_chat(self, chat_id: str) -> bool:
        """Whether the chat has more than :data:`SCORED_ROWS` messages in the index. Counting
        them walks that many index entries (50 us, twice a request: :meth:`quick`, then the
        search), so a chat found long is held as long until this process deletes from the
        index (as the words' counts are: a chat another process shortened only has its
        search keep its rarest words a while longer)."""
        if chat_id in self._long:
            return True
        found = self._read(
            "SELECT count(*) FROM (SELECT 1 FROM message_text WHERE chat_id = ? LIMIT ?)",
            (chat_id, SCORED_ROWS + 1),
        )[0][0]
        if int(found) <= SCORED_ROWS:
            return False
        if len(self._long) >= MAX_HELD:
            self._long.clear()
        self._long.add(chat_id)
        return True

    def _held_count(self, token: str, rows: int) -> int | None:
        """The rows holding ``token``, up to half the index, from its count held
        (:meth:`_weighed`) when the index's row bound ``rows`` is near the one it was counted
        under; ``None``: it must be counted."""
        memo = self._held.get(token)
        if memo is None or abs(rows - memo[0]) > HELD_DRIFT * memo[0]:
            return None
        return memo[1] * ((rows + 1) // 2) // max((memo[0] + 1) // 2, 1)  # to this size

    def _weighed(self, tokens: list[str]) -> list[tuple[str, int | None]]:
        """``tokens`` without those half the index's rows or more hold, each with the rows that
        hold it (``None``: not counted, in an index of fewer than :data:`WEIGHED_FROM` rows).
        FTS5's BM25 gives such a word the weight 1e-6 (its IDF is not positive), so it changes
        no ranking, but an OR over it makes FTS5 score every row holding it (30 ms at 10,000
        messages against 1 ms). Counting a word's rows stops at half, so a common word costs a
        fraction of scoring. The rows are bounded by the largest row id (a lookup, where
        counting them reads the whole table of a large vault): a bound at least the count only
        leaves out fewer words.

        A word's count is kept while the bound stays within :data:`HELD_DRIFT` of the one it was
        counted under, and until this process deletes from the index: counting a common word
        cost 2.5 ms at 10,000 messages and 16 to 28 ms at 100,000, on every new message. A word
        near the line has a weight near 0 either way, so a count a little off moves no ranking
        that matters."""
        rows = self.last_row()
        half = (rows + 1) // 2
        if rows < WEIGHED_FROM:
            return [(token, None) for token in tokens]
        kept: list[tuple[str, int | None]] = []
        for token in tokens:
            held = self._held_count(token, rows)
            if held is None:
                held = self._count(token, half)
                self._hold(token, rows, held)
            if held < half:
                kept.append((token, held))
        return kept

    def _count(self, token: str, limit: int) -> int:
        """The rows of the whole index holding ``token``, counted up to ``limit``."""
        return int(
            self._read(
                "SELECT count(*) FROM (SELECT 1 FROM message_fts WHERE message_fts MATCH ? "
                "LIMIT ?)",
                (word_expression(token), limit),
            )[0][0]
        )

    def _hold(self, token: str, rows: int, count: int) -> None:
        """Keep ``token``'s ``count`` made when the index's row bound was ``rows``."""
        if len(self._held) > MAX_HELD:
            self._held.clear()
        self._held[token] = (rows, count)

    # -- a whole chat -------------------------------------------------------------------------

    def drop_chat(self, chat_id: str, user_data: bool = False) -> None:
        """Delete the chat's summaries, index and direct messages; with ``user_data``, also its
        memories and marks (global memories are never touched)."""
        tables = ["summaries", "message_text", "direct_messages"]
        if user_data:
            tables += ["memories", "marks"]
        with self._write() as conn:
            self._held.clear()  # rows deleted: the words' counts are counted again
            self._long.clear()  # and the chats' lengths
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
