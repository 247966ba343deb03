"""Chat files: round trip, other keys kept, atomic and locked updates, damaged files, bad ids."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from smart_context.errors import ChatIdError
from smart_context.paths import check_chat_id
from smart_context.usage_stats import chat_usage, usage_result
from smart_context_hosts.sidecar import chatfile
from smart_context_hosts.sidecar.memory import ChatMemory, new_chat_id


def add_message(text: str) -> Any:
    def fn(data: dict[str, Any]) -> dict[str, Any]:
        data.setdefault("messages", []).append({"id": text, "role": "user", "content": text})
        return data

    return fn


def ids(data: dict[str, Any]) -> list[str]:
    return [m["id"] for m in data["messages"]]


async def test_round_trip_and_missing_chat(vault: Path) -> None:
    memory = ChatMemory(vault)
    assert await memory.load_chat("c1") == {"messages": []}
    data = {"messages": [{"id": "a", "role": "user", "content": "héllo"}], "title": "T"}
    await memory.save_chat("c1", data)
    assert await memory.load_chat("c1") == data
    assert json.loads((vault / ".memory" / "c1.json").read_text(encoding="utf-8")) == data


async def test_an_appended_message_is_stored_as_a_copy(vault: Path) -> None:
    """The stored copy holds none of the caller's lists or dicts: changing them afterwards
    changes nothing stored."""
    memory = ChatMemory(vault)
    await memory.save_chat("c1", {"messages": [{"id": "m1", "role": "user", "content": "hi"}]})
    record = {"included_ids": ["m1"], "usage": {"sent_tokens": 5}, "score": float("nan")}
    reply = {"id": "m2", "role": "assistant", "content": "hello", "smart_context": record}
    await memory.append_message("c1", reply)
    record["included_ids"].append("changed later")
    record["usage"]["sent_tokens"] = 9
    reply["content"] = "changed later"
    kept = (await memory.load_chat("c1"))["messages"][1]
    assert kept["content"] == "hello" and kept["smart_context"]["included_ids"] == ["m1"]
    assert kept["smart_context"]["usage"] == {"sent_tokens": 5}
    on_disk = json.loads((vault / ".memory" / "c1.json").read_text(encoding="utf-8"))
    assert on_disk["messages"][1]["smart_context"]["included_ids"] == ["m1"]


def _reply(n: int) -> dict[str, Any]:
    """A reply whose record names messages (what the chat in memory leaves out) and has
    figures (what it keeps)."""
    return {
        "id": f"r{n}",
        "role": "assistant",
        "content": f"answer {n}",
        "smart_context": {
            "mode": "full",
            "included_ids": ["m1", f"u{n}"],
            "reasons": {"m1": {"why": "relevant", "score": 0.5}},
            "summaries": [{"from_id": "m1", "to_id": "m1", "level": 1}],
            "layout": {"kind": "stable", "cut": None, "recalled_ids": ["m1"]},
            "usage": {"sent_tokens": 10 + n, "full_tokens": 20 + n},
            "odd": float("inf"),
        },
    }


async def test_a_replys_record_is_held_without_what_names_messages_and_read_whole_again(
    vault: Path,
) -> None:
    """A long chat's replies' records are mostly the ids they name: the chat this process
    holds keeps their figures only (what its readers use), the file keeps all, and every
    read that gives a copy (``load_chat``, ``update_chat``'s function) gives them whole:
    after appends, after an edit that rewrites the file, after a restart."""
    memory = ChatMemory(vault)
    first = {"id": "m1", "role": "user", "content": "hi"}
    await memory.save_chat("c1", {"messages": [first, _reply(1)]})
    await memory.append_messages("c1", [{"id": "u2", "role": "user", "content": "more"}])
    await memory.append_message("c1", _reply(2))

    def whole(n: int) -> dict[str, Any]:
        return json.loads(json.dumps(_reply(n)))  # inf as JSON writes it, then reads it

    def check(messages: list[dict[str, Any]], *, content: str = "hi") -> None:
        assert [m["id"] for m in messages] == ["m1", "r1", "u2", "r2"]
        assert messages[0]["content"] == content
        assert json.dumps(messages[1]) == json.dumps(whole(1))
        assert json.dumps(messages[3]) == json.dumps(whole(2))

    held = (await memory.chat_snapshot("c1"))["messages"][3]["smart_context"]
    assert held == {"usage": {"sent_tokens": 12, "full_tokens": 22}}
    check((await memory.load_chat("c1"))["messages"])

    seen: list[dict[str, Any]] = []

    def edit(data: dict[str, Any]) -> dict[str, Any]:
        seen.extend(data["messages"])
        data["messages"][0] = {**data["messages"][0], "content": "hello"}  # the file is rewritten
        return data

    returned = await memory.update_chat("c1", edit)
    check(seen)
    assert returned["messages"][0]["content"] == "hello"  # as held: the figures only
    assert set(returned["messages"][1]["smart_context"]) == {"usage"}
    check((await memory.load_chat("c1"))["messages"], content="hello")
    on_disk = json.loads((vault / ".memory" / "c1.json").read_text(encoding="utf-8"))
    check(on_disk["messages"], content="hello")

    check((await ChatMemory(vault).load_chat("c1"))["messages"], content="hello")  # read cold
    again = ChatMemory(vault)  # a restart: the chat read from its file
    assert "reasons" not in (await again.chat_snapshot("c1"))["messages"][1]["smart_context"]
    await again.append_message("c1", _reply(3))
    messages = (await again.load_chat("c1"))["messages"]
    check(messages[:4], content="hello")
    assert json.dumps(messages[4]) == json.dumps(whole(3))


def _measured(n: int, *, notice: bool = False) -> dict[str, Any]:
    """A reply the usage page counts (or a notice that no model was called), with a budget."""
    reply = _reply(n)
    record = {
        **reply["smart_context"],
        "budget": {"limit": 100, "used": 10 + n},
        "cache": {"kind": "none"},
    }
    return {**reply, "smart_context": record} | ({"notice": "no_model"} if notice else {})


async def test_the_chat_held_keeps_a_budget_on_its_last_measured_reply_only(vault: Path) -> None:
    """Each reply's ``usage`` and ``cache`` are held (the usage page sums them), its
    ``budget`` only while it is the last measured reply (the page shows that one's): appended,
    read cold, and with a notice after it; the usage page's answer is the same as from the
    file, and the file keeps every budget."""
    memory = ChatMemory(vault)
    first = {"id": "m1", "role": "user", "content": "hi"}
    await memory.save_chat("c1", {"messages": [first, _measured(1)]})
    before = await memory.chat_snapshot("c1")  # shares the first reply's held record
    await memory.append_messages("c1", [_measured(2), _measured(3)])
    await memory.append_message("c1", _measured(4, notice=True))

    def budgets(data: dict[str, Any]) -> list[Any]:
        return [m["smart_context"].get("budget") for m in data["messages"][1:]]

    assert budgets(before) == [{"limit": 100, "used": 11}]  # a snapshot is left as it was
    held = await memory.chat_snapshot("c1")
    assert budgets(held) == [None, None, {"limit": 100, "used": 13}, None]
    assert all(
        set(m["smart_context"]) <= {"usage", "cache", "budget"} for m in held["messages"][1:]
    )
    cold = await ChatMemory(vault).chat_snapshot("c1")
    assert budgets(cold) == budgets(held)
    whole = await memory.load_chat("c1")
    assert [b["used"] for b in budgets(whole)] == [11, 12, 13, 14]
    for data in (held, cold):
        assert usage_result(chat_usage("c1", data)) == usage_result(chat_usage("c1", whole))
    assert chat_usage("c1", held).last["budget"]["used"] == 13  # type: ignore[index]
    await memory.update_chat("c1", lambda data: {**data, "title": "Renamed"})  # held anew
    assert budgets(await memory.chat_snapshot("c1")) == budgets(held)


async def test_a_replys_line_that_does_not_read_back_is_a_clear_error_and_nothing_is_written(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a program writing without the chat's lock could change a line under it; then a
    whole read says so, and an update writes nothing rather than the figures alone."""
    memory = ChatMemory(vault)
    await memory.save_chat("c1", {"messages": [{"id": "m1", "role": "user", "content": "hi"}]})
    await memory.append_message("c1", _reply(1))
    path = vault / ".memory" / "c1.json"
    before = path.read_bytes()
    for line in (b'{"id": "other"}', b"{not json"):
        monkeypatch.setattr(chatfile, "read_spans", lambda _path, spans, line=line: [line])
        with pytest.raises(OSError, match="a reply's line changed under the lock"):
            await memory.load_chat("c1")
        with pytest.raises(OSError, match="a reply's line changed under the lock"):
            await memory.update_chat("c1", lambda data: {**data, "title": "T"})
        assert path.read_bytes() == before


async def test_update_keeps_other_plugins_keys(vault: Path) -> None:
    memory = ChatMemory(vault)
    await memory.save_chat(
        "c1",
        {"messages": [], "topics": [{"label": "X", "count": 1}], "other_plugin": {"k": [1, 2]}},
    )
    stored = await memory.update_chat("c1", add_message("m1"))
    assert stored["other_plugin"] == {"k": [1, 2]}
    again = await memory.load_chat("c1")
    assert again["topics"] == [{"label": "X", "count": 1}]
    assert again["other_plugin"] == {"k": [1, 2]}
    assert ids(again) == ["m1"]


async def test_update_is_atomic_when_fn_fails(vault: Path) -> None:
    memory = ChatMemory(vault)
    await memory.update_chat("c1", add_message("m1"))
    before = (vault / ".memory" / "c1.json").read_bytes()

    def broken(data: dict[str, Any]) -> dict[str, Any]:
        data["messages"].append({"id": "half"})
        raise RuntimeError("fails half way")

    with pytest.raises(RuntimeError):
        await memory.update_chat("c1", broken)
    assert (vault / ".memory" / "c1.json").read_bytes() == before
    with pytest.raises(TypeError):
        await memory.update_chat("c1", lambda data: ["not", "a", "dict"])  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError):
        await memory.save_chat("c1", {"messages": [object()]})
    assert (vault / ".memory" / "c1.json").read_bytes() == before
    leftovers = [p.name for p in (vault / ".memory").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


async def test_concurrent_updates_and_a_thread_lose_nothing(vault: Path) -> None:
    memory = ChatMemory(vault)

    def other_thread() -> None:
        async def run() -> None:
            for i in range(20):
                await ChatMemory(vault).update_chat("race", add_message(f"t{i}"))

        asyncio.run(run())

    thread = threading.Thread(target=other_thread)
    thread.start()
    await asyncio.gather(*(memory.update_chat("race", add_message(f"a{i}")) for i in range(50)))
    await asyncio.to_thread(thread.join)
    stored = ids(await memory.load_chat("race"))
    assert sorted(stored) == sorted([f"a{i}" for i in range(50)] + [f"t{i}" for i in range(20)])
    assert [i for i in stored if i.startswith("t")] == [f"t{i}" for i in range(20)]


def _writer(vault: str, prefix: str, count: int) -> None:
    """Runs in another process: append ``count`` messages one update at a time."""

    async def run() -> None:
        memory = ChatMemory(Path(vault))
        for i in range(count):
            await memory.update_chat("shared", add_message(f"{prefix}{i}"))

    asyncio.run(run())


def test_two_processes_lose_no_message(vault: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(str(vault), p, 40)) for p in ("p", "q")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    stored = json.loads((vault / ".memory" / "shared.json").read_text(encoding="utf-8"))
    assert len(stored["messages"]) == 80
    assert set(ids(stored)) == {f"{p}{i}" for p in "pq" for i in range(40)}


async def test_damaged_file_is_set_aside_and_reported(vault: Path) -> None:
    reports: list[tuple[str, Path]] = []
    memory = ChatMemory(vault, on_damaged=lambda chat_id, path: reports.append((chat_id, path)))
    (vault / ".memory").mkdir()
    damaged = vault / ".memory" / "c1.json"
    damaged.write_text('{"messages": [{"id": "a", "content": "half', encoding="utf-8")

    assert await memory.load_chat("c1") == {"messages": []}
    [(chat_id, aside)] = reports
    assert chat_id == "c1" and aside.name.startswith("c1.json.corrupt-")
    assert aside.read_text(encoding="utf-8").startswith('{"messages": [{"id": "a"')
    assert not damaged.exists()

    await memory.update_chat("c1", add_message("new"))
    assert ids(await memory.load_chat("c1")) == ["new"]
    assert aside.exists()  # the damaged content is never overwritten


async def test_wrong_shape_is_damage_too(vault: Path) -> None:
    reports: list[tuple[str, Path]] = []
    memory = ChatMemory(vault, on_damaged=lambda chat_id, path: reports.append((chat_id, path)))
    (vault / ".memory").mkdir()
    (vault / ".memory" / "c2.json").write_text('{"messages": "oops"}', encoding="utf-8")
    await memory.update_chat("c2", add_message("m"))
    assert [chat_id for chat_id, _ in reports] == ["c2"]
    assert ids(await memory.load_chat("c2")) == ["m"]


@pytest.mark.parametrize("bad", ["../../etc", "..", "a/b", "", ".hidden", "x" * 200, "c:evil"])
async def test_bad_chat_ids_are_refused(vault: Path, bad: str) -> None:
    memory = ChatMemory(vault)
    with pytest.raises(ChatIdError):
        await memory.load_chat(bad)
    with pytest.raises(ChatIdError):
        await memory.update_chat(bad, add_message("m"))
    for read in (memory.chat_state, memory.chat_snapshot):
        with pytest.raises(ChatIdError):
            await read(bad)
    with pytest.raises(ChatIdError):
        await memory.update_state(bad, lambda data: data)
    assert not (vault / ".memory").exists() or list((vault / ".memory").iterdir()) == []


async def test_list_and_create(vault: Path) -> None:
    memory = ChatMemory(vault)
    assert await memory.list_chats() == []
    first = await memory.create_chat("First")
    await asyncio.sleep(0.01)
    second = await memory.create_chat()
    assert first["title"] == "First" and second["title"] == "New chat"
    await memory.save_chat("zzz", {"messages": [{"id": "1", "role": "user", "content": "hi"}]})
    (vault / ".memory" / "zzz.embeddings.json").write_text("{}", encoding="utf-8")
    listed = await memory.list_chats()
    assert {c["id"] for c in listed} == {first["id"], second["id"], "zzz"}
    assert next(c for c in listed if c["id"] == "zzz")["message_count"] == 1
    assert set(listed[0]) == {"id", "title", "message_count", "updated_at"}


def test_new_ids_are_valid_and_distinct() -> None:
    made = {new_chat_id() for _ in range(500)}
    assert len(made) == 500
    assert all(check_chat_id(i) == i for i in made)


async def test_a_change_of_messages_is_reported_and_nothing_else_is(vault: Path) -> None:
    changes: list[tuple[str, int]] = []
    memory = ChatMemory(vault, on_changed=lambda chat_id, n: changes.append((chat_id, n)))
    await memory.update_chat("c1", add_message("a"))  # appended in place
    await memory.update_chat("c1", lambda d: {**d, "topics": [{"label": "X", "count": 1}]})
    await memory.update_chat("c1", lambda d: {**d, "smart_context": {"active_topics": ["X"]}})
    await memory.update_chat("c1", add_message("b"))
    await memory.save_chat("c1", {"messages": []})  # a clear is a change too
    assert changes == [("c1", 1), ("c1", 2), ("c1", 0)]


async def test_a_hand_edited_entry_that_is_no_message_is_kept_and_copied_safely(
    vault: Path,
) -> None:
    memory = ChatMemory(vault)
    (vault / ".memory").mkdir()
    stored = {"messages": [{"id": "a", "role": "user", "content": "hi"}, "a stray note", 7]}
    (vault / ".memory" / "c3.json").write_text(json.dumps(stored), encoding="utf-8")
    loaded = await memory.load_chat("c3")
    assert loaded == stored
    loaded["messages"][0]["content"] = "changed by a plugin"  # a copy: the cache keeps its own
    assert (await memory.load_chat("c3"))["messages"][0]["content"] == "hi"

    def touch(data: dict[str, Any]) -> dict[str, Any]:
        data["messages"][0]["content"] = "changed in place"  # then refused: nothing is kept
        raise ValueError("no")

    with pytest.raises(ValueError):
        await memory.update_chat("c3", touch)
    assert (await memory.load_chat("c3"))["messages"] == stored["messages"]
    new = {"id": "b", "role": "user", "content": "next"}
    before = await memory.append_message("c3", new, history=True)
    assert before == [stored["messages"][0]]  # the history a pipeline gets: messages only
    assert (await memory.load_chat("c3"))["messages"][1:] == ["a stray note", 7, new]


async def test_chat_state_waits_only_for_a_write_that_changed_the_file(vault: Path) -> None:
    """An unchanged file is read from memory without the chat's lock: a write under way that
    has not touched it yet does not hold the request up. A file another process changed is
    read again, under the lock, when that write is done."""
    from smart_context_hosts.sidecar.memory import file_lock

    memory = ChatMemory(vault)
    await memory.append_message("c", {"id": "m1", "role": "user", "content": "hi"})
    lock = vault / ".memory" / "c.lock"
    assert lock.exists()
    with file_lock(lock):  # another writer holds the chat
        state = await asyncio.wait_for(memory.chat_state("c"), timeout=5)
    assert "messages" not in state
    path = vault / ".memory" / "c.json"
    changed = {**json.loads(path.read_text()), "smart_context": {"active_topics": ["Kyoto"]}}
    released = threading.Event()

    def other_process() -> None:  # writes while holding the lock, then lets go
        with file_lock(lock):
            path.write_text(json.dumps(changed))
            released.wait(5)

    writer = threading.Thread(target=other_process)
    writer.start()
    await asyncio.sleep(0.1)
    reading = asyncio.ensure_future(memory.chat_state("c"))
    await asyncio.sleep(0.2)
    assert not reading.done()  # the file changed: read once the write is done
    released.set()
    assert (await asyncio.wait_for(reading, 5))["smart_context"] == {"active_topics": ["Kyoto"]}
    writer.join()


async def test_update_state_changes_the_keys_in_place_and_never_the_messages(vault: Path) -> None:
    memory = ChatMemory(vault)
    await memory.append_message("c", {"id": "m1", "role": "user", "content": "hi"})
    path = vault / ".memory" / "c.json"
    before = path.read_bytes()
    seen: list[dict[str, Any]] = []

    def put(data: dict[str, Any]) -> dict[str, Any]:
        seen.append(data)
        return {**data, "topics": [{"label": "Greetings"}], "messages": []}  # ignored

    stored = await memory.update_state("c", put)
    assert "messages" not in seen[0]
    assert [m["id"] for m in stored["messages"]] == ["m1"]
    assert stored["topics"] == [{"label": "Greetings"}]
    on_disk = json.loads(path.read_text())
    assert on_disk["topics"] == [{"label": "Greetings"}] and len(on_disk["messages"]) == 1
    assert path.read_bytes()[: before.index(b'"m1"')] == before[: before.index(b'"m1"')]
    inode = path.stat().st_ino  # an atomic rewrite would be a new file

    def grow(data: dict[str, Any]) -> dict[str, Any]:  # changes its own copy in place
        data["topics"].append({"label": "Farewells"})
        return data

    await memory.update_state("c", grow)
    assert path.stat().st_ino == inode
    assert [t["label"] for t in json.loads(path.read_text())["topics"]] == [
        "Greetings",
        "Farewells",
    ]
    on_disk = json.loads(path.read_text())

    def fails(data: dict[str, Any]) -> dict[str, Any]:
        data["topics"].append({"label": "Lost"})
        raise ValueError("no")

    with pytest.raises(ValueError):
        await memory.update_state("c", fails)
    with pytest.raises(TypeError, match="not a dict"):
        await memory.update_state("c", lambda data: None)  # type: ignore[arg-type,return-value]
    assert json.loads(path.read_text()) == on_disk == await memory.load_chat("c")


async def test_chat_snapshot_is_shared_while_the_file_is_unchanged(vault: Path) -> None:
    memory = ChatMemory(vault)
    await memory.append_message("c", {"id": "m1", "role": "user", "content": "hi"})
    first = await memory.chat_snapshot("c")
    assert await memory.chat_snapshot("c") is first  # no copy of the messages
    path = vault / ".memory" / "c.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "title": "Elsewhere"}))
    assert (await memory.chat_snapshot("c"))["title"] == "Elsewhere"  # another process wrote
    assert (await memory.chat_snapshot("missing"))["messages"] == []
    assert not (vault / ".memory" / "missing.lock").exists()
