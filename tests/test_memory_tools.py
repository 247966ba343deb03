"""The chat model's memory tools through the real plugin: offered with a request and counted in
its budget, run by ``smart_context.call_tool`` on the host's chat, on the real SQLite store and
real chat files. The sidecar end to end (the real ``openai`` client, the tool-call loop) is in
``tests/sidecar/test_memory_tools.py``."""

from __future__ import annotations

import asyncio
import functools
import weakref
from pathlib import Path
from typing import Any

import pytest

from smart_context.budget.tokens import counter_for, prompt_tokens
from smart_context.memory.model_tools import (
    MAX_MEMORY_CHARS,
    MODEL_SOURCE,
    RESULT_CHARS,
    memory_tool_definitions,
    retrieved_text,
)
from smart_context.memory.unsent import Unsent, UnsentLog, unsent_of
from tests.conftest import Ctx, call, write_chat

MEMORY_TOOLS = ["smart_context__retrieve_context", "smart_context__store_memory"]
SMALL_BUDGET = {"budget_tokens": 700, "recent_messages": 4}
FILLER = [
    "Which pan is best for a frittata on a gas hob?",
    "A well seasoned cast iron skillet, ten inches across, works best there.",
    "How long should the onions soften before the eggs go in?",
    "About eight minutes on a low flame, stirring now and then.",
    "Can I add spinach at the same moment as the cheese?",
    "Wilt it first, squeeze the water out, then fold it in.",
]


def long_chat(n: int = 60) -> list[dict[str, Any]]:
    """``n`` messages about cooking, with a lock code said halfway and a bicycle mentioned late;
    each with the time it was sent."""
    texts = [FILLER[i % len(FILLER)] for i in range(n)]
    texts[n // 2] = "My bicycle lock code is 4711, please keep it in mind."
    texts[n // 2 + 1] = "Got it: the lock code is 4711."
    texts[n - 2] = "I rode my bicycle to the market this morning."
    return [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": text,
            "created_at": f"2026-01-05T09:{i:02d}:00.000+00:00",
        }
        for i, text in enumerate(texts)
    ]


async def tool(running: Any, name: str, arguments: Any, chat_id: Any = "c1") -> dict[str, Any]:
    """``call_tool`` as the sidecar's tool-call loop calls it for a memory tool."""
    kwargs: dict[str, Any] = {"server_name": "smart_context", "name": name}
    kwargs |= {"arguments": arguments, "chat_id": chat_id}
    return dict(await running.commands.handlers["smart_context.call_tool"](**kwargs))


def names(ctx: Ctx) -> list[str]:
    return [t["function"]["name"] for t in ctx.metadata.get("tools", [])]


async def test_the_tools_are_offered_and_counted_in_the_budget(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", long_chat())
    running = await start(settings=SMALL_BUDGET)
    ctx = await running.context("c1", long_chat())

    assert names(ctx) == MEMORY_TOOLS
    assert ctx.metadata["auto_approve_servers"] == ["smart_context"]
    budget = ctx.metadata["smart_context"]["budget"]
    counted = prompt_tokens(counter_for(None), [], memory_tool_definitions())["tools"]
    assert budget["by_section"]["tools"] == counted > 100
    assert budget["used"] <= budget["limit"] == 700
    descriptions = {
        t["function"]["name"]: t["function"]["description"] for t in ctx.metadata["tools"]
    }
    retrieve = descriptions["smart_context__retrieve_context"]
    assert "not in your prompt" in retrieve and "stored memories" in retrieve
    assert "Remember one fact" in descriptions["smart_context__store_memory"]


@pytest.mark.parametrize(
    ("settings", "metadata", "offered", "unasked"),
    [
        ({"memory_tools": False}, {}, False, False),
        ({"memory_tools_auto_approve": False}, {}, True, False),
        ({}, {"tools_supported": False}, False, True),
    ],
)
async def test_when_the_tools_are_offered_and_run_unasked(
    start: Any,
    vault: Path,
    settings: dict[str, Any],
    metadata: dict[str, Any],
    offered: bool,
    unasked: bool,
) -> None:
    write_chat(vault, "c1", long_chat(8))
    running = await start(settings=settings)
    ctx = Ctx("c1", long_chat(8))
    ctx.metadata |= metadata
    await call(running.pm.hook.pipeline_context, ctx=ctx)

    assert names(ctx) == (MEMORY_TOOLS if offered else [])
    # the record lists every tool sent, the plugin's own included: what its budget counted
    record = ctx.metadata["smart_context"]
    assert record["tools"] == names(ctx)
    assert (record["budget"]["by_section"]["tools"] > 0) is offered
    assert ("auto_approve_servers" in ctx.metadata) is unasked
    if settings.get("memory_tools") is False:
        refused = await tool(running, "retrieve_context", {"query": "lock code"})
        assert refused["status"] == "error" and "memory_tools = false" in refused["error"]


async def test_a_look_back_finds_what_the_request_left_out_with_who_and_when(
    start: Any, vault: Path
) -> None:
    write_chat(vault, "c1", long_chat())
    running = await start(settings=SMALL_BUDGET)
    ctx = await running.context("c1", long_chat())
    sent = {m.get("id") for m in ctx.history}
    assert "m30" not in sent and "m58" in sent  # the premise: the code is outside the budget

    answer = await tool(running, "retrieve_context", {"query": "bicycle lock code"})

    assert answer["status"] == "success"
    result = answer["result"]
    assert result["ok"] is True
    text = result["text"]
    assert "[2026-01-05 09:30 UTC] user: My bicycle lock code is 4711" in text
    assert "[2026-01-05 09:31 UTC] assistant: Got it: the lock code is 4711." in text
    assert "market" not in text  # m58 is in the prompt: the model reads it already
    found = {m["id"] for m in result["structured"]["messages"]}
    assert found.isdisjoint(sent) and {"m30", "m31"} <= found
    assert result["summary"].startswith(f"{len(found)} messages and 0 memories")
    assert running.plugin.services.current_chat_id == "c1"


async def test_a_stored_memory_belongs_to_the_chat_and_is_listed(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", long_chat(8))
    running = await start()
    answer = await tool(
        running, "store_memory", {"content": " The lock code is 4711. ", "importance": 0.8}
    )
    assert answer["status"] == "success" and answer["result"]["ok"] is True
    memory_id = answer["result"]["structured"]["memory_id"]
    assert answer["result"]["text"] == f"Stored as memory #{memory_id} of this chat: " + (
        "The lock code is 4711."
    )

    [listed] = (await running.command("list_memories", chat_id="c1"))["memories"]
    assert listed["id"] == memory_id and listed["chat_id"] == "c1"
    assert (listed["content"], listed["importance"]) == ("The lock code is 4711.", 0.8)
    assert listed["source"] == MODEL_SOURCE
    assert (await running.command("list_memories", chat_id="c2"))["memories"] == []
    changed = [d for e, d in running.host.events if e == "smart_context.memory_changed"]
    assert changed[-1]["chat_id"] == "c1"
    # and the next request of the chat carries it
    ctx = await running.context("c1", long_chat(8))
    assert "The lock code is 4711." in ctx.history[0]["content"]


async def test_another_chat_can_be_neither_read_nor_written(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", long_chat(8))
    write_chat(vault, "c2", [{"id": "x0", "role": "user", "content": "The safe code is 1234."}])
    running = await start()
    await running.command("store_memory", content="The safe code is 1234.", chat_id="c2")

    for name, arguments in (
        ("retrieve_context", {"query": "safe code", "chat_id": "c2"}),
        ("store_memory", {"content": "Hello", "chat_id": "c2"}),
    ):
        answer = await tool(running, name, arguments)
        assert answer["result"]["ok"] is False
        assert "current chat only" in answer["result"]["text"]
    own = await tool(running, "retrieve_context", {"query": "safe code 1234", "chat_id": "c1"})
    assert own["result"]["ok"] is True and "1234" not in own["result"]["text"]
    assert [m["chat_id"] for m in (await running.command("list_memories"))["memories"]] == ["c2"]


@pytest.mark.parametrize(
    ("name", "arguments", "words"),
    [
        ("retrieve_context", {}, "query is required"),
        ("retrieve_context", {"query": "   "}, "query is required"),
        ("retrieve_context", {"query": 42}, "query is required"),
        ("retrieve_context", {"query": "x" * 4001}, "longer than 4000"),
        ("retrieve_context", {"query": "code", "limit": 1000}, "from 1 to 20"),
        ("retrieve_context", {"query": "code", "limit": "5"}, "from 1 to 20"),
        ("retrieve_context", {"query": "code", "limit": True}, "from 1 to 20"),
        ("retrieve_context", {"query": "code", "chat_id": 7}, "current chat only"),
        ("retrieve_context", {"query": "code", "scope": "all"}, "Unknown argument 'scope'"),
        ("store_memory", {}, "content is required"),
        ("store_memory", {"content": ["a"]}, "content is required"),
        ("store_memory", {"content": "x" * (MAX_MEMORY_CHARS + 1)}, "at most 1000"),
        ("store_memory", {"content": "fine", "importance": 5}, "importance"),
        ("forget_context", {"memory_id": 1}, "no memory tool 'forget_context'"),
    ],
)
async def test_a_bad_argument_is_a_result_the_model_reads(
    start: Any, vault: Path, name: str, arguments: dict[str, Any], words: str
) -> None:
    write_chat(vault, "c1", long_chat(8))
    running = await start()
    answer = await tool(running, name, arguments)
    assert answer["status"] == "success"  # the call ran; the tool says what was wrong
    assert answer["result"]["ok"] is False and words in answer["result"]["text"]
    assert (await running.command("list_memories"))["memories"] == []


@pytest.mark.parametrize(
    ("arguments", "chat_id", "words"),
    [
        ([1], "c1", "arguments must be an object"),
        ({"query": "code"}, None, "chat_id is required"),
        ({"query": "code"}, "../../etc", "not valid"),
    ],
)
async def test_a_call_without_a_chat_or_with_odd_arguments_is_refused(
    start: Any, vault: Path, arguments: Any, chat_id: Any, words: str
) -> None:
    running = await start()
    answer = await tool(running, "retrieve_context", arguments, chat_id=chat_id)
    assert answer["status"] == "error" and words in answer["error"]


async def test_the_name_smart_context_is_reserved_for_the_plugins_tools(
    start: Any, vault: Path
) -> None:
    (vault / ".vault.toml").write_text(
        '[mcp.servers.smart_context]\ncommand = "some-server"\n', encoding="utf-8"
    )
    running = await start()
    problems = (await running.command("list_items"))["problems"]
    assert any(
        "[mcp.servers.smart_context]" in p["message"]
        and "give this server another name" in p["message"]
        for p in problems
    ), problems


def test_what_the_model_reads_is_bounded_and_says_who_and_when() -> None:
    big = "word " * 2000
    messages = [
        {"id": f"m{i}", "role": "user", "content": big, "created_at": "2026-01-05T09:00:00Z"}
        for i in range(40)
    ]
    memories = [{"content": big, "created_at": 1_767_600_000.0} for _ in range(20)]
    text = retrieved_text("code", messages, memories)
    assert len(text) <= RESULT_CHARS
    lines = text.splitlines()
    assert lines[1].startswith("[2026-01-05 09:00 UTC] user: word word")
    assert lines[-1].startswith("[… ") and lines[-1].endswith("more lines not shown]")
    assert retrieved_text("code", [], []) == "Nothing found for 'code'."
    odd = retrieved_text("q", [{"role": "user", "content": "hi", "created_at": "soon"}], [])
    assert "[time unknown] user: hi" in odd
    whole = retrieved_text("q", [], [], whole=True)
    assert whole.startswith("Every message of this chat is already in your prompt.")


def test_the_unsent_record_is_what_the_request_left_out_and_is_bounded() -> None:
    history = [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"role": "user"}]
    unsent = unsent_of(history, [{"role": "system"}, {"id": "c"}], [3, "x", 5])
    assert unsent == Unsent(frozenset({"a", "b"}), frozenset({3, 5}))
    log = UnsentLog(max_chats=2)
    for chat in ("c1", "c2", "c3"):
        log.put(chat, unsent)
    assert log.get("c1") is None and log.get("c3") == unsent


def test_a_look_back_brings_each_hit_with_its_partner_as_the_budget_finds_it() -> None:
    import numpy as np

    from smart_context.commands.memory import look_back_hits
    from smart_context.turns import ASSISTANT, USER

    # two questions in a row, then the answer: the first question's partner is that answer
    codes = np.array([USER, USER, ASSISTANT, USER, ASSISTANT], dtype=np.int8)
    scores = np.array([0.9, 0.0, 0.0, 0.0, 0.1], dtype=np.float32)
    everything = np.ones(5, dtype=bool)
    assert look_back_hits(scores, codes, 1, everything) == [0, 2]
    assert look_back_hits(scores, codes, 2, everything) == [0, 2, 3, 4]  # an answer, its question
    allowed = np.array([True, True, False, True, True])  # a partner already sent is not repeated
    assert look_back_hits(scores, codes, 1, allowed) == [0]


async def test_a_chat_s_replaced_unsent_record_is_freed_after_the_request() -> None:
    log = UnsentLog()
    first = functools.partial(Unsent, frozenset({"m1"}), frozenset())
    watch = weakref.ref(first)
    log.put("c1", first)
    log.put("c1", functools.partial(Unsent, frozenset(), frozenset()))
    del first
    assert watch() is not None
    await asyncio.sleep(0)
    assert watch() is None and log.get("c1") == Unsent(frozenset(), frozenset())
