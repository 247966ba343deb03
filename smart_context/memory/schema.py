"""The memory database's schema: migrations applied in order, counted by ``PRAGMA user_version``.

Each migration is a tuple of single SQL statements, not a script: ``executescript`` would commit
on its own, and every migration must run inside the caller's transaction so a failure leaves the
file at the previous version.  Never edit a migration that has shipped; append a new one.

Which tables hold what:

- ``summaries`` (derived: rebuilt from the chat when lost).
- ``marks`` and ``memories`` (user data: never dropped unless the user asks).
- ``direct_messages`` (posted by other plugins; expire on their own).

Version 2 added a full-text index of every chat's messages (``message_text`` and its FTS5
table ``message_fts``, derived) for the budget's keyword search. The budget now scores the words
of the history it is given (:mod:`smart_context.budget.words`): version 3 drops the index.
"""

from __future__ import annotations

_VERSION_1 = (
    """
    CREATE TABLE summaries (
        chat_id TEXT NOT NULL,
        level INTEGER NOT NULL,
        from_id TEXT NOT NULL,
        to_id TEXT NOT NULL,
        covers TEXT NOT NULL,
        size INTEGER NOT NULL,
        text TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        source TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (chat_id, level, from_id, to_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE marks (
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        marked_at REAL NOT NULL,
        PRIMARY KEY (chat_id, message_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        content TEXT NOT NULL,
        chat_id TEXT,
        importance REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
        source TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
    "CREATE INDEX memories_by_chat ON memories (chat_id, created_at)",
)

_VERSION_2 = (
    """
    CREATE TABLE direct_messages (
        id INTEGER PRIMARY KEY,
        chat_id TEXT NOT NULL,
        content TEXT NOT NULL,
        priority REAL NOT NULL CHECK (priority BETWEEN 0 AND 1),
        source TEXT,
        created_at REAL NOT NULL,
        expires_at REAL
    )
    """,
    "CREATE INDEX direct_messages_by_chat ON direct_messages (chat_id)",
    "CREATE INDEX direct_messages_by_expiry ON direct_messages (expires_at)",
    """
    CREATE TABLE message_text (
        rowid INTEGER PRIMARY KEY,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        key TEXT NOT NULL,
        content TEXT NOT NULL,
        chat_key TEXT NOT NULL,
        UNIQUE (chat_id, message_id)
    )
    """,
    """
    CREATE VIRTUAL TABLE message_fts USING fts5(
        content, chat_key,
        content = 'message_text', content_rowid = 'rowid',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER message_text_inserted AFTER INSERT ON message_text BEGIN
        INSERT INTO message_fts (rowid, content, chat_key)
        VALUES (new.rowid, new.content, new.chat_key);
    END
    """,
    """
    CREATE TRIGGER message_text_deleted AFTER DELETE ON message_text BEGIN
        INSERT INTO message_fts (message_fts, rowid, content, chat_key)
        VALUES ('delete', old.rowid, old.content, old.chat_key);
    END
    """,
    """
    CREATE TRIGGER message_text_updated AFTER UPDATE ON message_text BEGIN
        INSERT INTO message_fts (message_fts, rowid, content, chat_key)
        VALUES ('delete', old.rowid, old.content, old.chat_key);
        INSERT INTO message_fts (rowid, content, chat_key)
        VALUES (new.rowid, new.content, new.chat_key);
    END
    """,
)

# the full-text index of messages, derived, and read by nothing now (module docstring)
_VERSION_3 = (
    "DROP TRIGGER IF EXISTS message_text_inserted",
    "DROP TRIGGER IF EXISTS message_text_deleted",
    "DROP TRIGGER IF EXISTS message_text_updated",
    "DROP TABLE IF EXISTS message_fts",
    "DROP TABLE IF EXISTS message_text",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_VERSION_1, _VERSION_2, _VERSION_3)
"""Migration ``n`` (counting from 1) takes a database from ``user_version`` n-1 to n."""

LATEST_VERSION = len(MIGRATIONS)
