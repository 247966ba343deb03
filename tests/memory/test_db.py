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
from typing import Any

import pytest

from smart_context.errors import MemoryDBError, NotFoundError, SmartContextError
from smart_context.memory import db as db_module
from smart_context.memory.db import MemoryDB, database_path
from smart_context.memory.records import Summary
from smart_context.memory.schema import LATEST_VERSION, MIGRATIONS
from smart_context.memory.search_query import match_expression, query_tokens

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
        memory.index_messages("c", [("m1", "k1", "green tea please")])
        assert [hit for hit, _ in memory.search("c", "tea", 5)] == ["m1"]
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    raw.close()


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
        memory.index_messages("c", [(f"m{i}", "k", "some words " * 50) for i in range(300)])
        for i in range(50):
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


# -- the message index ---------------------------------------------------------------------------


def test_messages_are_indexed_and_searched_best_first(db: MemoryDB) -> None:
    db.index_messages(
        "c",
        [
            ("m1", "k1", "The cat sat on the mat."),
            ("m2", "k2", "Cats and dogs; cats everywhere, many cats."),
            ("m3", "k3", "Nothing to see here."),
            ("m4", "k4", "Café crème au lait"),
        ],
    )
    assert db.indexed_keys("c") == {"m1": "k1", "m2": "k2", "m3": "k3", "m4": "k4"}
    hits = db.search("c", "CATS!", limit=10)
    assert [message_id for message_id, _ in hits] == ["m2", "m1"]  # porter: cats ~ cat
    assert hits[0][1] > hits[1][1] > 0
    assert [m for m, _ in db.search("c", "cafe creme", 10)] == ["m4"]  # diacritics removed
    assert len(db.search("c", "cat dog mat see", limit=2)) == 2
    assert db.search("c", "cat", limit=0) == []


def test_an_edited_message_is_found_by_its_new_words_only(db: MemoryDB) -> None:
    db.index_messages("c", [("m1", "k1", "meet at the harbour"), ("m2", "k2", "harbour lights")])
    db.index_messages("c", [("m1", "k1b", "meet at the station")])
    assert db.indexed_keys("c") == {"m1": "k1b", "m2": "k2"}
    assert [m for m, _ in db.search("c", "harbour", 10)] == ["m2"]
    assert [m for m, _ in db.search("c", "station", 10)] == ["m1"]

    db.unindex("c", ["m2", "unknown"])
    assert db.search("c", "harbour", 10) == [] and db.indexed_keys("c") == {"m1": "k1b"}


def test_search_stays_inside_its_chat(db: MemoryDB) -> None:
    db.index_messages("my-chat", [("m1", "k", "secret plans")])
    db.index_messages("my_chat", [("m2", "k", "secret plans")])
    db.index_messages("chat", [("m3", "k", "my chat secret")])
    assert [m for m, _ in db.search("my-chat", "secret", 10)] == ["m1"]
    assert [m for m, _ in db.search("my_chat", "secret plans", 10)] == ["m2"]
    assert [m for m, _ in db.search("chat", "secret my chat", 10)] == ["m3"]
    assert db.search("nobody", "secret", 10) == []
    # the chat key is an indexed column, but a query for it finds nothing
    raw = sqlite3.connect(db.path)
    key = raw.execute("SELECT chat_key FROM message_text LIMIT 1").fetchone()[0]
    raw.close()
    assert db.search("my-chat", key, 10) == []


HOSTILE = [
    '"',
    '"""',
    "*",
    "cat*",
    "NEAR(",
    "NEAR(cat dog, 2)",
    "AND OR NOT",
    "cat AND OR NOT dog",
    "col:",
    "content: cat",
    "chat_key : cat",
    "^cat",
    "(((",
    "{content chat_key}: cat",
    "'; DROP TABLE memories; --",
    "\x00 cat \x00",
    "日本語のテキスト 猫",
    "emoji 🐈 cat",
    "Ünïcödé çåt",
    "cat " * 3000,
    "".join(chr(0x20 + (i * 7919) % 0x2FF0) for i in range(10_000)),
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_any_text_is_a_safe_query(db: MemoryDB, query: str) -> None:
    db.index_messages("c", [("m1", "k", "the cat and the dog"), ("m2", "k", "日本語 猫")])
    hits = db.search("c", query, 10)
    assert isinstance(hits, list)
    assert all(isinstance(m, str) and isinstance(s, float) for m, s in hits)
    assert db.memories() == []  # and the table is still there


def test_a_pasted_log_is_read_for_its_query_words_only_at_its_start() -> None:
    # a 20 MB log of a dozen distinct words was scanned whole on every request
    pasted = "worker timeout retry " * 1_000_000 + "needle"
    assert query_tokens(pasted) == ["worker", "timeout", "retry"]
    assert query_tokens("needle " + pasted) == ["needle", "worker", "timeout", "retry"]


def test_a_query_is_reduced_to_its_distinct_words() -> None:
    assert query_tokens("Cat, CAT! a dog_house 42 x") == ["cat", "dog", "house", "42"]
    assert len(query_tokens(" ".join(f"w{i}" for i in range(100)))) == 32
    assert match_expression("c", "?! a") is None
    assert match_expression("c", "What did the it do?") is None  # function words only
    expression = match_expression("c", 'say "hi" there')
    assert expression is not None
    assert expression.endswith('AND content : ("say" OR "hi")')


# -- a whole chat --------------------------------------------------------------------------------


def _fill(db: MemoryDB, chat: str) -> None:
    db.put_summaries(chat, [_summary(chat, 0, "a", "b")])
    db.index_messages(chat, [("m1", "k", "hello world")])
    db.post_direct(chat, "note")
    db.set_mark(chat, "m1", True)
    db.add_memory("remember this", chat_id=chat)


def test_dropping_a_chat_keeps_its_user_data_unless_asked(db: MemoryDB) -> None:
    for chat in ("c", "d"):
        _fill(db, chat)
    db.add_memory("global")
    db.drop_chat("c")
    assert db.summaries("c") == [] and db.indexed_keys("c") == {} and db.live_direct("c") == []
    assert db.search("c", "hello", 5) == []
    assert db.marks("c") == {"m1"} and len(db.memories("c", include_global=False)) == 1

    db.drop_chat("c", user_data=True)
    assert db.marks("c") == set() and db.memories("c", include_global=False) == []
    assert [m.content for m in db.memories("c")] == ["global"]
    assert (
        db.summaries("d") and db.marks("d") and db.live_direct("d") and db.search("d", "hello", 5)
    )


def test_a_word_most_rows_hold_is_left_out_of_the_search_and_the_ranking_stays(
    db: MemoryDB,
) -> None:
    """FTS5 weighs a word half the rows hold at 1e-6: leaving it out of the query changes no
    ranking of the rows the other words find, and spares scoring every row that holds it."""
    rows = [
        (f"m{i}", f"k{i}", "the plan again" + (" sourdough starter" if i % 97 == 0 else ""))
        for i in range(1_200)
    ]
    rows[5] = ("m5", "k5", "plan: sourdough sourdough starter")
    db.index_messages("c", rows)
    both = db.search("c", "the plan for the sourdough starter", 20)
    assert both[0][0] == "m5" and {m for m, _ in both} == {
        "m5",
        *(f"m{i}" for i in range(0, 1_200, 97)),
    }
    unweighed = db._read(  # the same search with every word, as before
        "SELECT m.message_id, -bm25(message_fts, 1.0, 0.0) FROM message_fts "
        "JOIN message_text AS m ON m.rowid = message_fts.rowid "
        "WHERE message_fts MATCH ? AND m.chat_id = ? ORDER BY bm25(message_fts, 1.0, 0.0) "
        "LIMIT 20",
        (match_expression("c", "the plan for the sourdough starter"), "c"),
    )
    assert [m for m, _ in both] == [m for m, _ in unweighed][: len(both)]
    assert all(abs(a - b) < 1e-4 for (_, a), (_, b) in zip(both, unweighed, strict=False))
    assert db.search("c", "plan", 20) == []  # only a word every row holds: nothing to rank
    small = MemoryDB(db.path.parent.parent / "small")
    small.index_messages("c", rows[:50])  # a small index is searched as it is
    assert len(small.search("c", "plan", 20)) == 20
    small.close()


def test_a_long_chat_searches_its_rarest_words_within_the_rows_it_scores(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """FTS5 scores every row holding any searched word: in a chat of more than
    ``SCORED_ROWS`` messages only the rarest words are searched, as long as the rows holding
    them add up to at most that (the rarest always); a short chat in the same index, and a
    search whose words few rows hold, are searched whole."""
    import smart_context.memory.db as db_module

    monkeypatch.setattr(db_module, "SCORED_ROWS", 100)
    memory = MemoryDB(tmp_path)

    def text(i: int) -> str:
        words = ["note"]
        if i % 4 == 0:
            words.append("docker")  # 75 of 300 rows
        if i % 10 == 0:
            words.append("nginx")  # 30
        if i in (7, 8):
            words.append("certificate")  # 2
        return " ".join(words)

    memory.index_messages("long", [(f"m{i}", f"k{i}", text(i)) for i in range(300)])
    memory.index_messages("short", [(f"s{i}", f"t{i}", text(i)) for i in range(80)])
    memory.index_messages("other", [(f"o{i}", f"o{i}", "filler") for i in range(700)])
    found = {m for m, _ in memory.search("long", "docker nginx certificate", 400)}
    # certificate (2) and nginx (30) fit in 100 rows, docker (75) would not
    assert found == {"m7", "m8", *(f"m{i}" for i in range(0, 300, 10))}
    assert memory.search("long", "docker nginx certificate", 1)[0][0] == "m7"
    assert len(memory.search("long", "docker", 400)) == 75  # the rarest word is always searched
    whole = memory.search("long", "docker nginx certificate", 400, whole=True)
    assert len(whole) == 91  # docker 75, nginx 30, 15 hold both, and m7
    # few rows to score: every word, as before
    assert len(memory.search("long", "nginx certificate", 400)) == 32
    # a short chat of the same index scores few rows whatever its words
    short = {m for m, _ in memory.search("short", "docker nginx certificate", 400)}
    assert short == {f"s{i}" for i in range(80) if i % 4 == 0 or i % 10 == 0 or i in (7, 8)}
    memory.close()


def test_a_words_count_is_kept_until_the_index_changes_much_or_loses_rows(
    db: MemoryDB, monkeypatch: Any
) -> None:
    """Counting a common word cost every new message 2.5 ms at 10,000 rows and 16 to 28 ms at
    100,000: its count is kept while the index stays within a tenth of its size, and until
    rows are deleted, and the search finds the same."""
    counted: list[str] = []
    read = MemoryDB._read

    def counting(self: MemoryDB, sql: str, args: tuple[Any, ...] = ()) -> Any:
        if "count(*)" in sql:
            counted.append(str(args[0]).split('"')[1])  # the word of 'content : "word"'

        return read(self, sql, args)

    monkeypatch.setattr(MemoryDB, "_read", counting)
    rows = [
        (f"m{i}", f"k{i}", "the plan" + (" sourdough" if i % 50 == 0 else "")) for i in range(1_200)
    ]
    db.index_messages("c", rows)
    first = db.search("c", "the sourdough plan", 30)
    assert sorted(counted) == ["plan", "sourdough"] and first  # "the" is no search word
    counted.clear()
    assert db.search("c", "the sourdough plan", 30) == first and counted == []
    db.index_messages("c", [(f"n{i}", f"n{i}", "the plan") for i in range(60)])  # +5%
    assert db.search("c", "plan sourdough", 30) and counted == []
    db.index_messages("c", [(f"o{i}", f"o{i}", "the plan") for i in range(200)])  # past a tenth
    db.search("c", "sourdough", 30)
    assert counted == ["sourdough"]
    counted.clear()
    db.unindex("c", ["m0"])
    assert next(m for m, _ in db.search("c", "sourdough", 30)) != "m0"
    assert counted == ["sourdough"]


def test_rare_words_are_searched_without_the_chat_key_with_the_same_scores(
    tmp_path: Path,
) -> None:
    """Words few rows of the whole index hold are searched over every chat's rows and the
    chat's kept by the join: the same messages, the same scores, and no other chat's."""
    memory = MemoryDB(tmp_path)
    rows = [
        (
            f"m{i}",
            f"k{i}",
            "note"
            + (" plan" if i % 4 == 1 else "")
            + (" sourdough starter" if i % 40 == 0 else ""),
        )
        for i in range(1_200)
    ]
    memory.index_messages("c", rows)
    memory.index_messages("d", [(f"d{i}", f"d{i}", "sourdough bread") for i in range(30)])
    found = memory.search("c", "sourdough starter", 50)
    keyed = memory._read(  # with the chat's key, as every search did before
        "SELECT m.message_id, -bm25(message_fts, 1.0, 0.0) FROM message_fts "
        "JOIN message_text AS m ON m.rowid = message_fts.rowid "
        "WHERE message_fts MATCH ? AND m.chat_id = ? ORDER BY bm25(message_fts, 1.0, 0.0) "
        "LIMIT 50",
        (match_expression("c", "sourdough starter"), "c"),
    )
    assert len(found) == 30 and {m for m, _ in found} == {f"m{i}" for i in range(0, 1_200, 40)}
    assert found == [(m, pytest.approx(s, abs=1e-9)) for m, s in keyed]
    assert {m for m, _ in memory.search("d", "sourdough starter", 50)} == {
        f"d{i}" for i in range(30)
    }
    searched: list[str] = []
    read = MemoryDB._read

    def seen(self: MemoryDB, sql: str, args: tuple[Any, ...] = ()) -> Any:
        if "bm25" in sql:
            searched.append(str(args[0]))
        return read(self, sql, args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MemoryDB, "_read", seen)
        patch.setattr("smart_context.memory.db.SCORED_ROWS", 100)
        memory.search("c", "sourdough starter", 50)  # 90 rows in all: the key left out
        memory.search("c", "plan", 50)  # in 300 rows: the chat's key
    assert "chat_key" not in searched[0] and "chat_key" in searched[1]
    memory.close()


def test_a_search_is_quick_when_its_words_are_counted_and_rare(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """:meth:`MemoryDB.quick` (a request searches on the event loop when true): a small index
    always; a large one while the search walks few rows (the words it keeps hold few, or a
    long chat's rarest does) and no word needs a long count: a few are counted on the way."""
    import smart_context.memory.db as db_module

    monkeypatch.setattr(db_module, "SCORED_ROWS", 100)
    memory = MemoryDB(tmp_path)
    memory.index_messages("c", [(f"m{i}", f"k{i}", "note") for i in range(500)])
    assert memory.quick("c", "nginx docker")  # 500 rows: counts nothing
    memory.index_messages(
        "c",
        [
            (f"n{i}", f"n{i}", "docker" + (" nginx" if i % 20 == 0 else "") + (" vim" * (i < 200)))
            for i in range(600)
        ],
    )
    assert not memory.quick("c", "nginx docker"), "docker is in more rows than a quick count"
    assert memory._held.keys() == {"nginx"}, "nginx (30 rows) was counted on the way"
    memory.search("c", "nginx docker vim", 10)  # counts docker and vim (200 rows) in full
    assert memory.quick("c", "nginx docker"), "nginx in 30 rows: docker is in too many to search"
    assert memory.quick("c", "docker")  # in more than half the rows: not searched at all
    assert memory.quick("c", "docker nginx certificate")  # certificate counted quickly: in none
    # nginx (30) and vim (200) hold more than SCORED_ROWS together: this long chat's search
    # keeps the rarest, nginx, alone
    assert memory.quick("c", "nginx vim")
    assert not memory.quick("c", "vim"), "its rarest word is in more than SCORED_ROWS rows"
    monkeypatch.setattr(db_module, "QUICK_COUNTS", 1)
    assert not memory.quick("c", "nginx zebra yak"), "two words to count: one is quick at most"
    memory.close()


def test_a_short_chat_in_a_large_index_searches_common_words_in_the_trip(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A chat of ``SCORED_ROWS`` messages or fewer searches every word of the message, and
    FTS5 walks every row of the index that holds one: with common words, not quick; with
    rare ones, quick."""
    import smart_context.memory.db as db_module

    monkeypatch.setattr(db_module, "SCORED_ROWS", 100)
    memory = MemoryDB(tmp_path)
    memory.index_messages(
        "long", [(f"m{i}", f"k{i}", f"note{' vim' * (i % 5 == 0)}") for i in range(1_200)]
    )
    memory.index_messages("short", [(f"s{i}", f"s{i}", "vim and emacs") for i in range(50)])
    memory.search("short", "vim emacs", 10)  # counted: vim in 290 rows, emacs in 50
    assert not memory.quick("short", "vim emacs")
    assert memory.quick("long", "vim emacs"), "the long chat's search keeps emacs alone"
    assert memory.quick("short", "emacs")
    memory.close()


def test_a_quick_check_never_clears_the_counts_the_search_reads(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The counts are cleared past ``MAX_HELD`` words: a quick check near that leaves them to
    the search, in the trip, which would otherwise count in full on the loop what the check
    had just read."""
    import smart_context.memory.db as db_module

    memory = MemoryDB(tmp_path)
    memory.index_messages("c", [(f"m{i}", f"k{i}", f"note w{i % 300}") for i in range(1_200)])
    memory.search("c", "w1 w2 w3", 10)
    monkeypatch.setattr(db_module, "MAX_HELD", len(memory._held) + db_module.QUICK_COUNTS - 1)
    held = dict(memory._held)
    assert not memory.quick("c", "w1 w2 w4")
    assert memory._held == held
    monkeypatch.setattr(db_module, "MAX_HELD", len(memory._held) + db_module.QUICK_COUNTS)
    assert memory.quick("c", "w1 w2 w4") and memory._held.keys() == {*held, "w4"}
    memory.close()


def test_a_chat_found_long_is_not_counted_again_until_rows_are_deleted(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Whether a chat is long (its search keeps its rarest words) is counted once, then held,
    until this process deletes rows: a chat cut short is counted again, and searches all its
    words."""
    import smart_context.memory.db as db_module

    monkeypatch.setattr(db_module, "SCORED_ROWS", 100)
    memory = MemoryDB(tmp_path)
    memory.index_messages("c", [(f"m{i}", f"k{i}", "note vim" * (i % 2)) for i in range(150)])
    memory.index_messages("d", [(f"d{i}", f"d{i}", "note") for i in range(20)])
    ran = _statements(memory)

    def lengths() -> int:
        return sum("LIMIT" in sql and "FROM message_text WHERE chat_id" in sql for sql in ran)

    assert memory._long_chat("c") and not memory._long_chat("d")
    assert lengths() == 2
    assert memory._long_chat("c") and not memory._long_chat("d")
    assert lengths() == 3  # the long one held, the short one counted again (it may grow)
    memory.unindex("c", [f"m{i}" for i in range(60)])
    assert not memory._long_chat("c")  # 90 left: counted again
    assert lengths() == 4
    memory.index_messages("d", [(f"e{i}", f"e{i}", "note") for i in range(100)])
    assert memory._long_chat("d")  # grown past the line
    memory.drop_chat("d")
    assert not memory._long_chat("d")
    memory.close()
