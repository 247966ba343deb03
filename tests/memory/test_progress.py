"""``smart_context.memory_progress`` while a long chat is first indexed and summarised: through
the real plugin, its real SQLite store and a chat on disk."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import INDEX_BATCH, refresh_memory
from smart_context.paths import ChatId
from tests.conftest import write_chat
from tests.fakes import make_messages


def progress_of(running: Any, what: str) -> list[tuple[int, int]]:
    return [
        (payload["done"], payload["total"])
        for name, payload in running.host.events
        if name == "smart_context.memory_progress" and payload["what"] == what
    ]


async def test_a_long_chat_met_whole_reports_its_indexing_and_summaries(
    start: Any, vault: Path
) -> None:
    n = 2 * INDEX_BATCH + 300
    write_chat(vault, "long", make_messages([f"Message {i} about the garden." for i in range(n)]))
    running = await start(settings={"summarizer": "offline"})
    await refresh_memory(running.plugin.services.memory_pass, ChatId("long"))
    assert progress_of(running, "index") == [(0, n), (1000, n), (2000, n), (n, n)]
    summaries = progress_of(running, "summaries")
    total = summaries[0][1]
    assert summaries[0] == (0, total) and summaries[-1] == (total, total) and total > 0
    assert [done for done, _ in summaries] == sorted(done for done, _ in summaries)
    assert all(p["chat_id"] == "long" for name, p in running.host.events if "progress" in name)
    assert len(MemoryDB(vault).indexed_keys("long")) == n

    running.host.events.clear()  # nothing new: no news
    await refresh_memory(running.plugin.services.memory_pass, ChatId("long"))
    assert progress_of(running, "index") == [] and progress_of(running, "summaries") == []


async def test_a_few_new_messages_are_indexed_without_progress(start: Any, vault: Path) -> None:
    write_chat(vault, "short", make_messages(["one", "two", "three"]))
    running = await start(settings={"summarizer": "offline"})
    await refresh_memory(running.plugin.services.memory_pass, ChatId("short"))
    assert progress_of(running, "index") == []
    assert len(MemoryDB(vault).indexed_keys("short")) == 3


async def test_a_pass_after_a_reply_reads_only_the_new_messages_and_an_edit_the_whole_chat(
    start: Any, vault: Path
) -> None:
    from smart_context.memory.refresh import SeenChats

    class CountingDB(MemoryDB):  # the real store, counting its whole-chat reads
        reads = 0
        plans = 0  # reads of the stored summaries: a pass planning the tree again

        def indexed_keys(self, chat_id: str) -> dict[str, str]:
            self.reads += 1
            return super().indexed_keys(chat_id)

        def summaries(self, chat_id: str) -> Any:
            self.plans += 1
            return super().summaries(chat_id)

    messages = make_messages([f"Message {i} about the garden." for i in range(40)])
    write_chat(vault, "c", messages)
    running = await start(settings={"summarizer": "offline"})
    services = running.plugin.services
    db = CountingDB(vault)
    parts = replace(services.memory_pass, db=db, seen=SeenChats())
    await refresh_memory(parts, ChatId("c"))
    assert db.reads == 1 and len(db.indexed_keys("c")) == 40
    assert db.plans == 1 and db.summaries("c")  # 30 settled messages: three leaves
    db.reads = db.plans = 0
    grown = [*messages, *make_messages(["A new question about tulips.", "Plant in autumn."], "n")]
    write_chat(vault, "c", grown)
    await refresh_memory(parts, ChatId("c"))
    assert db.reads == 0, "only the two new messages were looked at"
    assert db.plans == 0, "32 settled messages: no new leaf is due"
    assert [mid for mid, _ in db.search("c", "tulips", 5)] == ["n0"]
    edited = [*grown[:5], {**grown[5], "content": "Now about roses."}, *grown[6:]]
    write_chat(vault, "c", edited)
    await refresh_memory(parts, ChatId("c"))
    assert db.reads == 1, "an edit: the whole chat is compared with the index"
    assert db.plans == 1, "an edit: the summaries over it are checked"
    assert [mid for mid, _ in db.search("c", "roses", 5)] == ["m5"]


async def test_a_message_a_request_indexes_while_a_pass_runs_is_not_dropped(
    start: Any, vault: Path
) -> None:
    """A pass works on its copy of the chat. A reply a request indexes meanwhile is newer than
    that copy, not deleted: the pass leaves it in the index (it used to drop it until the next
    pass indexed it again)."""
    from smart_context.memory.refresh import SeenChats

    class LateReply(MemoryDB):  # the request's indexing lands after the pass read the chat
        def indexed_keys(self, chat_id: str) -> dict[str, str]:
            self.index_messages(chat_id, [("late", "late:key", "A reply stored meanwhile.")])
            return super().indexed_keys(chat_id)

    messages = make_messages([f"Message {i} about the garden." for i in range(20)])
    write_chat(vault, "c", messages)
    running = await start(settings={"summarizer": "offline"})
    db = LateReply(vault)
    parts = replace(running.plugin.services.memory_pass, db=db, seen=SeenChats())
    await refresh_memory(parts, ChatId("c"))
    indexed = MemoryDB(vault).indexed_keys("c")
    assert "late" in indexed and len(indexed) == 21

    write_chat(vault, "c", messages[1:])  # a message deleted: the next pass drops it
    await refresh_memory(replace(parts, db=MemoryDB(vault), seen=SeenChats()), ChatId("c"))
    assert str(messages[0]["id"]) not in MemoryDB(vault).indexed_keys("c")
