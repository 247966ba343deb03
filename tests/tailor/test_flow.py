"""Smart Context inside (a stand-in of) Tailor, loaded as Tailor loads plugins, driven through
Tailor's own chat path: topics, the panel and its commands, the filter on both the streaming and
the non-streaming path, the memory tools in Tailor's tool registry, and unloading."""

from __future__ import annotations

from typing import Any

import pytest

from smart_context.panel import PANEL_ID
from tests.tailor.conftest import StartTailor, Tailor

ASYNC_1 = "How do I cancel an asyncio task in Python?"
PARIS_1 = "What should I see in Paris in two days?"
ASYNC_2 = "How does asyncio gather handle Python exceptions?"
PARIS_2 = "Which museums in Paris open late?"


async def chat_with_two_subjects(tailor: Tailor, chat_id: str = "c1") -> None:
    for text in (ASYNC_1, PARIS_1, ASYNC_2, PARIS_2):
        await tailor.send(chat_id, text)


def user_texts(prompt: list[dict[str, str]]) -> list[str]:
    return [m["content"] for m in prompt if m["role"] == "user"]


def ui_commands(tailor: Tailor, action: str) -> list[dict[str, Any]]:
    return [d for d in tailor.brain.events_named("UI_COMMAND") if d["action"] == action]


async def test_the_generated_main_loads_and_registers_every_name(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    plugin = tailor.brain.plugins["smart_context"]
    assert type(plugin).__name__ == "Plugin" and plugin.smart_context.error is None
    for name in (
        "smart_context.set_filter",
        "smart_context.get_topics",
        "smart_context.set_similarity_mode",
        "smart_context.retrieve_context",
    ):
        assert tailor.brain.commands[name]["plugin"] == "smart_context"
    for event in (
        "pipeline.context",
        "pipeline.prompt",
        "pipeline.post_process",
        "pipeline.output",
    ):
        assert len(tailor.brain.subscribers(event)) >= 1


async def test_topics_are_extracted_after_tailor_saves_the_turn(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    await chat_with_two_subjects(tailor)
    stored = tailor.chat_file("c1")
    assert [m["content"] for m in stored["messages"] if m["role"] == "user"] == [
        ASYNC_1,
        PARIS_1,
        ASYNC_2,
        PARIS_2,
    ]
    assert len(stored["messages"]) == 8  # the topic pass lost none of Tailor's appends
    assert [t["label"] for t in stored["topics"]] == ["Python Asyncio", "Paris Trip"]
    announced = tailor.brain.events_named("smart_context.topics_updated")
    assert announced and announced[-1]["chat_id"] == "c1"
    assert any(category == "fast" for category, _ in tailor.llm.calls[1:])


async def test_the_panel_is_registered_with_the_bridge_to_tailor(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    [registered] = ui_commands(tailor, "register_panel")
    assert (registered["id"], registered["title"], registered["position"]) == (
        PANEL_ID,
        "Smart Context",
        "right",
    )
    [filled] = ui_commands(tailor, "set_panel")
    html = filled["html"]
    assert html.index("window.request") < html.index('id="sc-initial"')
    assert f'id="{PANEL_ID}"' in html


async def test_a_click_in_the_panel_filters_the_next_request(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    await chat_with_two_subjects(tailor)
    result = await tailor.brain.execute_command(
        "smart_context.set_filter", topics=["Python Asyncio"], chat_id="c1"
    )
    assert result["status"] == "success"
    by_id = {m["id"]: m["content"] for m in tailor.chat_file("c1")["messages"]}
    kept = [by_id[i] for i in result["included_ids"]]
    assert ASYNC_1 in kept and ASYNC_2 in kept and PARIS_1 not in kept
    # Tailor's chat view highlights on its own event name, with the same ids
    [highlight] = tailor.brain.events_named("smart_context.highlight_applied")
    assert highlight["message_ids"] == result["included_ids"]
    ctx = await tailor.send("c1", "And asyncio timeouts in Python?")
    assert ctx.metadata["smart_context"]["mode"] == "filtered"
    sent = user_texts(tailor.last_chat_prompt())
    assert ASYNC_1 in sent and PARIS_1 not in sent and sent[-1] == "And asyncio timeouts in Python?"


async def test_the_streaming_path_is_filtered_too(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    await chat_with_two_subjects(tailor)
    await tailor.brain.execute_command(
        "smart_context.set_filter", topics=["Paris Trip"], chat_id="c1"
    )
    ctx = await tailor.send("c1", "Is Paris busy in May?", stream=True)
    sent = user_texts(tailor.last_chat_prompt())
    assert PARIS_1 in sent and PARIS_2 in sent and ASYNC_1 not in sent
    assert ctx.response.startswith("Noted:")
    assert len(tailor.chat_file("c1")["messages"]) == 10  # Tailor saved the streamed turn


async def test_clearing_the_filter_sends_everything_again(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    await chat_with_two_subjects(tailor)
    await tailor.brain.execute_command(
        "smart_context.set_filter", topics=["Paris Trip"], chat_id="c1"
    )
    # Tailor's own panel wraps arguments in ``p``
    cleared = await tailor.brain.execute_command(
        "smart_context.set_filter", p={"topics": [], "chat_id": "c1"}
    )
    assert cleared["status"] == "success" and cleared["active_topics"] == []
    await tailor.send("c1", "Thanks!")
    assert len(user_texts(tailor.last_chat_prompt())) == 5


async def test_get_topics_and_similarity_mode_answer_tailors_panel(
    start_tailor: StartTailor,
) -> None:
    tailor = await start_tailor()
    await chat_with_two_subjects(tailor)
    topics = await tailor.brain.execute_command("smart_context.get_topics", chat_id="c1")
    assert topics["status"] == "success" and topics["total_messages"] == 8
    off = await tailor.brain.execute_command("smart_context.set_similarity_mode", enabled=False)
    assert off == {"status": "success", "embedding_search": False} | {
        k: v for k, v in off.items() if k not in ("status", "embedding_search")
    }
    bad = await tailor.brain.execute_command("smart_context.set_filter", topics="Paris")
    assert bad["status"] == "error" and bad["error"]


async def test_the_memory_tools_are_in_tailors_tool_registry(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    await tailor.send("c1", "My cat is called Miso.")
    registry = tailor.brain.tool_registry
    assert set(registry.tool_names) >= {
        "smart_context__retrieve_context",
        "smart_context__store_memory",
    }
    schemas = {
        s["function"]["name"]: s["function"]["parameters"] for s in registry.get_all_schemas()
    }
    retrieve = schemas["smart_context__retrieve_context"]
    assert retrieve["required"] == ["query"] and retrieve["properties"]["limit"] == {
        "type": "integer"
    }
    stored = await registry.execute("smart_context__store_memory", {"content": "The cat is Miso."})
    assert stored.startswith("Stored as memory #")
    found = await registry.execute("smart_context__retrieve_context", {"query": "cat Miso"})
    assert "The cat is Miso." in found
    wrong = await registry.execute("smart_context__store_memory", {"content": ""})
    assert "content is required" in wrong


async def test_unloading_leaves_tailor_as_it_was(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    pipeline = tailor.brain.pipeline
    assert "stream_run" in vars(pipeline)  # our wrapper
    await tailor.brain.unload_plugin("smart_context")
    assert "stream_run" not in vars(pipeline)
    assert tailor.brain.subscribers("pipeline.context") == []
    assert not any(n.startswith("smart_context") for n in tailor.brain.tool_registry.tool_names)
    assert ui_commands(tailor, "remove_panel")[-1]["id"] == PANEL_ID
    await tailor.brain.chat_send("Still there?", "c2", stream=True)  # Tailor streams as before
    assert len(tailor.chat_file("c2")["messages"]) == 2


async def test_a_failing_step_of_unloading_leaves_the_others_done(
    start_tailor: StartTailor, monkeypatch: pytest.MonkeyPatch
) -> None:
    tailor = await start_tailor()
    pipeline = tailor.brain.pipeline

    def broken(name: str) -> None:
        raise RuntimeError("the registry is gone")

    monkeypatch.setattr(tailor.brain.tool_registry, "unregister", broken)  # Tailor's stand-in
    await tailor.brain.unload_plugin("smart_context")
    assert "stream_run" not in vars(pipeline)  # our wrapper is off Tailor's streaming path
    assert tailor.brain.subscribers("pipeline.context") == []
    assert ui_commands(tailor, "remove_panel")[-1]["id"] == PANEL_ID


@pytest.mark.parametrize("stream", [False, True])
async def test_each_reply_is_stored_with_what_it_was_sent_with(
    start_tailor: StartTailor, stream: bool
) -> None:
    tailor = await start_tailor()
    await chat_with_two_subjects(tailor)
    await tailor.brain.execute_command(
        "smart_context.set_filter", topics=["Paris Trip"], chat_id="c1"
    )
    await tailor.send("c1", "Is Paris busy in May?", stream=stream)
    messages = tailor.chat_file("c1")["messages"]
    assert len(messages) == 10  # nothing of Tailor's turn was lost to our write
    last = messages[-1]
    assert last["role"] == "assistant" and last["content"].startswith("Noted:")
    record = last["smart_context"]
    assert record["mode"] == "filtered" and record["active_topics"] == ["Paris Trip"]
    assert record["usage"]["sent_tokens"] < record["usage"]["full_tokens"]
    # every earlier reply has its own record, written when it was saved
    assert all("smart_context" in m for m in messages if m["role"] == "assistant")
    updated = tailor.brain.events_named("chat.updated")
    assert updated[-1] == {"chat_id": "c1", "message_count": 10}
    # the panel's usage section reads the records back
    usage = await tailor.brain.execute_command("smart_context.usage_stats", chat_id="c1")
    assert usage["status"] == "success", usage
    assert usage["measured"] == 5 and len(usage["series"]) == 5


@pytest.mark.parametrize("stream", [False, True])
async def test_tailor_sends_no_tools_so_none_is_counted_or_listed(
    start_tailor: StartTailor, stream: bool
) -> None:
    """Tailor calls its model with the messages alone: the memory tools in its registry are
    never sent with a chat request, so the record neither counts nor lists them."""
    tailor = await start_tailor()
    ctx = await tailor.send("c1", ASYNC_1, stream=stream)
    assert ctx.response.startswith("Noted:")
    record = tailor.chat_file("c1")["messages"][-1]["smart_context"]
    assert record["budget"]["by_section"]["tools"] == 0
    assert record["tools"] == []
    assert record["usage"]["sent_tokens"] == record["budget"]["used"]


async def test_a_record_that_cannot_be_stored_costs_nothing_else(
    start_tailor: StartTailor, monkeypatch: pytest.MonkeyPatch
) -> None:
    tailor = await start_tailor()
    memory = tailor.ours.core.services.host.memory

    async def broken(chat_id: str, fn: Any) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(memory, "update_chat", broken)
    ctx = await tailor.send("c1", ASYNC_1, stream=True)
    assert ctx.response.startswith("Noted:")
    [user, reply] = tailor.chat_file("c1")["messages"]
    assert user["content"] == ASYNC_1 and "smart_context" not in reply
