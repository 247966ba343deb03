"""The chat model manages its memory in the reference sidecar, every part real: the Smart
Context plugin found through its entry point offers its memory tools, the real ``openai``
client talks to the loopback stub scripted to call them, the tool-call loop runs them through
``smart_context.call_tool``, and the SQLite store and the chat files are real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.conftest import write_chat
from tests.openai_server import OpenAIStub, tool_calls
from tests.sidecar.conftest import chat_on_disk, llm_table, running_app, write_settings
from tests.sidecar.test_tool_calls import chat_requests, next_event, send_and_answer, streamed
from tests.test_memory_tools import MEMORY_TOOLS, long_chat

RETRIEVE = "smart_context__retrieve_context"
STORE = "smart_context__store_memory"
PLUGIN = (
    '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
    # offline summaries: the background pass must not take the stub's scripted replies
    'summarizer = "offline"\nbudget_tokens = 700\nrecent_messages = 4\n'
)


def settings(
    vault: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, extra: str = ""
) -> None:
    monkeypatch.setenv("STUB_KEY", stub.api_key)
    llm = llm_table(stub.base_url, "STUB_KEY", chat="stub-chat", embedding="stub-embedding")
    write_settings(vault, PLUGIN + extra + llm)


async def command(client: httpx.AsyncClient, name: str, **arguments: Any) -> dict[str, Any]:
    answer = await client.post(f"/api/commands/smart_context.{name}", json=arguments)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_the_model_looks_back_beyond_the_budget_and_reads_the_old_message(
    vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(vault, openai_server, monkeypatch)
    write_chat(vault, "c1", long_chat())
    openai_server.chat_replies += [
        tool_calls((RETRIEVE, {"query": "bicycle lock code"}), text="Let me look back."),
        "Your bicycle lock code is 4711.",
    ]
    sidecar = Sidecar(vault)
    async with running_app(create_app(sidecar)) as client:
        preview = (await client.post("/api/chats/c1/context", json={"content": "hm?"})).json()
        with sidecar.host.events.subscribe() as sub:
            events = await streamed(client, "c1", "What was that number I gave you?")
            hub = [await next_event(sub, "tool_call"), await next_event(sub, "tool_result")]

    assert [t["function"]["name"] for t in preview["tools"]] == MEMORY_TOOLS
    assert preview["tokens"]["tools"] > 100
    assert preview["smart_context"]["budget"]["by_section"]["tools"] > 100
    first, second = chat_requests(openai_server)
    assert [t["function"]["name"] for t in first["tools"]] == MEMORY_TOOLS
    assert "4711" not in json.dumps(first["messages"])  # outside the budget
    looked_back = second["messages"][-1]
    assert looked_back["role"] == "tool"
    assert "[2026-01-05 09:30 UTC] user: My bicycle lock code is 4711" in looked_back["content"]

    by_name = {name: data for name, data in events if name in ("tool_call", "tool_result")}
    call, result = by_name["tool_call"], by_name["tool_result"]
    assert call == {
        "chat_id": "c1",
        "call_id": call["call_id"],
        "server_name": "smart_context",
        "name": "retrieve_context",
        "arguments": {"query": "bicycle lock code"},
        "needs_approval": False,  # memory_tools_auto_approve, the default
    }
    assert result["ok"] is True and result["summary"].endswith("and 0 memories found")
    assert hub == [call, result]
    stored = chat_on_disk(vault, "c1")["messages"][-1]
    assert stored["content"] == "Let me look back.\n\nYour bicycle lock code is 4711."
    [record] = stored["tool_calls"]
    assert (record["server_name"], record["name"], record["ok"]) == (
        "smart_context",
        "retrieve_context",
        True,
    )
    assert "4711" in record["result"]


async def test_a_memory_the_model_stores_waits_for_approval_when_asked_to_and_is_kept(
    vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(vault, openai_server, monkeypatch, "memory_tools_auto_approve = false\n")
    fact = "The user's bicycle lock code is 4711."
    openai_server.chat_replies += [tool_calls((STORE, {"content": fact})), "I will remember it."]
    sidecar = Sidecar(vault)
    async with running_app(create_app(sidecar)) as client:
        call, reply, answer = await send_and_answer(client, sidecar, "c2", approve=True)
        listed = await command(client, "list_memories", chat_id="c2")
        elsewhere = await command(client, "list_memories", chat_id="c3")
        await client.post("/api/chats/c2/messages", json={"content": "Thanks!"})

    assert call["needs_approval"] is True and call["name"] == "store_memory"
    assert answer is not None and answer.json()["approved"] is True
    assert reply["content"] == "I will remember it." and reply["tool_calls"][0]["ok"] is True
    [memory] = listed["memories"]
    assert (memory["content"], memory["chat_id"], memory["source"]) == (fact, "c2", "chat model")
    assert elsewhere["memories"] == []
    later = chat_requests(openai_server)[-1]["messages"]
    assert later[0]["role"] == "system" and fact in later[0]["content"]


async def test_malformed_calls_are_results_the_model_reads_never_a_crash(
    vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(vault, openai_server, monkeypatch)
    write_chat(vault, "c1", long_chat())
    openai_server.chat_replies += [
        tool_calls((RETRIEVE, "{not json"), (RETRIEVE, {"limit": 3})),
        tool_calls((RETRIEVE, {"query": "code", "limit": 10**9})),
        tool_calls((RETRIEVE, {"query": "code", "chat_id": "other"})),
        tool_calls((STORE, {"content": "x" * 5000})),
        "Sorry, I could not look it up.",
    ]
    sidecar = Sidecar(vault)
    async with running_app(create_app(sidecar)) as client:
        answer = await client.post("/api/chats/c1/messages", json={"content": "The code?"})
        memories = await command(client, "list_memories", chat_id="c1")

    assert answer.status_code == 200, answer.text
    reply = answer.json()["assistant_message"]
    assert reply["content"] == "Sorry, I could not look it up." and "error" not in reply
    assert [call["ok"] for call in reply["tool_calls"]] == [False] * 5
    tool_messages = [
        m["content"] for m in chat_requests(openai_server)[-1]["messages"] if m["role"] == "tool"
    ]
    expected = [
        "not valid JSON",
        "query is required",
        "from 1 to 20",
        "current chat only",
        "at most 1000",
    ]
    assert len(tool_messages) == len(expected)
    for text, words in zip(tool_messages, expected, strict=True):
        assert words in text
    assert memories["memories"] == []


@pytest.mark.parametrize(
    ("plugin_extra", "llm_extra"),
    [("memory_tools = false\n", ""), ("", "tools = false\n")],
    ids=["memory_tools-off", "model-takes-no-tools"],
)
async def test_no_memory_tools_when_off_or_for_a_model_without_tools(
    vault: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    plugin_extra: str,
    llm_extra: str,
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    llm = llm_table(
        openai_server.base_url, "STUB_KEY", chat="stub-chat", embedding="stub-embedding"
    )
    write_settings(
        vault, PLUGIN + plugin_extra + llm.replace("[llm.models]", llm_extra + "[llm.models]")
    )
    async with running_app(create_app(Sidecar(vault))) as client:
        preview = (await client.post("/api/chats/c1/context", json={"content": "hi"})).json()
        answer = await client.post("/api/chats/c1/messages", json={"content": "hi"})

    assert answer.status_code == 200 and preview["tools"] == []
    assert preview["tokens"]["tools"] == 0
    assert preview["smart_context"]["budget"]["by_section"]["tools"] == 0
    assert "tools" not in chat_requests(openai_server)[-1]
