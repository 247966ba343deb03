"""One trip for a request's reads: what the store holds, and a failed part costs only itself."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from smart_context.memory.db import MemoryDB, database_path
from smart_context.memory.reads import read_chat


def test_every_part_is_read_in_one_call(tmp_path: Path) -> None:
    db = MemoryDB(tmp_path)
    db.add_memory("prefers metric units", chat_id="c")
    db.post_direct("c", "the build is red", priority=1)
    db.set_mark("c", "m2", True)
    reads = read_chat(db, "c", budget=True)
    assert [m.content for m in reads.memories] == ["prefers metric units"]
    assert [m.content for m in reads.direct] == ["the build is red"]
    assert reads.marks == {"m2"} and reads.failed == ()
    assert read_chat(db, "c", budget=False).marks == set()  # no budget: not read


def test_a_damaged_part_costs_only_that_part(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = MemoryDB(tmp_path)
    db.post_direct("c", "still here", priority=1)
    other = sqlite3.connect(database_path(tmp_path))
    other.execute("DROP TABLE memories")  # what a bad disk or a foreign tool could leave
    other.commit()
    other.close()
    with caplog.at_level(logging.WARNING):
        reads = read_chat(db, "c", budget=True)
    assert reads.failed == ("the memories",)
    assert [m.content for m in reads.direct] == ["still here"]
    assert "the request goes on without the memories" in caplog.text
