"""The plugin through a real pluggy PluginManager, hooks called exactly as a host calls them."""

from __future__ import annotations

import asyncio
import importlib.metadata
from pathlib import Path
from typing import Any

import pluggy
import pytest

import smart_context.hookspecs
from smart_context.plugin import SmartContextPlugin
from tests.conftest import Ctx, Running, call, read_chat, write_chat
from tests.fakes import FakeEmbedder, FakeUI, make_messages
from tests.openai_server import OpenAIStub

TEXTS = [
    "How do I cancel an asyncio task in Python?",  # m0
    "In Python asyncio, call task.cancel() and await the task.",  # m1
    "Be concise.",  # m2 (sticky)
    "Understood.",  # m3
    "What should I see in Paris in two days?",  # m4
    "The Louvre, Notre-Dame and a walk along the Seine in Paris.",  # m5
    "And asyncio timeouts?",  # m6
    "Use asyncio.timeout() as an async context manager.",  # m7
]
STICKY = {"label": "Instructions & Preferences", "sticky": True, "message_ids": ["m2"], "count": 1}
TOPICS = [{"label": "Python Asyncio", "count": 4}, {"label": "Paris Trip", "count": 2}, STICKY]


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


@pytest.fixture
def chat(vault: Path) -> list[dict[str, Any]]:
    messages = make_messages(TEXTS)
    write_chat(vault, "c1", messages, topics=TOPICS, other_plugin={"keep": True})
    return messages


def test_entry_point_loads_into_a_real_plugin_manager() -> None:
    eps = [
        ep for ep in importlib.metadata.entry_points(group="sidecar") if ep.name == "smart_context"
    ]
    assert len(eps) == 1 and eps[0].value == "smart_context.plugin:plugin"
    pm = pluggy.PluginManager("sidecar")
    pm.add_hookspecs(smart_context.hookspecs)
    pm.load_setuptools_entrypoints("sidecar")
    pm.check_pending()
    plugin = pm.get_plugin("smart_context")
    assert isinstance(plugin, SmartContextPlugin)
    names = {impl.plugin_name for impl in pm.hook.pipeline_context.get_hookimpls()}
    assert "smart_context" in names


def test_every_hookspec_is_documented_and_implemented() -> None:
    specs = [n for n in dir(smart_context.hookspecs) if n.startswith(("sidecar_", "pipeline_"))]
    for name in specs:
        assert getattr(smart_context.hookspecs, name).__doc__, name
    ours = {
        "sidecar_startup",
        "sidecar_register_commands",
        "sidecar_client_connected",
        "pipeline_context",
        "pipeline_output",
        "sidecar_shutdown",
    }
    assert ours <= set(specs)
    assert all(hasattr(SmartContextPlugin, n) for n in ours)


async def test_no_filter_keeps_history_and_records_full(start: Any, chat: list) -> None:
    running: Running = await start()
    ctx = await running.context("c1", list(chat))
    assert ids(ctx.history) == ids(chat)
    record = ctx.metadata["smart_context"]
    assert record["mode"] == "full" and record["sticky_ids"] == ["m2"]
    assert record["total_messages"] == 8 and record["threshold"] == "auto"  # the default


async def test_odd_ids_in_a_hand_edited_chat_never_cost_the_reply(start: Any, vault: Path) -> None:
    messages = [
        {"id": ["a"], "role": "user", "content": "a list as an id"},
        {"id": 7, "role": "assistant", "content": "a number as an id"},
        {"role": "user", "content": "no id at all"},
        {"id": "r", "role": ["assistant"], "content": "a list as a role"},
    ]
    write_chat(vault, "odd", messages)
    running: Running = await start()
    ctx = await running.context("odd", list(messages))
    record = ctx.metadata["smart_context"]
    assert "error" not in record, record
    assert [m.get("content") for m in ctx.history if m.get("role") != "system"] == [
        m["content"] for m in messages
    ]


async def test_filter_keeps_topic_messages_and_sticky_in_order(
    start: Any, chat: list, embedder: FakeEmbedder
) -> None:
    running: Running = await start({"similarity_threshold": 0.3})
    result = await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    assert result["status"] == "success", result
    assert result["active_topics"] == ["Python Asyncio"]
    kept = ["m0", "m1", "m2", "m3", "m6", "m7"]  # the sticky m2 brings its answer, m3
    assert result["included_ids"] == kept and result["total_messages"] == 8
    ctx = await running.context("c1", list(chat))
    assert ids(ctx.history) == kept
    record = ctx.metadata["smart_context"]
    assert record["mode"] == "filtered" and set(record["scores"]) == set(kept)
    assert ctx.message == "next question"  # the message being sent is never filtered away
    event, payload = running.host.events[-1]
    assert event == "smart_context.filter_changed" and payload["included_ids"] == kept


async def test_filter_choice_survives_a_restart_and_other_keys_are_kept(
    start: Any, chat: list, vault: Path
) -> None:
    first: Running = await start()
    await first.command("set_filter", topics=["Paris Trip"], chat_id="c1")
    await first.settle()  # the choice is written in the background
    stored = read_chat(vault, "c1")
    assert stored["smart_context"]["active_topics"] == ["Paris Trip"]
    assert stored["other_plugin"] == {"keep": True} and stored["topics"] == TOPICS
    second: Running = await start()
    topics = await second.command("get_topics", chat_id="c1")
    assert topics["active_topics"] == ["Paris Trip"]
    assert topics["topics"] == TOPICS and topics["total_messages"] == 8


async def test_fallback_when_no_message_is_close(start: Any, chat: list) -> None:
    running: Running = await start({"similarity_threshold": 0.95})
    result = await running.command("set_filter", topics=["Gardening"], chat_id="c1")
    ctx = await running.context("c1", list(chat))
    assert ids(ctx.history) == ids(chat) and ctx.metadata["smart_context"]["mode"] == "fallback"
    said = "no message is close enough to 'Gardening': the full history is sent"
    assert ctx.metadata["smart_context"]["note"] == said
    event = [data for name, data in running.host.events if name.endswith("filter_changed")][-1]
    assert result["mode"] == event["mode"] == "fallback" and event["note"] == said


async def test_only_uncached_messages_are_embedded_once(
    start: Any, chat: list, embedder: FakeEmbedder, vault: Path
) -> None:
    running: Running = await start()
    await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    embedder.calls.clear()
    await running.context("c1", list(chat))
    assert embedder.calls == []  # warm: neither messages nor the label are embedded again
    new = {"id": "m8", "role": "user", "content": "asyncio queues?"}
    await running.context("c1", [*list(chat), new])
    assert embedder.calls == [["asyncio queues?"]]
    # a new process reads the cache file instead of embedding again
    assert running.plugin.services is not None
    await running.plugin.services.close()
    assert (vault / ".memory" / "c1.embeddings.json").exists()
    fresh = FakeEmbedder()
    again = SmartContextPlugin(fresh)
    pm = pluggy.PluginManager("sidecar")
    pm.add_hookspecs(smart_context.hookspecs)
    pm.register(again)
    await call(pm.hook.sidecar_startup, host=running.host)
    ctx = Ctx("c1", list(chat))
    await call(pm.hook.pipeline_context, ctx=ctx)
    assert fresh.embedded == ["Python Asyncio"]


async def test_embedding_failure_keeps_full_history_with_a_reason(
    start: Any, chat: list, embedder: FakeEmbedder
) -> None:
    running: Running = await start()
    await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    embedder.fail_with = "Cannot reach the embedding endpoint at http://127.0.0.1:9/v1"
    history = [*list(chat), {"id": "m9", "role": "user", "content": "new words"}]
    ctx = await running.context("c1", history)
    assert ctx.history == history
    record = ctx.metadata["smart_context"]
    assert record["mode"] == "full" and "Cannot reach" in record["error"]


async def test_a_click_the_embedding_model_refuses_says_so_and_filters_nothing(
    start: Any, chat: list, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedding endpoint that refuses the key (no OpenAI key): the click's result must not
    read as a filter; it names the failure and its reason, and every message stays."""
    monkeypatch.delenv("SC_TEST_NO_KEY", raising=False)  # loopback: a placeholder key, refused
    settings = {
        "embedder": "openai",
        "openai_base_url": openai_server.base_url,
        "openai_api_key_env": "SC_TEST_NO_KEY",
    }
    running: Running = await start(settings=settings, use_embedder=False)
    result = await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    assert result["status"] == "success" and result["mode"] == "full"
    assert result["included_ids"] == ids(chat) and result["total_messages"] == 8
    note = result["note"]
    assert note.startswith("Embeddings failed") and "whole history is sent" in note
    assert "rejected the API key (HTTP 401)" in note and "SC_TEST_NO_KEY" in note
    emitted = [data for name, data in running.host.events if name.endswith("filter_changed")]
    assert emitted[-1]["note"] == note  # the panel hears the same words
    again = await running.command("get_topics", chat_id="c1")
    assert again["mode"] == "full" and again["note"] == note  # and so does a reload
    ctx = await running.context("c1", list(chat))
    assert ctx.metadata["smart_context"]["error"] == note  # the stored record says it too


async def test_hostile_chat_id_leaves_history_alone(start: Any, vault: Path) -> None:
    running: Running = await start()
    history = make_messages(["hi"])
    ctx = await running.context("../../etc", history)
    assert ctx.history == history and "error" in ctx.metadata["smart_context"]
    result = await running.command("get_topics", chat_id="../../etc")
    assert result["status"] == "error" and "not valid" in result["error"]
    assert not any(vault.parent.glob("etc*"))


@pytest.mark.parametrize(
    ("name", "kwargs", "fragment"),
    [
        ("set_filter", {"topics": "Python", "chat_id": "c1"}, "list"),
        ("set_filter", {"topics": [""], "chat_id": "c1"}, "non-empty"),
        ("set_filter", {"topics": [3], "chat_id": "c1"}, "non-empty"),
        ("set_filter", {"topics": []}, "No chat is open"),
        ("set_similarity_mode", {"enabled": "yes"}, "true or false"),
        ("get_topics", {"chat_id": "c1", "bogus": 1}, "unexpected keyword"),
    ],
)
async def test_bad_command_arguments_get_errors_not_exceptions(
    start: Any, chat: list, name: str, kwargs: dict, fragment: str
) -> None:
    running: Running = await start()
    result = await running.command(name, **kwargs)
    assert result["status"] == "error" and fragment in result["error"], result


async def test_similarity_mode_off_disables_filter_and_is_written_back(
    start: Any, chat: list, vault: Path
) -> None:
    (vault / ".vault.toml").write_text(
        "[plugins.smart_context]\n# keep me\nembedding_search = true\n"
    )
    running: Running = await start()
    await running.command("set_filter", topics=["Paris Trip"], chat_id="c1")
    result = await running.command("set_similarity_mode", enabled=False)
    assert result == {"status": "success", "embedding_search": False}
    assert "# keep me\nembedding_search = false" in (vault / ".vault.toml").read_text()
    ctx = await running.context("c1", list(chat))
    assert ids(ctx.history) == ids(chat) and ctx.metadata["smart_context"]["mode"] == "full"
    event, payload = running.host.events[-1]
    assert event == "smart_context.filter_changed" and payload["active_topics"] == []
    assert payload["included_ids"] == ids(chat)


async def test_bad_setting_turns_the_filter_off_with_a_visible_reason(
    start: Any, chat: list
) -> None:
    running: Running = await start({"similarity_threshold": 3})
    ctx = await running.context("c1", list(chat))
    assert ids(ctx.history) == ids(chat)
    assert "similarity_threshold" in ctx.metadata["smart_context"]["error"]


async def test_client_connected_registers_and_fills_the_panel(start: Any) -> None:
    running: Running = await start()
    ui = FakeUI()
    await call(running.pm.hook.sidecar_client_connected, ui=ui)
    panel = ui.panels["smart-context-panel"]
    assert panel["title"] == "Smart Context" and 'id="smart-context-panel"' in panel["html"]


async def test_shutdown_flushes_and_is_safe_to_call(start: Any, chat: list, vault: Path) -> None:
    running: Running = await start()
    await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    cache_file = vault / ".memory" / "c1.embeddings.json"
    assert not cache_file.exists()  # vectors embedded on the request path wait in memory
    await call(running.pm.hook.sidecar_shutdown)
    assert cache_file.exists()  # ... and are written on shutdown
    assert read_chat(vault, "c1")["smart_context"] == {"active_topics": ["Python Asyncio"]}
    await call(running.pm.hook.sidecar_shutdown)  # a second shutdown is harmless
    assert cache_file.exists()


async def test_default_embedder_is_the_hosts_model(start: Any, chat: list) -> None:
    running: Running = await start({"similarity_threshold": 0.3}, use_embedder=False)
    result = await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    assert result["status"] == "success" and "m0" in result["included_ids"]
    embedded = [t for call_ in running.host.llm.embed_calls for t in call_]
    assert "Python Asyncio" in embedded and TEXTS[0] in embedded


async def test_openai_embedder_through_the_real_client(
    start: Any, chat: list, openai_server: Any, monkeypatch: pytest.MonkeyPatch, vault: Path
) -> None:
    monkeypatch.setenv("SC_TEST_KEY", openai_server.api_key)
    settings = {
        "embedder": "openai",
        "openai_base_url": openai_server.base_url,
        "openai_embedding_model": "stub-embedding",
        "openai_api_key_env": "SC_TEST_KEY",
        "similarity_threshold": 0.4,
    }
    running: Running = await start(settings, use_embedder=False)
    result = await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    assert result["status"] == "success", result
    # the stub's 64-dimension bag of words: the asyncio turns pass, the Paris turn does not (at
    # 0.3 its question passed on the words it shares with "In Python asyncio", and brought its
    # answer)
    assert {"m0", "m6", "m7"} <= set(result["included_ids"])
    assert not {"m4", "m5"} & set(result["included_ids"])
    paths = [path for path, _ in openai_server.requests]
    assert len(paths) == 2 and all(p.endswith("/embeddings") for p in paths)  # messages, label
    ctx = await running.context("c1", list(chat))
    assert ctx.metadata["smart_context"]["mode"] == "filtered"
    assert running.plugin.services is not None
    await running.plugin.services.close()
    header = (vault / ".memory" / "c1.embeddings.json").read_text()[:200]
    assert '"model":"openai:stub-embedding"' in header


async def test_unreachable_embedding_endpoint_is_a_readable_error(start: Any, chat: list) -> None:
    settings = {
        "embedder": "openai",
        "openai_base_url": "http://127.0.0.1:9/v1",
        "openai_embedding_model": "m",
    }
    running: Running = await start(settings, use_embedder=False)
    result = await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    ctx = await running.context("c1", list(chat))
    assert ids(ctx.history) == ids(chat)
    record = ctx.metadata["smart_context"]
    assert record["mode"] == "full" and "Cannot reach" in record["error"]
    assert result["status"] == "success" and result["included_ids"] == ids(chat)


async def test_a_reload_while_the_choice_is_being_saved_keeps_the_new_choice(
    start: Any, chat: list, vault: Path
) -> None:
    running: Running = await start()
    await running.command("set_filter", topics=["Paris Trip"], chat_id="c1")
    again = await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    topics = await running.command("get_topics", chat_id="c1")  # re-reads the chat file
    assert again["active_topics"] == topics["active_topics"] == ["Python Asyncio"]
    await running.settle()
    assert read_chat(vault, "c1")["smart_context"]["active_topics"] == ["Python Asyncio"]
    assert len(read_chat(vault, "c1")["messages"]) == len(chat)


async def test_a_slow_read_does_not_undo_a_choice_made_meanwhile(start: Any, chat: list) -> None:
    running: Running = await start()
    memory = running.host.memory
    reading = asyncio.Event()
    release = asyncio.Event()
    original = memory.load_chat

    async def slow_load(chat_id: str) -> dict[str, Any]:
        data = await original(chat_id)  # the file as it was before the click
        reading.set()
        await release.wait()
        return data

    await running.command("get_topics", chat_id="c1")
    memory.load_chat = slow_load  # type: ignore[method-assign]
    pending = asyncio.ensure_future(running.command("get_topics", chat_id="c1"))
    await reading.wait()
    memory.load_chat = original  # type: ignore[method-assign]
    await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    await running.settle()  # the choice is saved before the slow read returns
    release.set()
    await pending
    ctx = await running.context("c1", list(chat))
    assert ctx.metadata["smart_context"]["active_topics"] == ["Python Asyncio"]


async def test_filtering_a_chat_that_does_not_exist_creates_nothing(
    start: Any, vault: Path
) -> None:
    running: Running = await start()
    result = await running.command("set_filter", topics=["Python"], chat_id="typo")
    assert result["status"] == "error" and "no messages" in result["error"]
    cleared = await running.command("set_filter", topics=[], chat_id="typo")
    assert cleared["status"] == "success" and cleared["included_ids"] == []
    await running.settle()
    assert not (vault / ".memory" / "typo.json").exists()


async def test_odd_members_on_the_chat_file_never_break_a_click(start: Any, vault: Path) -> None:
    odd_topics = [
        {"label": "Python Asyncio", "count": 4, "message_ids": "m0, m1"},  # not a list
        {"label": "Paris Trip", "count": 2, "message_ids": [["m4"], {"id": "m5"}, None, 5]},
        {"label": "Ghosts", "count": 1, "message_ids": ["gone-1", "gone-2"]},  # deleted since
        STICKY,
    ]
    write_chat(vault, "c1", make_messages(TEXTS), topics=odd_topics)
    running: Running = await start()
    for label in ("Python Asyncio", "Paris Trip", "Ghosts"):
        result = await running.command("set_filter", topics=[label], chat_id="c1")
        assert result["status"] == "success" and "m2" in result["included_ids"]  # sticky stays
        ctx = await running.context("c1", make_messages(TEXTS))
        assert "error" not in ctx.metadata["smart_context"]


async def test_the_vaults_items_are_embedded_when_the_plugin_starts(
    vault: Path, start: Any, embedder: FakeEmbedder
) -> None:
    (vault / "references").mkdir()
    (vault / "references" / "oven.md").write_text(
        "---\ninclude: agent\n---\nPreheat the Dutch oven for an hour.\n", encoding="utf-8"
    )
    running = await start()
    await running.settle()
    assert any("Preheat the Dutch oven" in t for t in embedder.embedded)  # before any request


async def test_naming_a_chat_in_a_command_does_not_change_the_open_chat(
    start: Any, chat: list, vault: Path
) -> None:
    write_chat(vault, "c2", make_messages(["other chat", "its answer"], prefix="o"))
    running: Running = await start()
    await running.context("c1", list(chat))  # a request: c1 is the chat open now
    pinned = await running.command("mark_important", chat_id="c2", message_id="o0")
    assert pinned["status"] == "success"
    assert running.plugin.services is not None
    assert running.plugin.services.current_chat_id == "c1"
    cleared = await running.command("set_filter", topics=[])  # no chat named: the open one
    assert cleared["status"] == "success" and cleared["chat_id"] == "c1"
