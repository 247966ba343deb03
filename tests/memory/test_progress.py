"""``smart_context.memory_progress`` while a long chat is first summarised, and what a pass
reads again: through the real plugin, its real SQLite store and a chat on disk."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from smart_context.memory import refresh
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import refresh_memory
from smart_context.paths import ChatId
from tests.conftest import write_chat
from tests.fakes import make_messages


def progress_of(running: Any, what: str) -> list[tuple[int, int]]:
    return [
        (payload["done"], payload["total"])
        for name, payload in running.host.events
        if name == "smart_context.memory_progress" and payload["what"] == what
    ]


async def test_a_long_chat_met_whole_reports_its_summaries(start: Any, vault: Path) -> None:
    n = 2300
    write_chat(vault, "long", make_messages([f"Message {i} about the garden." for i in range(n)]))
    running = await start(settings={"summarizer": "offline"})
    await refresh_memory(running.plugin.services.memory_pass, ChatId("long"))
    assert progress_of(running, "index") == []  # no index of the messages is kept any more
    summaries = progress_of(running, "summaries")
    total = summaries[0][1]
    assert summaries[0] == (0, total) and summaries[-1] == (total, total) and total > 0
    assert [done for done, _ in summaries] == sorted(done for done, _ in summaries)
    assert all(p["chat_id"] == "long" for name, p in running.host.events if "progress" in name)

    running.host.events.clear()  # nothing new: no news
    await refresh_memory(running.plugin.services.memory_pass, ChatId("long"))
    assert progress_of(running, "summaries") == []


async def test_a_short_chat_reports_nothing(start: Any, vault: Path) -> None:
    write_chat(vault, "short", make_messages(["one", "two", "three"]))
    running = await start(settings={"summarizer": "offline"})
    await refresh_memory(running.plugin.services.memory_pass, ChatId("short"))
    assert [name for name, _ in running.host.events if "progress" in name] == []


async def test_a_pass_after_a_reply_reads_only_the_new_messages_and_an_edit_the_whole_chat(
    start: Any, vault: Path, monkeypatch: Any
) -> None:
    from smart_context.memory.refresh import SeenChats

    hashed: list[str] = []  # the messages a pass read: each is hashed for its key
    real_key = refresh.cache_key

    def counted_key(message_id: str, text: str) -> str:
        hashed.append(message_id)
        return real_key(message_id, text)

    monkeypatch.setattr(refresh, "cache_key", counted_key)

    class CountingDB(MemoryDB):  # the real store, counting its reads of the summaries
        plans = 0  # a pass planning the tree again

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
    assert len(hashed) == 40
    assert db.plans == 1 and db.summaries("c")  # 30 settled messages: three leaves
    db.plans = 0
    hashed.clear()
    grown = [*messages, *make_messages(["A new question about tulips.", "Plant in autumn."], "n")]
    write_chat(vault, "c", grown)
    await refresh_memory(parts, ChatId("c"))
    assert hashed == ["n0", "n1"], "only the two new messages were looked at"
    assert db.plans == 0, "32 settled messages: no new leaf is due"
    hashed.clear()
    edited = [*grown[:5], {**grown[5], "content": "Now about roses."}, *grown[6:]]
    write_chat(vault, "c", edited)
    await refresh_memory(parts, ChatId("c"))
    assert len(hashed) == 42, "an edit: the whole chat is read again"
    assert db.plans == 1, "an edit: the summaries over it are checked"
