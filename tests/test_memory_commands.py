"""The long memory commands through the real plugin, its real SQLite store and real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import write_chat
from tests.fakes import make_messages

TEXTS = [
    "Where should I keep the sourdough starter?",
    "In the fridge, fed weekly with rye flour.",
    "My landlord is Mrs. Okafor; the lease ends on 14 March.",
    "Noted: the lease with Mrs. Okafor ends on 14 March.",
    "How do I prune tomatoes?",
    "Pinch the side shoots weekly.",
]


async def started(start: Any, vault: Path) -> Any:
    write_chat(vault, "c1", make_messages(TEXTS))
    return await start(settings={"budget_tokens": 8000})


async def test_memories_are_stored_listed_edited_sent_and_deleted(start: Any, vault: Path) -> None:
    running = await started(start, vault)
    stored = await running.command("store_memory", content="The user is vegetarian.", chat_id="c1")
    assert stored["status"] == "success"
    global_one = await running.command(
        "store_memory", content="Prefers metric units.", importance=0.9
    )
    listed = await running.command("list_memories", chat_id="c1")
    assert [m["content"] for m in listed["memories"]] == [
        "Prefers metric units.",
        "The user is vegetarian.",
    ]
    memory_id = stored["memory"]["id"]
    edited = await running.command(
        "update_memory", memory_id=memory_id, content="Vegan since 2024."
    )
    assert edited["memory"]["content"] == "Vegan since 2024."
    ctx = await running.context("c1", make_messages(TEXTS))
    system = ctx.history[0]
    assert system["role"] == "system" and "Vegan since 2024." in system["content"]
    assert "Prefers metric units." in system["content"]
    assert set(ctx.metadata["smart_context"]["memory"]["memory_ids"]) == {
        memory_id,
        global_one["memory"]["id"],
    }
    assert (await running.command("delete_memory", memory_id=memory_id))["deleted"] is True
    again = await running.command("delete_memory", memory_id=memory_id)
    assert again["status"] == "error" and "no memory" in again["error"]
    events = [e for e, _ in running.host.events if e == "smart_context.memory_changed"]
    assert len(events) == 4


async def test_bad_memory_arguments_are_refused_in_words(start: Any, vault: Path) -> None:
    running = await started(start, vault)
    for kwargs in (
        {"content": ""},
        {"content": "x" * 20_001},
        {"content": "fine", "importance": 2},
        {"content": "fine", "importance": True},
        {"content": "fine", "chat_id": "../../etc"},
    ):
        result = await running.command("store_memory", **kwargs)
        assert result["status"] == "error" and result["reason"] == "bad_arguments", kwargs
    result = await running.command("forget_context", chat_id="c1", before="yesterday-ish")
    assert result["status"] == "error" and "ISO 8601" in result["error"]


async def test_forget_context_by_time(start: Any, vault: Path) -> None:
    running = await started(start, vault)
    await running.command("store_memory", content="Old fact.", chat_id="c1")
    result = await running.command("forget_context", chat_id="c1", before="2999-01-01T00:00")
    assert result["forgotten"] == 1
    assert (await running.command("list_memories", chat_id="c1"))["memories"] == []


async def test_a_pinned_message_is_named_and_unknown_ids_are_refused(
    start: Any, vault: Path
) -> None:
    running = await started(start, vault)
    assert (await running.command("mark_important", chat_id="c1", message_id="m2"))["important"]
    assert (await running.command("list_marks", chat_id="c1"))["important_ids"] == ["m2"]
    bad = await running.command("mark_important", chat_id="c1", message_id="nope")
    assert bad["status"] == "error" and "no message" in bad["error"]
    await running.command("mark_important", chat_id="c1", message_id="m2", important=False)
    assert (await running.command("list_marks", chat_id="c1"))["important_ids"] == []


async def test_direct_messages_go_by_priority_until_they_expire(start: Any, vault: Path) -> None:
    running = await started(start, vault)
    await running.command("post_direct_message", chat_id="c1", content="Low note.", priority=0.2)
    await running.command(
        "post_direct_message",
        chat_id="c1",
        content="Focus on the migration.",
        priority=0.9,
        ttl_seconds=600,
        source="planner",
    )
    await running.command(
        "post_direct_message", chat_id="c1", content="Gone soon.", priority=1.0, ttl_seconds=0.01
    )
    import asyncio

    await asyncio.sleep(0.05)
    live = (await running.command("list_direct_messages", chat_id="c1"))["direct_messages"]
    assert [m["content"] for m in live] == ["Focus on the migration.", "Low note."]
    ctx = await running.context("c1", make_messages(TEXTS))
    text = ctx.history[0]["content"]
    assert text.index("Focus on the migration.") < text.index("Low note.")
    assert "Gone soon." not in text and "from planner" in text
    bad = await running.command("post_direct_message", chat_id="c1", content="x", priority=5)
    assert bad["status"] == "error"


async def test_retrieve_context_finds_old_messages_with_their_turn_and_memories(
    start: Any, vault: Path
) -> None:
    running = await started(start, vault)
    await running.command("store_memory", content="The lease deposit was 950 euros.", chat_id="c1")
    found = await running.command(
        "retrieve_context", query="When does the Okafor lease end?", chat_id="c1", limit=2
    )
    ids = [m["id"] for m in found["messages"]]
    assert "m2" in ids and "m3" in ids
    assert found["memories"][0]["content"] == "The lease deposit was 950 euros."
    assert (await running.command("retrieve_context", query=""))["status"] == "error"
    assert (await running.command("retrieve_context", query="x", limit=0))["status"] == "error"


async def test_a_look_back_leaves_the_requests_facts_of_another_history_as_they_are(
    start: Any, vault: Path
) -> None:
    """The requests' facts of a chat are of the history its requests send; a look back reads
    the chat's file. When the two differ (here a message edited in the request), the look back
    reads its own words apart, so the next request neither reads its chat again nor counts its
    tokens again; when they agree, it uses the kept facts."""
    running = await started(start, vault)
    sent = make_messages(TEXTS)
    sent[0] = {**sent[0], "content": "Where should the rye starter live?"}
    await running.context("c1", sent)
    budget = running.plugin.services.budget
    kept = budget._facts["c1"]
    before = (kept.resets, kept.generation, kept.counted)
    found = await running.command(
        "retrieve_context", query="When does the Okafor lease end?", chat_id="c1", limit=2
    )
    assert "m2" in [m["id"] for m in found["messages"]]
    assert budget._facts["c1"] is kept and (kept.resets, kept.generation, kept.counted) == before
    await running.context("c1", make_messages(TEXTS))  # the file's history: read afresh once
    again = await running.command(
        "retrieve_context", query="When does the Okafor lease end?", chat_id="c1", limit=2
    )
    assert again["messages"] == found["messages"]
    assert budget._facts["c1"].resets == before[0] + 1


async def test_retrieve_context_without_a_chat_searches_every_memory_whatever_came_before(
    start: Any, vault: Path
) -> None:
    running = await started(start, vault)
    await running.command("store_memory", content="The lease deposit was 950 euros.", chat_id="c1")
    await running.command("store_memory", content="The lease on the garage ends in May.")
    # another call naming a chat (as an MCP client may) must not narrow a later search
    await running.command("list_marks", chat_id="other")
    found = await running.command("retrieve_context", query="lease")
    assert {m["content"] for m in found["memories"]} == {
        "The lease deposit was 950 euros.",
        "The lease on the garage ends in May.",
    }
    assert found["messages"] == []


async def test_summarize_conversation_makes_summaries_now(start: Any, vault: Path) -> None:
    running = await start(settings={"summarizer": "offline"})
    write_chat(
        vault,
        "c2",
        make_messages(
            [
                f"Sentence number {i} about the Jeep alternator costing {i * 10} euros."
                for i in range(40)
            ]
        ),
    )
    assert await running.command("list_summaries", chat_id="c2") == {
        "status": "success",
        "summaries": [],  # listing makes none
    }
    result = await running.command("summarize_conversation", chat_id="c2")
    assert result["status"] == "success"
    assert await running.command("list_summaries", chat_id="c2") == result
    assert {s["level"] for s in result["summaries"]} == {1}
    assert all(s["source"] == "offline" and s["text"] for s in result["summaries"])
    assert len(result["summaries"]) == 3  # 40 messages, the last 10 are recent


async def test_odd_arguments_to_the_panels_memory_commands_are_refused(
    start: Any, vault: Path
) -> None:
    running = await started(start, vault)
    for name, kwargs in (
        ("mark_important", {"chat_id": "c1", "message_id": "m2", "important": "yes"}),
        ("mark_important", {"chat_id": "c1", "message_id": 7}),
        ("update_memory", {"memory_id": "abc", "content": "x"}),
        ("update_memory", {"memory_id": True, "content": "x"}),
        ("delete_memory", {"memory_id": -3}),
        ("list_memories", {"chat_id": "../../etc"}),
        ("list_direct_messages", {"chat_id": "a/b"}),
        ("list_summaries", {"chat_id": "../x"}),
        ("forget_context", {}),
    ):
        result = await running.command(name, **kwargs)
        assert result["status"] == "error" and result["reason"] == "bad_arguments", (name, kwargs)
    unknown = await running.command("update_memory", memory_id=999, content="x")
    assert unknown == {
        "status": "error",
        "error": "There is no stored memory with id 999; it may have been deleted. "
        "List the memories to see the current ids.",
        "reason": "not_found",
    }
    gone = await running.command("delete_memory", memory_id=999)
    assert gone["status"] == "error" and gone["reason"] == "not_found" and "999" in gone["error"]
