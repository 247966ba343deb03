"""Tool calls in the reply: the real app, the real ``openai`` client against the loopback stub,
and a small plugin that offers tools and registers ``smart_context.call_tool`` as the Smart
Context plugin does (docs/contract.md §8)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.events import Subscription
from smart_context_hosts.sidecar.llm import ToolCallDelta
from smart_context_hosts.sidecar.runtime import Sidecar
from smart_context_hosts.sidecar.tools import (
    DECLINED_TEXT,
    MAX_TOOL_ROUNDS,
    MODEL_RESULT_CHARS,
    CallAssembler,
)
from tests.fakes import ToolPlugin, function_definition
from tests.openai_server import OpenAIStub, tool_calls
from tests.sidecar.conftest import (
    ClientFactory,
    chat_on_disk,
    llm_table,
    manager_with,
    read_events,
    running_app,
    write_settings,
)

SERVERS = (
    '[mcp.servers.files]\ncommand = "files-server"\nauto_approve = true\n'
    '[mcp.servers.web]\ncommand = "web-server"\n'
)
STREAM = {"Accept": "text/event-stream"}


@pytest.fixture
def settings(openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> str:
    """The vault's settings: the stub as chat model, a server that runs unasked and one that
    asks."""
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    return llm_table(openai_server.base_url, "STUB_KEY", chat="stub-chat") + SERVERS


def chat_requests(stub: OpenAIStub) -> list[dict[str, Any]]:
    return [body for path, body in stub.requests if path == "/v1/chat/completions"]


async def streamed(client: httpx.AsyncClient, chat_id: str, content: str) -> list[tuple[str, Any]]:
    url = f"/api/chats/{chat_id}/messages"
    async with client.stream("POST", url, json={"content": content}, headers=STREAM) as response:
        assert response.status_code == 200
        return [event async for event in read_events(response)]


async def next_event(sub: Subscription, name: str) -> dict[str, Any]:
    """The next hub event called ``name`` (within 10 s)."""
    while True:
        event = await sub.next(timeout=10)
        assert event is not None, f"no {name} event came"
        if event.name == name:
            data: dict[str, Any] = json.loads(event.data)
            return data


async def send_and_answer(
    client: httpx.AsyncClient, sidecar: Sidecar, chat_id: str, approve: bool | None
) -> tuple[dict[str, Any], dict[str, Any], httpx.Response | None]:
    """Send a message, wait for its ``tool_call`` event, answer it (``None``: never);
    returns the event, the reply and the answer's response."""
    with sidecar.host.events.subscribe() as sub:
        sending = asyncio.create_task(
            client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
        )
        call = await next_event(sub, "tool_call")
        answer = None
        if approve is not None:
            url = f"/api/chats/{chat_id}/tool-calls/{call['call_id']}"
            answer = await client.post(url, json={"approve": approve})
        reply = await sending
    assert reply.status_code == 200, reply.text
    return call, reply.json()["assistant_message"], answer


async def test_an_auto_approved_call_runs_and_the_model_reads_its_result(
    api: ClientFactory, vault: Path, openai_server: OpenAIStub, settings: str
) -> None:
    plugin = ToolPlugin()
    openai_server.chat_replies += [
        tool_calls(("files__read", {"path": "notes/a.md"}), text="Let me look."),
        "The note says hello.",
    ]
    client, sidecar = await api(plugin, settings=settings)
    with sidecar.host.events.subscribe() as sub:
        events = await streamed(client, "c1", "What is in my note?")
        hub = [await next_event(sub, "tool_call"), await next_event(sub, "tool_result")]

    names = [name for name, _ in events]
    assert names.index("tool_call") < names.index("tool_result") < len(names) - 1
    assert names[-1] == "done" and names[0] == "token"
    tokens = "".join(data["text"] for name, data in events if name == "token")
    assert tokens == "Let me look.\n\nThe note says hello."
    call = dict(events[names.index("tool_call")][1])
    result = dict(events[names.index("tool_result")][1])
    assert call == {
        "chat_id": "c1",
        "call_id": call["call_id"],
        "server_name": "files",
        "name": "read",
        "arguments": {"path": "notes/a.md"},
        "needs_approval": False,
    }
    assert result == {"chat_id": "c1", "call_id": call["call_id"], "ok": True, "summary": "read 22"}
    assert hub == [call, result]  # the same events reach every page
    assert plugin.calls == [("files", "read", {"path": "notes/a.md"})]

    first, second = chat_requests(openai_server)
    assert [t["function"]["name"] for t in first["tools"]] == ["files__read", "web__fetch"]
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "files__read",
        "arguments": '{"path": "notes/a.md"}',
    }
    assert tool == {
        "role": "tool",
        "tool_call_id": assistant["tool_calls"][0]["id"],
        "content": "contents of notes/a.md",
    }

    stored = chat_on_disk(vault, "c1")["messages"][-1]
    assert stored["content"] == tokens
    assert stored["tool_calls"] == [
        {
            "call_id": call["call_id"],
            "server_name": "files",
            "name": "read",
            "arguments": {"path": "notes/a.md"},
            "approved": True,
            "ok": True,
            "summary": "read 22",
            "result": "contents of notes/a.md",
        }
    ]


async def test_tool_results_are_not_sent_again_with_the_next_message(
    api: ClientFactory, openai_server: OpenAIStub, settings: str
) -> None:
    plugin = ToolPlugin()
    plugin.text = "SECRET-TOOL-OUTPUT for {path}"
    openai_server.chat_replies += [tool_calls(("files__read", {"path": "x"})), "Done reading."]
    client, _ = await api(plugin, settings=settings)
    await streamed(client, "c2", "Read x")
    await streamed(client, "c2", "And now?")

    later = chat_requests(openai_server)[-1]
    sent = json.dumps(later["messages"])
    assert "SECRET-TOOL-OUTPUT" not in sent and "tool_call" not in sent
    assert [m["role"] for m in later["messages"]] == ["user", "assistant", "user"]
    assert later["messages"][1] == {"role": "assistant", "content": "Done reading."}


async def test_a_call_that_needs_approval_waits_for_it(
    api: ClientFactory, vault: Path, openai_server: OpenAIStub, settings: str
) -> None:
    plugin = ToolPlugin()
    openai_server.chat_replies += [tool_calls(("web__fetch", {"path": "https://x"})), "Fetched."]
    client, sidecar = await api(plugin, settings=settings)

    call, reply, answer = await send_and_answer(client, sidecar, "c3", approve=True)

    assert call["needs_approval"] is True and call["server_name"] == "web"
    assert answer is not None and answer.status_code == 200
    assert answer.json() == {"status": "success", "call_id": call["call_id"], "approved": True}
    assert plugin.calls == [("web", "fetch", {"path": "https://x"})]
    assert reply["content"] == "Fetched."
    assert reply["tool_calls"][0]["approved"] is True and reply["tool_calls"][0]["ok"] is True
    again = await client.post(f"/api/chats/c3/tool-calls/{call['call_id']}", json={"approve": True})
    assert again.status_code == 404  # answered once, and the reply is over


async def test_a_declined_call_does_not_run_and_the_model_is_told(
    api: ClientFactory, openai_server: OpenAIStub, settings: str
) -> None:
    plugin = ToolPlugin()
    openai_server.chat_replies += [tool_calls(("web__fetch", {"path": "https://x"})), "Okay."]
    client, sidecar = await api(plugin, settings=settings)

    _, reply, answer = await send_and_answer(client, sidecar, "c4", approve=False)

    assert answer is not None and answer.json()["approved"] is False
    assert plugin.calls == []
    assert chat_requests(openai_server)[-1]["messages"][-1]["content"] == DECLINED_TEXT
    record = reply["tool_calls"][0]
    assert (record["approved"], record["ok"], record["summary"]) == (False, False, "Declined.")


async def test_an_unanswered_call_is_declined_after_the_timeout(
    api: ClientFactory, openai_server: OpenAIStub, settings: str
) -> None:
    plugin = ToolPlugin()
    openai_server.chat_replies += [tool_calls(("web__fetch", {})), "Okay."]
    client, sidecar = await api(plugin, settings=settings)
    sidecar.tool_approvals.timeout_seconds = 0.2

    _, reply, _ = await send_and_answer(client, sidecar, "c5", approve=None)

    assert plugin.calls == []
    assert reply["tool_calls"][0]["summary"] == "No answer within 0.2 s: declined."
    assert chat_requests(openai_server)[-1]["messages"][-1]["content"] == DECLINED_TEXT


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("files__read", '{"path": "a.md"', "The arguments are not valid JSON"),
        ("files__read", '["a.md"]', "The arguments must be one JSON object."),
        ("ghost__read", '{"path": "a.md"}', "There is no tool 'ghost__read' here"),
        ("read", "{}", "There is no tool 'read' here"),
    ],
)
async def test_a_call_that_cannot_be_made_is_an_error_the_model_reads(
    api: ClientFactory,
    openai_server: OpenAIStub,
    settings: str,
    name: str,
    arguments: str,
    problem: str,
) -> None:
    plugin = ToolPlugin()
    openai_server.chat_replies += [tool_calls((name, arguments)), "Sorry."]
    client, _ = await api(plugin, settings=settings)

    events = await streamed(client, "c6", "go")

    assert plugin.calls == []
    data = dict(events)
    assert data["tool_call"]["needs_approval"] is False
    assert data["tool_result"]["ok"] is False and data["tool_result"]["summary"].startswith(problem)
    second = chat_requests(openai_server)[-1]["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["content"].startswith(problem)
    if "JSON" in problem:  # what the model sent is not repeated to it as its own JSON
        assert second[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    stored = data["done"]["assistant_message"]
    assert stored["content"] == "Sorry." and stored["tool_calls"][0]["approved"] is False


async def test_without_the_call_tool_command_the_model_is_told_why(
    api: ClientFactory, openai_server: OpenAIStub, settings: str
) -> None:
    openai_server.chat_replies += [tool_calls(("files__read", {})), "No tools, then."]
    client, _ = await api(ToolPlugin(register=False), settings=settings)

    events = await streamed(client, "c7", "go")

    assert "not registered" in dict(events)["tool_result"]["summary"]
    assert "smart_context.call_tool" in chat_requests(openai_server)[-1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("answer", "summary", "model_reads"),
    [
        (
            {"status": "error", "error": "notes is down", "reason": "unavailable"},
            "The tool call failed: notes is down",
            "The tool call failed: notes is down",
        ),
        (RuntimeError("kaput"), "The tool call failed: Command", "RuntimeError: kaput"),
        (
            {"status": "success", "result": {"ok": False, "text": "No such file: a.md\nTry b.md"}},
            "No such file: a.md",
            "No such file: a.md\nTry b.md",
        ),
        ({"status": "success"}, "smart_context.call_tool answered without", "without a result"),
        ({"status": "success", "result": {"ok": True, "text": ""}}, "", "(no output)"),
    ],
)
async def test_what_the_tool_command_answers_is_what_the_model_reads(
    api: ClientFactory,
    openai_server: OpenAIStub,
    settings: str,
    answer: Any,
    summary: str,
    model_reads: str,
) -> None:
    plugin = ToolPlugin()
    plugin.answer = answer
    openai_server.chat_replies += [tool_calls(("files__read", {"path": "a.md"})), "I see."]
    client, _ = await api(plugin, settings=settings)

    events = dict(await streamed(client, "c14", "go"))

    ok = isinstance(answer, dict) and answer.get("result", {}).get("ok") is True
    assert events["tool_result"]["ok"] is ok
    assert events["tool_result"]["summary"].startswith(summary)
    assert model_reads in chat_requests(openai_server)[-1]["messages"][-1]["content"]
    assert events["done"]["assistant_message"]["tool_calls"][0]["approved"] is True


async def test_tool_rounds_are_bounded(
    api: ClientFactory, openai_server: OpenAIStub, settings: str
) -> None:
    plugin = ToolPlugin()
    openai_server.chat_replies += [tool_calls(("files__read", {"path": "again"}))] * (
        MAX_TOOL_ROUNDS + 1
    )
    client, _ = await api(plugin, settings=settings)

    events = await streamed(client, "c8", "Loop forever")

    requests = chat_requests(openai_server)
    assert len(requests) == MAX_TOOL_ROUNDS + 1
    assert all("tools" in body for body in requests[:-1]) and "tools" not in requests[-1]
    assert len(plugin.calls) == MAX_TOOL_ROUNDS
    done = dict(events)["done"]["assistant_message"]
    assert done["content"].startswith("(Tool calls stopped")
    assert len(done["tool_calls"]) == MAX_TOOL_ROUNDS


async def test_a_long_result_is_clipped_for_the_model_and_for_the_chat_file(
    api: ClientFactory, openai_server: OpenAIStub, settings: str
) -> None:
    plugin = ToolPlugin()
    plugin.text = "x" * (MODEL_RESULT_CHARS * 2)
    openai_server.chat_replies += [tool_calls(("files__read", {})), "Long."]
    client, _ = await api(plugin, settings=settings)

    events = await streamed(client, "c9", "go")

    sent = chat_requests(openai_server)[-1]["messages"][-1]["content"]
    assert sent.startswith("x" * MODEL_RESULT_CHARS) and "8000 more characters" in sent
    stored = dict(events)["done"]["assistant_message"]["tool_calls"][0]["result"]
    assert len(stored) < 2_100


@pytest.mark.parametrize(
    "tools", [None, [], "files__read", [{"type": "function", "function": {"name": "a b"}}], [7]]
)
async def test_no_valid_tools_means_a_plain_request(
    api: ClientFactory, openai_server: OpenAIStub, settings: str, tools: Any
) -> None:
    client, _ = await api(ToolPlugin(tools=tools), settings=settings)

    events = await streamed(client, "c10", "hello")

    assert events[-1][0] == "done"
    assert "tools" not in chat_requests(openai_server)[-1]


async def test_the_dry_run_shows_the_tools_the_model_would_get(
    api: ClientFactory, settings: str
) -> None:
    good = function_definition("files__read")
    client, _ = await api(ToolPlugin(tools=[good, {"type": "function"}, "x"]), settings=settings)

    answer = await client.post("/api/chats/c13/context", json={"content": "hi"})

    assert answer.status_code == 200 and answer.json()["tools"] == [good]


async def test_the_approval_endpoint_refuses_what_it_cannot_answer(
    api: ClientFactory, openai_server: OpenAIStub, settings: str
) -> None:
    openai_server.chat_replies += [tool_calls(("web__fetch", {})), "Okay."]
    client, sidecar = await api(ToolPlugin(), settings=settings)

    async def answers(call_id: str) -> AsyncIterator[httpx.Response]:
        for chat_id, body in [
            ("c11", {"approve": "yes"}),
            ("c11", {}),
            ("c11", {"approve": 1}),
            ("other", {"approve": True}),
            ("c11", {"approve": True}),
        ]:
            yield await client.post(f"/api/chats/{chat_id}/tool-calls/{call_id}", json=body)

    with sidecar.host.events.subscribe() as sub:
        sending = asyncio.create_task(client.post("/api/chats/c11/messages", json={"content": "x"}))
        call_id = (await next_event(sub, "tool_call"))["call_id"]
        unknown = await client.post("/api/chats/c11/tool-calls/nope", json={"approve": True})
        hostile = await client.post(
            "/api/chats/c11/tool-calls/%3Cscript%3E", json={"approve": True}
        )
        bad_chat = await client.post(f"/api/chats/..%2F..%2Fetc/tool-calls/{call_id}", json={})
        no_body = await client.post(f"/api/chats/c11/tool-calls/{call_id}")
        statuses = [r.status_code async for r in answers(call_id)]
        reply = await sending

    assert unknown.status_code == 404 and unknown.json()["status"] == "error"
    assert hostile.status_code == 404 and "<script>" not in hostile.text
    assert bad_chat.status_code in (400, 404)
    assert no_body.status_code == 400
    assert statuses == [400, 400, 400, 404, 200]  # a wrong chat cannot answer another's call
    assert reply.json()["assistant_message"]["tool_calls"][0]["approved"] is True


async def test_stopping_the_sidecar_declines_a_waiting_call_so_the_reply_is_stored(
    vault: Path, openai_server: OpenAIStub, settings: str
) -> None:
    write_settings(vault, settings)
    openai_server.chat_replies += [tool_calls(("web__fetch", {})), "Stopped."]
    sidecar = Sidecar(vault, plugin_manager=manager_with(ToolPlugin()))
    app = create_app(sidecar)
    started = time.monotonic()
    async with running_app(app) as client:
        with sidecar.host.events.subscribe() as sub:
            sending = asyncio.create_task(
                client.post("/api/chats/c12/messages", json={"content": "x"})
            )
            await next_event(sub, "tool_call")
    reply = await sending

    assert time.monotonic() - started < 10  # not the 300 s of the approval timeout
    assert reply.json()["assistant_message"]["tool_calls"][0]["summary"] == "Declined."
    assert chat_on_disk(vault, "c12")["messages"][-1]["content"] == "Stopped."


def test_pieces_join_by_index_and_a_call_without_an_id_gets_one() -> None:
    assembler = CallAssembler()
    assembler.add(ToolCallDelta(index=1, name="web__fetch", arguments='{"a"'))
    assembler.add(ToolCallDelta(index=0, name="files__read"))
    assembler.add(ToolCallDelta(index=1, arguments=": 1}"))

    calls = assembler.calls()

    assert [(c.function, c.arguments) for c in calls] == [
        ("files__read", ""),
        ("web__fetch", '{"a": 1}'),
    ]
    assert all(c.model_id.startswith("call_") for c in calls)
    assert calls[0].model_id != calls[1].model_id
