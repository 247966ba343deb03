"""Stored memories read out of a vault for the user (``smart-context memories VAULT``): they are
user data, so they can always be taken away, even when no sidecar runs.

Read-only: the database is neither created, migrated nor set aside here (a damaged file is
reported and left for recovery; see :func:`smart_context.memory.sqlite_file.open_read_only`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from pathlib import Path

from smart_context.errors import MemoryDBError
from smart_context.memory.db import database_path
from smart_context.memory.records import Memory
from smart_context.memory.sqlite_file import open_read_only

# the columns are the record's field names (our own code, never input)
_SELECT = f"SELECT {', '.join(f.name for f in fields(Memory))} FROM memories ORDER BY id"  # noqa: S608


def read_memories(vault: Path) -> list[Memory] | None:
    """Every stored memory of ``vault``, in the order they were added; ``None`` when the vault
    has no memory database yet (nothing was ever stored)."""
    path = database_path(vault)
    if not path.exists():
        return None
    conn = open_read_only(path)
    try:
        rows = conn.execute(_SELECT).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # a database created before anything was stored in it
        raise MemoryDBError(f"The memories in {path} could not be read: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise MemoryDBError(f"The memories in {path} could not be read: {exc}") from exc
    finally:
        conn.close()
    return [Memory(*row) for row in rows]
