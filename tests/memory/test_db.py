"""The memory database, on real SQLite files in tmp_path (and a real second process)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from smart_context.errors import MemoryDBError, NotFoundError, SmartContextError
from smart_context.memory import db as db_module
from smart_context.memory.db import MemoryDB, database_path
from smart_context.memory.records import Summary
from smart_context.memory.schema import LATEST_VERSION, MIGRATIONS

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[MemoryDB]:
    memory = MemoryDB(tmp_path)
    yield memory
    memory.close()


def _summary(chat: str, level: int, first: str, last: str, text: str = "t") -> Summary:
    return Summary(chat, level, first, last, f"{first}..{last}", 2, text, 5, "llm", 100.0)


# -- opening -------------------------------------------------------------------------------------


def test_constructing_touches_no_file_and_the_first_call_creates_it(tmp_path: Path) -> None:
    memory = MemoryDB(tmp_path)
    assert not (tmp_path / ".memory").exists()
    assert memory.marks("c") == set()
    assert database_path(tmp_path).is_file() and memory.problem is None
    raw = sqlite3.connect(database_path(tmp_path))
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    raw.close()
    memory.close()


def test_a_version_1_file_is_upgraded_keeping_its_data(tmp_path: Path) -> None:
    path = database_path(tmp_path)
    path.parent.mkdir()
    raw = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute(
        "INSERT INTO memories (content, chat_id, importance, source, created_at, updated_at) "
        "VALUES ('likes tea', 'c', 0.9, 'user', 1.0, 1.0)"
    )
    raw.execute("INSERT INTO marks VALUES ('c', 'm1', 1.0)")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()

    with MemoryDB(tmp_path) as memory:
        assert [m.content for m in memory.memories("c")] == ["likes tea"]
        assert memory.marks("c") == {"m1"}
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    raw.close()


def test_a_version_2_file_loses_its_message_index_and_keeps_the_rest(tmp_path: Path) -> None:
    """Version 2 kept a full-text index of every message, which nothing reads now: version 3
    drops it, with its triggers, and keeps the summaries, marks, memories and direct messages."""
    path = database_path(tmp_path)
    path.parent.mkdir()
    raw = sqlite3.connect(path)
    for statement in (*MIGRATIONS[0], *MIGRATIONS[1]):
        raw.execute(statement)
    raw.execute(
        "INSERT INTO message_text (chat_id, message_id, key, content, chat_key) "
        "VALUES ('c', 'm1', 'k1', 'green tea please', 'x')"
    )
    raw.execute("INSERT INTO marks VALUES ('c', 'm1', 1.0)")
    raw.execute(
        "INSERT INTO direct_messages (chat_id, content, priority, created_at) "
        "VALUES ('c', 'hello', 0.5, 1.0)"
    )
    raw.execute("PRAGMA user_version = 2")
    raw.commit()
    raw.close()

    with MemoryDB(tmp_path) as memory:
        assert memory.marks("c") == {"m1"}
        assert [d.content for d in memory.live_direct("c", now=2.0)] == ["hello"]
    raw = sqlite3.connect(path)
    names = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    assert raw.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION == 3
    raw.close()
    assert not any(name.startswith("message_") for name in names)


def test_a_file_from_a_newer_version_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = database_path(tmp_path)
    path.parent.mkdir()
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE future (x)")
    raw.execute(f"PRAGMA user_version = {LATEST_VERSION + 5}")
    raw.commit()
    raw.close()
    before = path.read_bytes()

    memory = MemoryDB(tmp_path)
    with pytest.raises(MemoryDBError, match="newer Smart Context") as refused:
        memory.memories()
    assert isinstance(refused.value, SmartContextError)
    assert f"version {LATEST_VERSION + 5}" in str(refused.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert memory.problem is None


def _assert_set_aside(tmp_path: Path, memory: MemoryDB, damaged: bytes) -> None:
    """The damaged bytes now live in a .corrupt-* file; the database works; problem says so."""
    folder = database_path(tmp_path).parent
    aside = [p for p in folder.iterdir() if ".corrupt-" in p.name and not p.name.endswith("-shm")]
    main = [p for p in aside if not p.name.endswith("-wal")]
    assert len(main) == 1 and main[0].read_bytes() == damaged
    assert memory.problem is not None
    assert str(main[0]) in memory.problem
    assert "set aside" in memory.problem and "NOT deleted" in memory.problem
    assert memory.add_memory("fresh start").id == 1


def test_random_bytes_are_set_aside_and_a_fresh_database_is_made(tmp_path: Path) -> None:
    path = database_path(tmp_path)
    path.parent.mkdir()
    garbage = os.urandom(8192)
    path.write_bytes(garbage)
    (path.parent / f"{path.name}-wal").write_bytes(b"stale wal")
    with MemoryDB(tmp_path) as memory:
        assert memory.marks("c") == set()
        _assert_set_aside(tmp_path, memory, garbage)
    wal = [p for p in path.parent.iterdir() if ".corrupt-" in p.name and p.name.endswith("-wal")]
    assert len(wal) == 1 and wal[0].read_bytes() == b"stale wal"


def test_a_truncated_database_is_set_aside(tmp_path: Path) -> None:
    with MemoryDB(tmp_path) as memory:
        for i in range(350):
            memory.add_memory(f"memory {i} " * 20)
    path = database_path(tmp_path)
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    whole = path.read_bytes()
    half = whole[: len(whole) // 2 + 100]
    path.write_bytes(half)

    with MemoryDB(tmp_path) as memory:
        assert memory.memories() == []
        _assert_set_aside(tmp_path, memory, half)


def test_a_store_damaged_while_open_fails_with_our_error_naming_the_file(
    tmp_path: Path,
) -> None:
    db = MemoryDB(tmp_path)
    db.add_memory("kept", chat_id="c")
    other = sqlite3.connect(database_path(tmp_path))
    other.execute("DROP TABLE memories")  # what a bad disk or a foreign tool could leave
    other.commit()
    other.close()
    with pytest.raises(MemoryDBError, match=r"smart_context\.sqlite failed: no such table"):
        db.memories("c")
    with pytest.raises(MemoryDBError, match="failed: no such table"):
        db.add_memory("more", chat_id="c")


def test_two_objects_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    with MemoryDB(tmp_path) as first, MemoryDB(tmp_path) as second:
        first.add_memory("from first", chat_id="c")
        second.set_mark("c", "m1", True)
        assert [m.content for m in second.memories("c")] == ["from first"]
        assert first.marks("c") == {"m1"}


_WRITER = """
import sys
from pathlib import Path
from smart_context.memory.db import MemoryDB
with MemoryDB(Path(sys.argv[1])) as memory:
    memory.marks("c")
    print("ready", flush=True)
    for i in range(200):
        memory.add_memory(f"other {i}", chat_id="c")
        memory.memories("c")
"""


def test_a_second_process_writing_at_the_same_time_loses_nothing(tmp_path: Path) -> None:
    with MemoryDB(tmp_path) as memory:
        memory.marks("c")  # create the file first, so both sides open an existing database
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        other = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert other.stdout is not None
        assert other.stdout.readline() == "ready\n"  # both now write at the same time
        for i in range(200):
            memory.add_memory(f"mine {i}", chat_id="c")
            memory.memories("c")
        _, errors = other.communicate(timeout=60)
        assert other.returncode == 0, errors
        contents = {m.content for m in memory.all_memories()}
    assert contents == {f"mine {i}" for i in range(200)} | {f"other {i}" for i in range(200)}


def test_threads_share_one_object(db: MemoryDB) -> None:
    def work(n: int) -> None:
        for i in range(50):
            db.add_memory(f"thread {n} item {i}")
            db.memories()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(db.all_memories()) == 200
    db.close()
    assert len(db.all_memories()) == 200  # a call after close opens again


# -- summaries and marks -------------------------------------------------------------------------


def test_summaries_are_upserted_listed_and_dropped(db: MemoryDB) -> None:
    db.put_summaries("c", [_summary("c", 0, "m1", "m4"), _summary("c", 1, "m1", "m9")])
    db.put_summaries("c", [_summary("c", 0, "m1", "m4", text="better")])
    db.put_summaries("other", [_summary("other", 0, "m1", "m4")])
    assert [(s.key, s.text) for s in db.summaries("c")] == [
        ((0, "m1", "m4"), "better"),
        ((1, "m1", "m9"), "t"),
    ]
    assert db.summaries("c")[0] == _summary("c", 0, "m1", "m4", text="better")

    db.drop_summaries("c", [(1, "m1", "m9"), (7, "x", "y")])
    assert [s.key for s in db.summaries("c")] == [(0, "m1", "m4")]
    db.drop_summaries("c")
    assert db.summaries("c") == [] and len(db.summaries("other")) == 1


def _statements(memory: MemoryDB) -> list[str]:
    """The SQL the connection runs from now on (SQLite's own trace)."""
    ran: list[str] = []
    memory._connection().set_trace_callback(ran.append)
    return ran


def _summary_reads(ran: list[str]) -> list[str]:
    """The reads of the summaries' table among the statements ``ran``."""
    return [sql for sql in ran if sql.startswith("SELECT") and "FROM summaries" in sql]


def test_summaries_read_again_come_from_memory_in_step_with_every_write(
    db: MemoryDB, tmp_path: Path
) -> None:
    db.put_summaries("c", [_summary("c", 0, "m1", "m4"), _summary("c", 1, "m1", "m9")])
    assert len(db.summaries("c")) == 2
    ran = _statements(db)
    db.summaries("c")
    assert not _summary_reads(ran)  # held: not read again

    newer = replace(_summary("c", 0, "m5", "m8"), created_at=50.0)  # sorts before the rest
    db.put_summaries("c", [_summary("c", 0, "m1", "m4", text="better"), newer])
    db.drop_summaries("c", [(1, "m1", "m9")])
    db.put_summaries("c", [_summary("c", 2, "m1", "m8")])
    held = db.summaries("c")
    assert not _summary_reads(ran)
    with MemoryDB(tmp_path) as fresh:  # what the file holds, read by another connection
        assert held == fresh.summaries("c")
    assert [s.key for s in held] == [(0, "m5", "m8"), (0, "m1", "m4"), (2, "m1", "m8")]
    held.clear()  # a caller's list is its own
    assert len(db.summaries("c")) == 3

    db.drop_summaries("c")
    assert db.summaries("c") == []
    db.put_summaries("c", [_summary("c", 0, "m1", "m4")])
    db.drop_chat("c")
    assert db.summaries("c") == []


def test_summaries_another_process_wrote_are_read_again(db: MemoryDB, tmp_path: Path) -> None:
    db.put_summaries("c", [_summary("c", 0, "m1", "m4")])
    assert len(db.summaries("c")) == 1
    with MemoryDB(tmp_path) as other:
        other.put_summaries("c", [_summary("c", 1, "m1", "m9")])
        other.drop_summaries("c", [(0, "m1", "m4")])
    assert [s.key for s in db.summaries("c")] == [(1, "m1", "m9")]


def test_a_summary_sqlite_stores_as_other_types_is_held_as_read(
    db: MemoryDB, tmp_path: Path
) -> None:
    db.summaries("c")
    odd = replace(_summary("c", 0, "m1", "m4"), size=2.0, created_at=100)  # type: ignore[arg-type]
    db.put_summaries("c", [odd])
    (row,) = db.summaries("c")
    assert (type(row.size), type(row.created_at)) == (int, float)
    with MemoryDB(tmp_path) as fresh:
        assert [row] == fresh.summaries("c")


def test_summaries_are_held_for_the_chats_read_last(
    db: MemoryDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_module, "HELD_SUMMARIES", 3)
    monkeypatch.setattr(db_module, "HELD_ROWS", 5)
    for k in range(4):
        db.put_summaries(f"c{k}", [_summary(f"c{k}", 0, "a", "b")])
    db.put_summaries("big", [_summary("big", 0, f"a{i}", f"b{i}") for i in range(6)])
    for chat in ("c0", "c1", "c2", "c0", "c3"):  # c0 read again: c1 is the oldest
        db.summaries(chat)
    ran = _statements(db)
    for chat in ("c0", "c2", "c3"):
        db.summaries(chat)
    assert not _summary_reads(ran)
    db.summaries("c1")  # let go: three chats at most
    assert len(_summary_reads(ran)) == 1
    db.summaries("big")  # six summaries: past five in all, only the chat read last is kept
    db.summaries("big")
    db.summaries("c3")
    assert len(_summary_reads(ran)) == 3


def test_summaries_are_read_again_from_another_connection(db: MemoryDB, tmp_path: Path) -> None:
    db.put_summaries("c", [_summary("c", 0, "m1", "m4")])
    db.summaries("c")
    with MemoryDB(tmp_path) as other:
        other.put_summaries("c", [_summary("c", 1, "m1", "m9")])
    assert db._conn is not None
    db._conn.close()  # as at_once does when it cannot set the busy timeout back
    db._conn = None
    assert [s.key for s in db.summaries("c")] == [(0, "m1", "m4"), (1, "m1", "m9")]


def test_a_summary_of_another_chat_is_refused(db: MemoryDB) -> None:
    with pytest.raises(ValueError, match="pass each chat's summaries with its own chat id"):
        db.put_summaries("c", [_summary("c", 0, "a", "b"), _summary("d", 0, "a", "b")])
    assert db.summaries("c") == []  # nothing of the batch was written


def test_marks_are_set_and_cleared(db: MemoryDB) -> None:
    db.set_mark("c", "m1", True)
    db.set_mark("c", "m1", True)
    db.set_mark("c", "m2", True)
    db.set_mark("d", "m3", True)
    db.set_mark("c", "m2", False)
    db.set_mark("c", "never-marked", False)
    assert db.marks("c") == {"m1"} and db.marks("d") == {"m3"} and db.marks("e") == set()


# -- memories ------------------------------------------------------------------------------------


def test_memories_of_a_chat_come_with_the_global_ones(db: MemoryDB) -> None:
    tea = db.add_memory("likes tea", chat_id="c", importance=0.9, now=10.0)
    name = db.add_memory("the user's name is Ada", importance=1.0, source="profile", now=11.0)
    other = db.add_memory("works on a boat", chat_id="d", now=12.0)
    assert (tea.id, tea.chat_id, tea.importance, tea.source, tea.created_at) == (
        1,
        "c",
        0.9,
        "user",
        10.0,
    )
    assert db.memories("c") == [name, tea]
    assert db.memories("c", include_global=False) == [tea]
    assert db.memories() == [name]
    assert db.all_memories() == [tea, name, other]


def test_a_memory_is_updated_and_deleted(db: MemoryDB) -> None:
    memory = db.add_memory("likes tea", chat_id="c", now=10.0)
    changed = db.update_memory(memory.id, content="likes green tea")
    assert (changed.content, changed.importance, changed.created_at) == ("likes green tea", 0.5, 10)
    assert changed.updated_at > 10.0
    assert db.update_memory(memory.id, importance=0).importance == 0.0
    assert db.update_memory(memory.id) == db.memories("c")[0]
    assert db.delete_memory(memory.id) is True
    assert db.delete_memory(memory.id) is False
    with pytest.raises(NotFoundError, match="no stored memory with id 1"):
        db.update_memory(memory.id, content="gone")


def test_forget_deletes_a_chats_memories_older_than_a_time(db: MemoryDB) -> None:
    db.add_memory("old", chat_id="c", now=10.0)
    db.add_memory("new", chat_id="c", now=30.0)
    db.add_memory("old elsewhere", chat_id="d", now=10.0)
    db.add_memory("old global", now=10.0)
    assert db.forget("c", before=20.0) == 1
    assert db.forget("c", before=20.0) == 0
    assert sorted(m.content for m in db.all_memories()) == ["new", "old elsewhere", "old global"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "non-empty text"),
        ({"content": "   "}, "non-empty text"),
        ({"content": 42}, "non-empty text"),
        ({"content": "x" * 20_001}, "the limit is 20,000"),
        ({"importance": 1.5}, "from 0 to 1"),
        ({"importance": -0.1}, "from 0 to 1"),
        ({"importance": True}, "a number from 0 to 1"),
        ({"importance": "high"}, "a number from 0 to 1"),
        ({"importance": float("nan")}, "a number from 0 to 1"),
        ({"source": ""}, "The source must be non-empty text"),
    ],
)
def test_bad_memories_are_refused(db: MemoryDB, kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"content": "fine", **kwargs}
    with pytest.raises(ValueError, match=message):
        db.add_memory(**arguments)  # type: ignore[arg-type]
    assert db.all_memories() == []


def test_a_bad_update_is_refused_and_changes_nothing(db: MemoryDB) -> None:
    memory = db.add_memory("fine", importance=0.5)
    with pytest.raises(ValueError, match="The memory is 20,001 characters long"):
        db.update_memory(memory.id, content="x" * 20_001)
    with pytest.raises(ValueError, match="The importance must be from 0 to 1; got 7"):
        db.update_memory(memory.id, content="changed", importance=7)
    assert db.all_memories() == [memory]


def test_the_longest_memory_is_accepted(db: MemoryDB) -> None:
    assert len(db.add_memory("x" * 20_000).content) == 20_000


# -- direct messages -----------------------------------------------------------------------------


def test_direct_messages_live_until_they_expire(db: MemoryDB) -> None:
    low = db.post_direct("c", "low", priority=0.1, now=100.0)
    short = db.post_direct("c", "short", priority=0.9, ttl_seconds=10, source="weather", now=100.0)
    newer = db.post_direct("c", "newer", priority=0.9, now=101.0)
    db.post_direct("d", "elsewhere", now=100.0)
    assert short.expires_at == 110.0 and short.source == "weather" and low.expires_at is None
    assert db.live_direct("c", now=105.0) == [newer, short, low]
    assert db.live_direct("c", now=110.0) == [newer, low]

    db.post_direct("d", "later", now=200.0)  # posting clears expired rows of every chat
    raw = sqlite3.connect(db.path)
    assert raw.execute("SELECT count(*) FROM direct_messages").fetchone()[0] == 4
    raw.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "non-empty text"),
        ({"content": "x" * 4_001}, "the limit is 4,000"),
        ({"priority": 2}, "from 0 to 1"),
        ({"priority": False}, "a number from 0 to 1"),
        ({"ttl_seconds": 0}, "more than 0"),
        ({"ttl_seconds": -5}, "more than 0"),
        ({"ttl_seconds": float("inf")}, "more than 0"),
        ({"ttl_seconds": "10"}, "number of seconds"),
    ],
)
def test_bad_direct_messages_are_refused(
    db: MemoryDB, kwargs: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {"content": "fine", **kwargs}
    with pytest.raises(ValueError, match=message):
        db.post_direct("c", **arguments)  # type: ignore[arg-type]
    assert db.live_direct("c") == []


# -- a whole chat --------------------------------------------------------------------------------


def _fill(db: MemoryDB, chat: str) -> None:
    db.put_summaries(chat, [_summary(chat, 0, "a", "b")])
    db.post_direct(chat, "note")
    db.set_mark(chat, "m1", True)
    db.add_memory("remember this", chat_id=chat)


def test_dropping_a_chat_keeps_its_user_data_unless_asked(db: MemoryDB) -> None:
    for chat in ("c", "d"):
        _fill(db, chat)
    db.add_memory("global")
    db.drop_chat("c")
    assert db.summaries("c") == [] and db.live_direct("c") == []
    assert db.marks("c") == {"m1"} and len(db.memories("c", include_global=False)) == 1

    db.drop_chat("c", user_data=True)
    assert db.marks("c") == set() and db.memories("c", include_global=False) == []
    assert [m.content for m in db.memories("c")] == ["global"]
    assert db.summaries("d") and db.marks("d") and db.live_direct("d")
