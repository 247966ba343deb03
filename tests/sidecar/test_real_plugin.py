"""The real Smart Context plugin, found through its entry point, inside the reference sidecar."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from smart_context.plugin import SmartContextPlugin
from smart_context.resources import static_dir
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.events import ServerEvent, Subscription
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import chat_on_disk, llm_table, running_app, write_settings


async def drain(sub: Subscription, quiet: float = 0.5) -> AsyncIterator[ServerEvent]:
    """The events already sent and those that follow until ``quiet`` seconds pass without one."""
    while (event := await sub.next(timeout=quiet)) is not None:
        yield event


PLUGIN_TABLE = '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'


@pytest.fixture
def stub_settings(vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vault's settings: the plugin offline-mapped, the model and embeddings of the stub."""
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    write_settings(
        vault,
        PLUGIN_TABLE
        + llm_table(
            openai_server.base_url, "STUB_KEY", chat="stub-chat", embedding="stub-embedding"
        ),
    )


async def test_entry_point_plugin_end_to_end(
    vault: Path, openai_server: OpenAIStub, stub_settings: None
) -> None:
    sidecar = Sidecar(vault)
    assert isinstance(sidecar.pm.get_plugin("smart_context"), SmartContextPlugin)
    assert sidecar.plugin_report.errors == []

    async with running_app(create_app(sidecar)) as client:
        assert "smart_context.get_topics" in sidecar.commands.handlers
        with sidecar.host.events.subscribe() as sub:
            for text in ("Plan a week in Kyoto in April", "What should I pack for rain?"):
                answer = await client.post("/api/chats/trip/messages", json={"content": text})
                assert answer.status_code == 200, answer.text
            topics = await client.post(
                "/api/commands/smart_context.get_topics", json={"chat_id": "trip"}
            )
            filtered = await client.post(
                "/api/commands/smart_context.set_filter", json={"chat_id": "trip", "topics": []}
            )
            names = [event.name async for event in drain(sub)]
            searched = await client.post(
                "/api/commands/smart_context.search_items", json={"query": "rain in Kyoto"}
            )
            no_query = await client.post("/api/commands/smart_context.search_items", json={})
            wrong = {
                json.dumps(bad): await client.post(
                    "/api/commands/smart_context.set_filter", json=bad
                )
                for bad in ({"chat_id": "../../etc", "topics": []}, {"topics": "A"}, {"nope": 1})
            }
        if (static_dir() / "app" / "index.html.j2").exists():
            page = await client.get("/?chat=trip")
            assert 'id="smart-context-panel"' in page.text

    assert topics.json()["status"] == "success"
    assert filtered.json()["status"] == "success"
    assert searched.json() == {"status": "success", "items": [], "problems": []}  # no rules yet
    assert no_query.status_code == 400 and "query is required" in no_query.json()["error"]
    for bad in ({"chat_id": "../../etc", "topics": []}, {"topics": "A"}, {"nope": 1}):
        assert wrong[json.dumps(bad)].status_code == 400, wrong[json.dumps(bad)].text
        assert wrong[json.dumps(bad)].json()["status"] == "error"
    assert "smart_context.filter_changed" in names
    assert names.count("chat.updated") == 4  # each message, the user's and the reply, is news
    messages = chat_on_disk(vault, "trip")["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 2
    record = messages[-1]["smart_context"]
    assert record["mode"] == "full" and record["total_messages"] == 2
    assert messages[-1]["content"] == "echo: What should I pack for rain?"


async def test_the_reply_is_sent_with_the_vaults_rules_and_says_which(
    vault: Path, openai_server: OpenAIStub, stub_settings: None
) -> None:
    (vault / "rules").mkdir()
    (vault / "rules" / "spelling.md").write_text(
        "---\ninclude: always\npriority: 1\n---\nWrite British English.\n", encoding="utf-8"
    )
    (vault / "rules" / "kyoto.md").write_text(
        "---\ninclude: agent\n---\nKyoto temples close early in winter\n", encoding="utf-8"
    )
    (vault / "rules" / "never.md").write_text(
        "---\ninclude: manual\n---\nKyoto temples manual rule\n", encoding="utf-8"
    )
    async with running_app(create_app(Sidecar(vault))) as client:
        answer = await client.post(
            "/api/chats/trip/messages", json={"content": "When do Kyoto temples close?"}
        )
        assert answer.status_code == 200, answer.text
        sent = [b for p, b in openai_server.requests if p.endswith("/chat/completions")]
        system = sent[-1]["messages"][0]
        assert system["role"] == "system"
        assert "Write British English." in system["content"]
        assert "close early in winter" in system["content"]
        assert "manual rule" not in system["content"]  # a manual item is never sent on its own
        stored = chat_on_disk(vault, "trip")["messages"][-1]["request_context"]
        modes = {i["name"]: i["include_mode"] for i in stored["items"]}
        assert modes["spelling"] == "always" and modes["kyoto"] == "agent"
        assert "never" not in modes and "timestamp" in stored

        # the session: the user adds the manual rule and removes the always one
        async def command(command_name: str, **args: object) -> httpx.Response:
            return await client.post(f"/api/commands/smart_context.{command_name}", json=args)

        listed = (await command("list_items", chat_id="trip")).json()["items"]
        assert {i["name"]: i["in_session"] for i in listed} == {
            "spelling": True,
            "kyoto": False,
            "never": False,
        }
        rule = {"chat_id": "trip", "type": "rule"}
        assert (await command("add_item", **rule, name="never")).status_code == 200
        session = (await command("remove_item", **rule, name="spelling")).json()["items"]
        assert session == [{"type": "rule", "name": "never", "include_mode": "manual"}]
        assert (await command("add_item", **rule, name="nothing")).status_code == 400
        for bad in (
            {"chat_id": "trip", "type": "note", "name": "never"},
            {"chat_id": "trip", "type": "tool", "name": "read_file"},  # a tool needs its server
            {"chat_id": "trip", "type": "rule", "name": "  "},
        ):
            assert (await command("remove_item", **bad)).status_code == 400
        assert (await command("list_items", chat_id="../../etc")).status_code == 400
        hostile = await client.post("/api/chats/..%2E/context", json={"content": "x"})
        assert hostile.status_code in (400, 404)
        await client.post("/api/chats/trip/messages", json={"content": "And the gardens?"})
        # a dry run shows what the next message would be sent with, and changes nothing
        calls = len(openai_server.requests)
        before = chat_on_disk(vault, "trip")["messages"]
        preview = await client.post("/api/chats/trip/context", json={"content": "Gardens too?"})
        assert preview.status_code == 200, preview.text
        shown = preview.json()
        assert shown["messages"][0]["role"] == "system"
        assert "manual rule" in shown["messages"][0]["content"]
        assert shown["messages"][-1] == {"role": "user", "content": "Gardens too?"}
        assert shown["smart_context"]["mode"] == "full" and shown["request_context"]["items"]
        tokens = shown["tokens"]  # "stub-chat" has no known tokenizer: estimated, and said so
        assert (tokens["model"], tokens["encoding"], tokens["exact"]) == (
            "stub-chat",
            "estimate",
            False,
        )
        assert tokens["messages"] > len(shown["messages"]) * 3
        assert tokens["total"] == tokens["messages"] + tokens["tools"]  # the memory tools
        assert chat_on_disk(vault, "trip")["messages"] == before  # no message stored
        assert not any(p.endswith("/chat/completions") for p, _ in openai_server.requests[calls:])
        assert (await client.post("/api/chats/trip/context", json={})).status_code == 400
    system = [b for p, b in openai_server.requests if p.endswith("/chat/completions")][-1]
    text = system["messages"][0]["content"]
    assert "manual rule" in text and "British English" not in text
    assert chat_on_disk(vault, "trip")["context_items"] == session


def with_example_server(vault: Path, extra: str = "") -> tuple[Sidecar, SmartContextPlugin]:
    """The vault's settings plus the example MCP server (its tools chosen per message), and a
    sidecar on it with the real plugin."""
    import sys

    settings = (vault / ".vault.toml").read_text(encoding="utf-8")
    write_settings(
        vault,
        settings
        + "[mcp.servers.example]\n"
        + f'command = "{sys.executable}"\n'
        + 'args = ["-m", "smart_context_hosts.example_mcp"]\ninclude = "agent"\n'
        + extra,
    )
    sidecar = Sidecar(vault)
    plugin = sidecar.pm.get_plugin("smart_context")
    assert isinstance(plugin, SmartContextPlugin)
    return sidecar, plugin


async def test_tools_of_the_vaults_mcp_server_are_chosen_previewed_and_called(
    vault: Path, openai_server: OpenAIStub, stub_settings: None
) -> None:
    sidecar, plugin = with_example_server(vault)
    async with running_app(create_app(sidecar)) as client:
        assert plugin.services is not None
        await plugin.services.items.servers.settle()  # listed in the background at start

        async def command(command_name: str, **args: object) -> httpx.Response:
            return await client.post(f"/api/commands/smart_context.{command_name}", json=args)

        await client.post("/api/chats", json={"title": "Money"})
        created = (await client.get("/api/chats")).json()["chats"][0]["id"]
        listed = (await command("list_items", chat_id=created)).json()
        tools = {i["name"] for i in listed["items"] if i["type"] == "tool"}
        assert {"yen_to_euro", "convert_units"} <= tools and listed["problems"] == []
        assert listed["settings"]["context_tools_top_n"] == 5 and listed["preset"] == "normal"

        # the chat asks for fewer tools; the dry run shows exactly those, as the model gets them
        answer = await command(
            "set_session_settings", chat_id=created, settings={"context_tools_top_n": 1}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["settings"]["context_tools_top_n"] == 1
        assert chat_on_disk(vault, created)["context_settings"] == {"context_tools_top_n": 1}
        preview = await client.post(
            f"/api/chats/{created}/context", json={"content": "How much is 16000 yen in euro?"}
        )
        shown = preview.json()
        assert [t["function"]["name"] for t in shown["tools"]] == [
            "example__yen_to_euro",
            "smart_context__retrieve_context",  # the plugin's own memory tools come last
            "smart_context__store_memory",
        ]
        assert shown["tools"][0]["function"]["parameters"]["type"] == "object"
        chosen = [i for i in shown["request_context"]["items"] if i["type"] == "tool"]
        assert chosen[0]["server_name"] == "example" and chosen[0]["include_mode"] == "agent"
        # the record names every tool its budget counted, the memory tools too (View context)
        assert shown["smart_context"]["tools"] == [t["function"]["name"] for t in shown["tools"]]

        called = await command(
            "call_tool", server_name="example", name="yen_to_euro", arguments={"yen": 16000}
        )
        assert called.status_code == 200, called.text
        assert called.json()["result"]["ok"] and "100" in called.json()["result"]["text"]
        for bad in (
            {"server_name": "nope", "name": "x"},
            {"server_name": "example", "name": "yen_to_euro", "arguments": [1]},
            {"server_name": "example"},
        ):
            refused = await command("call_tool", **bad)
            assert refused.status_code == 400 and refused.json()["status"] == "error"
        bad_settings = await command(
            "set_session_settings", chat_id=created, settings={"context_top_n": "all"}
        )
        assert bad_settings.status_code == 400 and "context_top_n" in bad_settings.json()["error"]


async def test_a_model_that_takes_no_tools_is_sent_none_and_the_record_lists_none(
    vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    table = llm_table(openai_server.base_url, "STUB_KEY", chat="stub-chat")
    write_settings(
        vault, PLUGIN_TABLE + table.replace("[llm.models]", "tools = false\n[llm.models]")
    )
    sidecar, plugin = with_example_server(vault)
    async with running_app(create_app(sidecar)) as client:
        assert plugin.services is not None
        await plugin.services.items.servers.settle()
        created = (await client.post("/api/chats", json={"title": "Money"})).json()["id"]
        preview = await client.post(
            f"/api/chats/{created}/context", json={"content": "How much is 16000 yen in euro?"}
        )
        shown = preview.json()
        assert shown["tools"] == []
        assert [i for i in shown["request_context"]["items"] if i["type"] == "tool"] == []
        record = shown["smart_context"]
        assert record["tools"] == [] and record["budget"]["by_section"]["tools"] == 0


async def test_the_model_calls_a_tool_of_the_vaults_mcp_server_end_to_end(
    vault: Path, openai_server: OpenAIStub, stub_settings: None
) -> None:
    """The whole path, every part real: the plugin chooses the example server's tool for the
    message, the sidecar offers it to the model, the model calls it, the call runs on the
    server (a process started from the package, over stdio) and the model reads the result."""
    from tests.openai_server import tool_calls

    sidecar, plugin = with_example_server(vault, "auto_approve = true\n")
    openai_server.chat_replies += [
        tool_calls(("example__yen_to_euro", {"yen": 16000})),
        "16,000 yen is about 100 euro.",
    ]
    async with running_app(create_app(sidecar)) as client:
        assert plugin.services is not None
        await plugin.services.items.servers.settle()
        answer = await client.post(
            "/api/chats/money/messages", json={"content": "How much is 16000 yen in euro?"}
        )
        assert answer.status_code == 200, answer.text
        reply = answer.json()["assistant_message"]
    assert reply["content"].endswith("16,000 yen is about 100 euro.")
    [call] = reply["tool_calls"]
    assert (call["server_name"], call["name"], call["ok"]) == ("example", "yen_to_euro", True)
    assert "100" in call["result"]
    chosen = [i["name"] for i in reply["request_context"]["items"] if i["type"] == "tool"]
    assert "yen_to_euro" in chosen
    first, second = [b for p, b in openai_server.requests if p.endswith("/chat/completions")][-2:]
    assert "example__yen_to_euro" in [t["function"]["name"] for t in first["tools"]]
    assert second["messages"][-1]["role"] == "tool" and "100" in second["messages"][-1]["content"]
    stored = chat_on_disk(vault, "money")["messages"][-1]
    assert stored["tool_calls"][0]["approved"] is True


async def test_the_dry_run_counts_tokens_with_the_models_own_tokenizer(
    vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    no_tools = PLUGIN_TABLE + "memory_tools = false\n"  # so the request is one message only
    write_settings(
        vault, no_tools + llm_table(openai_server.base_url, "STUB_KEY", chat="gpt-4o-mini")
    )
    async with running_app(create_app(Sidecar(vault))) as client:
        shown = (await client.post("/api/chats/c1/context", json={"content": "hello world"})).json()
    tokens = shown["tokens"]
    assert tokens["encoding"] == "o200k_base" and tokens["exact"]
    assert tokens["context_window"] == 128_000
    # one user message: 3 framing + "user" 1 + "hello world" 2, then 3 to prime the reply
    assert shown["messages"] == [{"role": "user", "content": "hello world"}]
    assert tokens == {
        "model": "gpt-4o-mini",
        "encoding": "o200k_base",
        "exact": True,
        "messages": 9,
        "tools": 0,
        "total": 9,
        "context_window": 128_000,
    }


async def test_editing_a_memory_that_is_gone_is_a_404_that_says_so(
    vault: Path, stub_settings: None
) -> None:
    async with running_app(create_app(Sidecar(vault))) as client:
        stored = await client.post(
            "/api/commands/smart_context.store_memory", json={"content": "Likes green tea."}
        )
        memory_id = stored.json()["memory"]["id"]
        deleted = await client.post(
            "/api/commands/smart_context.delete_memory", json={"memory_id": memory_id}
        )
        edit = {"memory_id": memory_id, "content": "Likes black tea."}
        edited = await client.post("/api/commands/smart_context.update_memory", json=edit)
        again = await client.post(
            "/api/commands/smart_context.delete_memory", json={"memory_id": memory_id}
        )
    assert deleted.json() == {"status": "success", "deleted": True}
    assert edited.status_code == 404, edited.text
    assert edited.json()["reason"] == "not_found"
    assert f"no stored memory with id {memory_id}" in edited.json()["error"]
    assert again.status_code == 404 and again.json()["reason"] == "not_found"


async def test_set_filter_tells_a_missing_chat_from_an_empty_or_damaged_one(vault: Path) -> None:
    (vault / ".memory").mkdir()
    (vault / ".memory" / "broken.json").write_text('{"messages": [', encoding="utf-8")
    (vault / ".memory" / "empty.json").write_text('{"messages": []}', encoding="utf-8")
    path = "/api/commands/smart_context.set_filter"
    async with running_app(create_app(Sidecar(vault))) as client:
        answers = {
            (chat, bool(topics)): await client.post(path, json={"chat_id": chat, "topics": topics})
            for chat in ("typo", "broken", "empty")
            for topics in (["Paris Trip"], [])
        }
    missing = answers["typo", True]
    assert missing.status_code == 404, missing.text
    assert "'typo' does not exist" in missing.json()["error"]
    damaged = answers["broken", True]
    assert damaged.status_code == 409, damaged.text
    aside = [p.name for p in (vault / ".memory").glob("broken.json.corrupt-*")]
    assert len(aside) == 1 and f".memory/{aside[0]}" in damaged.json()["error"]
    assert answers["empty", True].status_code == 409
    assert "no messages to filter" in answers["empty", True].json()["error"]
    for chat in ("typo", "broken", "empty"):  # clearing a filter never fails
        assert answers[chat, False].status_code == 200, answers[chat, False].text
    assert not (vault / ".memory" / "typo.json").exists()
