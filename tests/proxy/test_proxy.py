"""``smart-context proxy`` end to end: the real ``openai`` client, the proxy served by uvicorn on
loopback, and a scripted OpenAI-compatible upstream on loopback (tests/openai_server.py)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from smart_context import allocator
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.cli_reports import show_stats
from smart_context_hosts.proxy import relay as relay_module
from smart_context_hosts.proxy.app import Proxy, ProxyOptions, create_app, note_of
from smart_context_hosts.proxy.relay import Relay, Turn
from smart_context_hosts.proxy.vaults import OneVault
from smart_context_hosts.sidecar.app import create_app as create_page_app
from smart_context_hosts.sidecar.memory import HELD
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub, tool_calls
from tests.sidecar.conftest import (
    chat_on_disk,
    live_server,
    llm_table,
    manager_with,
    running_app,
    write_settings,
)

PLUGIN_TABLE = '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
SYSTEM = {"role": "system", "content": "You are terse. Never use emoji."}


@dataclass
class Running:
    client: openai.AsyncOpenAI
    url: str
    sidecar: Sidecar
    stub: OpenAIStub
    vault: Path
    proxy: Proxy

    def chat_bodies(self) -> list[dict[str, Any]]:
        """What the upstream received at /v1/chat/completions, in order."""
        return [body for path, body in self.stub.requests if path == "/v1/chat/completions"]

    async def settle(self) -> None:
        """Every reply stored, and the plugin's background work after it done."""
        await self.proxy.settle()
        await self.sidecar.pm.get_plugin("smart_context").services.settle(timeout=30)


def stub_vault(
    folder: Path,
    server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    plugin_table: str = PLUGIN_TABLE,
) -> Path:
    """``folder`` made a vault whose models are the stub server's (chat and embeddings), with
    ``plugin_table`` for the plugin's settings."""
    folder.mkdir()
    monkeypatch.setenv("STUB_KEY", server.api_key)
    write_settings(
        folder, plugin_table + llm_table(server.base_url, "STUB_KEY", embedding="stub-embedding")
    )
    return folder


@pytest.fixture
def vault(tmp_path: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stub_vault(tmp_path / "vault", openai_server, monkeypatch)


@pytest.fixture
async def running(vault: Path, openai_server: OpenAIStub) -> AsyncIterator[Running]:
    sidecar = Sidecar(vault)
    app = create_app(sidecar, ProxyOptions(openai_server.base_url, chat_headers=("X-Conv",)))
    async with live_server(app) as url:
        client = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key=openai_server.api_key, max_retries=0
        )
        yield Running(client, url, sidecar, openai_server, vault, app.state.proxy)
        await app.state.proxy.settle()
        await client.close()


async def turn(
    run: Running, history: list[dict[str, Any]], text: str, chat: str | None = "trip", **extra: Any
) -> tuple[str, str | None]:
    """Send ``history`` and ``text`` as a client would; the reply's text and our header."""
    headers = {"X-Smart-Context-Chat": chat} if chat else {}
    raw = await run.client.chat.completions.with_raw_response.create(
        model="stub-chat",
        messages=[*history, {"role": "user", "content": text}],
        extra_headers=headers,
        **extra,
    )
    reply = raw.parse().choices[0].message.content or ""
    history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    return reply, note_of(raw.headers)


async def test_a_chat_through_the_proxy_is_a_vault_chat_with_its_records(running: Running) -> None:
    history: list[dict[str, Any]] = [SYSTEM]
    for text in ("Plan four days in Kyoto", "Which temples first?", "And where to eat?"):
        reply, note = await turn(running, history, text)
        assert reply == f"echo: {text}"
        assert note is not None and note.startswith("sent ") and " tokens" in note
    bodies = running.chat_bodies()
    assert all(body["messages"][0] == SYSTEM for body in bodies)  # first and unchanged
    assert bodies[-1]["messages"][-1] == {"role": "user", "content": "And where to eat?"}
    assert bodies[-1]["model"] == "stub-chat"
    await running_settle(running)
    chat = chat_on_disk(running.vault, "trip")
    roles = [(m["role"], m["content"]) for m in chat["messages"]]
    assert roles == [(m["role"], m["content"]) for m in history[1:]]
    replies = [m for m in chat["messages"] if m["role"] == "assistant"]
    assert all(m["smart_context"]["usage"]["sent_tokens"] > 0 for m in replies)
    assert all(m["model"] == "stub-chat" and m["usage"]["prompt_tokens"] > 0 for m in replies)
    assert chat["proxy"]["system"] == [SYSTEM] and chat["title"] == "Plan four days in Kyoto"
    # the next turn of a stateless client finds the stored messages, none twice
    await turn(running, history, "Thanks!")
    await running_settle(running)
    assert len(chat_on_disk(running.vault, "trip")["messages"]) == 8
    # `smart-context stats` reads the proxied chat as any other
    out, err = io.StringIO(), io.StringIO()
    assert show_stats(running.vault, True, out, err) == 0
    (chat_stats,) = json.loads(out.getvalue())["chats"]
    assert chat_stats["chat_id"] == "trip" and chat_stats["replies"] == 4
    assert chat_stats["reported_prompt_tokens"] > 0


async def running_settle(run: Running) -> None:
    await run.settle()


async def test_a_streamed_reply_passes_through_and_is_stored(running: Running) -> None:
    running.stub.chat_replies.append("Start at Fushimi Inari at dawn, then Tofuku-ji.")
    raw = await running.client.chat.completions.with_raw_response.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "Temples?"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Smart-Context-Chat": "trip"},
    )
    assert note_of(
        raw.headers,
    ) is not None and note_of(raw.headers).startswith("sent ")  # type: ignore[union-attr]
    pieces = [
        c.choices[0].delta.content
        async for c in raw.parse()
        if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 3 and "".join(pieces) == "Start at Fushimi Inari at dawn, then Tofuku-ji."
    await running_settle(running)
    stored = chat_on_disk(running.vault, "trip")["messages"]
    assert stored[-1]["content"] == "Start at Fushimi Inari at dawn, then Tofuku-ji."
    assert stored[-1]["usage"]["completion_tokens"] == 8 and "error" not in stored[-1]


async def test_a_turn_is_urgent_until_it_goes_upstream(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cycle collector's passes wait while a turn is prepared (``allocator.urgent``), and
    not while the upstream works on it: the part of a request a person waits on is ours."""
    seen: list[int] = []
    prepare = Relay.prepare

    async def watched(self: Relay, *args: Any, **kwargs: Any) -> Turn:
        seen.append(allocator._urgent)
        return await prepare(self, *args, **kwargs)

    monkeypatch.setattr(Relay, "prepare", watched)
    running.stub.delay = 0.3
    asked = asyncio.ensure_future(turn(running, [], "Temples?"))
    while not running.chat_bodies():  # the upstream has it, and sleeps on it
        await asyncio.sleep(0.01)
    at_upstream = allocator._urgent
    reply, note = await asked
    assert seen == [1] and at_upstream == 0 and allocator._urgent == 0
    assert reply == "echo: Temples?" and note is not None and note.startswith("sent ")


async def test_a_long_chat_s_next_turn_gets_copies_made_ahead_and_keeps_its_own(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a long chat's reply, copies of its messages for the next turn's plugins are made
    off the event loop; the turn gets those very copies, and a plugin that changes them
    changes nothing the relay keeps: the turn after gets the messages as stored."""
    monkeypatch.setattr(relay_module, "SPARE_FROM", 2)  # a long chat: two messages here
    handed: list[list[dict[str, Any]]] = []  # the messages each turn's plugins were given
    read: list[list[str]] = []  # and their text, as given
    call_hook = relay_module.call_hook

    async def changing(pm: Any, phase: str, *, ctx: Any) -> None:
        if phase == "pipeline_input":  # a plugin that edits the messages it is given
            handed.append(list(ctx.history))
            read.append([m["content"] for m in ctx.history])
            for message in ctx.history:
                message["content"] = "changed by a plugin"
        await call_hook(pm, phase, ctx=ctx)

    monkeypatch.setattr(relay_module, "call_hook", changing)
    relay = running.proxy.vaults.vault.relay  # type: ignore[attr-defined]
    history: list[dict[str, Any]] = []
    await turn(running, history, "Plan four days in Kyoto")
    await running_settle(running)
    await relay.settle()
    memo = relay._memos["trip"]
    assert memo.spare is not None and memo.spare == memo.stored
    spare = list(memo.spare)
    assert all(copy is not kept for copy, kept in zip(spare, memo.stored, strict=True))
    await turn(running, history, "Which temples first?")
    assert len(handed[1]) == 2 and all(a is b for a, b in zip(handed[1], spare, strict=True))
    await running_settle(running)
    await relay.settle()
    await turn(running, history, "And where to eat?")
    assert read[2] == [
        "Plan four days in Kyoto",
        "echo: Plan four days in Kyoto",
        "Which temples first?",
        "echo: Which temples first?",
    ]
    assert relay._memos["trip"].spare is None  # taken by that turn; the next reply makes more


def test_copies_are_the_spare_ones_taken_then_the_rest_made_now() -> None:
    stored = [{"id": f"m{k}", "role": "user", "content": f"text {k}"} for k in range(5)]
    spare = relay_module._copies(stored[:3])
    assert spare == stored[:3] and all(c is not m for c, m in zip(spare, stored, strict=False))
    made = list(spare)
    memo = relay_module._Memo([], stored, spare)
    first = memo.copies()
    assert first == stored and all(f is m for f, m in zip(first, made, strict=False))
    assert first[4] is not stored[4] and memo.spare is None
    again = memo.copies()  # the spare went to one turn: the next makes its own
    assert again == stored and all(c is not f for c, f in zip(again, first, strict=True))
    assert relay_module._copies([]) == []


async def test_other_paths_and_the_key_pass_through_untouched(running: Running) -> None:
    models = await running.client.models.list()
    assert [m.id for m in models.data] == ["stub-embedding", "stub-chat"]
    wrong = openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        await wrong.models.list()
    await wrong.close()
    assert "Incorrect API key" in str(caught.value)
    embedded = await running.client.embeddings.create(model="stub-embedding", input="hello")
    assert len(embedded.data[0].embedding) == 64


async def test_upstream_errors_reach_the_client_with_their_status_and_body(
    running: Running,
) -> None:
    running.stub.fail_next.append(429)
    with pytest.raises(openai.RateLimitError) as limited:
        await turn(running, [], "hello")
    assert limited.value.status_code == 429 and "Rate limit reached" in str(limited.value)
    await running_settle(running)
    stored = chat_on_disk(running.vault, "trip")["messages"]
    # what the server said, in words: not a Python bytes literal
    assert stored[-1]["error"] == "The model server answered 429: Rate limit reached for requests."
    running.stub.fail_next.append(500)
    with pytest.raises(openai.InternalServerError):
        await turn(running, [], "hello", stream=True)
    await running_settle(running)
    stored = chat_on_disk(running.vault, "trip")["messages"]
    assert stored[-1]["error"] == (
        "The model server answered 500: The server had an error processing your request."
    )
    # the client tries again: the same message, stored once, and the error dropped
    reply, _ = await turn(running, [], "hello")
    await running_settle(running)
    assert reply == "echo: hello"
    assert [m["content"] for m in chat_on_disk(running.vault, "trip")["messages"]] == [
        "hello",
        "echo: hello",
    ]


async def refusal(url: str, key: str, chat: str) -> openai.APIStatusError:
    """What the ``openai`` client raises for one turn of ``chat`` through the proxy at ``url``."""
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model="stub-chat",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"X-Smart-Context-Chat": chat},
            )
    finally:
        await client.close()
    return caught.value


async def test_an_unreachable_upstream_is_a_502_in_openais_shape(vault: Path) -> None:
    sidecar = Sidecar(vault)
    app = create_app(sidecar, ProxyOptions("http://127.0.0.1:9/v1"))
    async with live_server(app) as url:
        caught = await refusal(url, "k", "c")
    assert caught.status_code == 502
    assert "could not be reached" in caught.body["message"]  # type: ignore[index]


async def test_the_clients_tools_and_tool_calls_pass_through_untouched(running: Running) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    running.stub.chat_replies.append(tool_calls(("get_weather", {"city": "Kyoto"})))
    asked = [{"role": "user", "content": "Weather in Kyoto?"}]
    first = await running.client.chat.completions.create(
        model="stub-chat",
        messages=asked,
        tools=tools,
        extra_headers={"X-Smart-Context-Chat": "w"},  # type: ignore[arg-type]
    )
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {
        "city": "Kyoto"
    }
    round_two = [
        *asked,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Rain, 12 C"},
    ]
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=round_two,
        tools=tools,
        extra_headers={"X-Smart-Context-Chat": "w"},  # type: ignore[arg-type]
    )
    bodies = running.chat_bodies()
    for body in bodies:  # the client's first and unchanged, the plugin's own beside them
        assert body["tools"][:1] == tools
        assert all(t["function"]["name"].startswith("smart_context__") for t in body["tools"][1:])
    assert bodies[1]["messages"][-2:] == round_two[-2:]  # the tool round, as the client sent it


async def test_without_a_chat_id_the_request_passes_untouched_and_says_why(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [SYSTEM, {"role": "user", "content": "hi"}]
    for _ in range(2):
        raw = await running.client.chat.completions.with_raw_response.create(
            model="stub-chat", messages=messages
        )  # type: ignore[arg-type]
        note = note_of(raw.headers)
        assert note is not None and note.startswith("off; no chat id")
        assert "ENABLE_FORWARD_USER_INFO_HEADERS=true" in note  # Open WebUI's switch, named
        # the upstream's date and server are the proxy's own: each said once
        assert len(raw.headers.get_list("date")) == 1
        assert len(raw.headers.get_list("server")) <= 1
    assert running.chat_bodies()[-1]["messages"] == messages
    assert not list((running.vault / ".memory").glob("*.json"))
    said = [r for r in caplog.records if "came with no chat id" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"  # once, not on every request


OPEN_WEBUI_HEADERS = {
    "X-OpenWebUI-User-Name": "Ana Lima",
    "X-OpenWebUI-User-Id": "5f0c-user",
    "X-OpenWebUI-User-Email": "ana@example.org",
    "X-OpenWebUI-User-Role": "admin",
    "X-OpenWebUI-Chat-Id": "owui-chat-1",
    "X-OpenWebUI-Message-Id": "owui-message-1",
}


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
async def test_who_is_asking_stays_here_unless_the_proxy_is_told_to_send_it(
    vault: Path, openai_server: OpenAIStub, keep: bool
) -> None:
    """Open WebUI's ENABLE_FORWARD_USER_INFO_HEADERS names each user to the proxy; the model's
    provider gets none of it (with --keep-user-headers: the user's, never the chat's ids), on
    a chat turn and on a request that passes untouched; the chat id names the vault chat."""
    options = ProxyOptions(openai_server.base_url, chat_headers=("X-Conv",), keep_user_headers=keep)
    app = create_app(Sidecar(vault), options)
    async with live_server(app) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=openai_server.api_key)
        headers = {**OPEN_WEBUI_HEADERS, "X-Conv": "named-too", "X-Other": "kept"}
        del headers["X-OpenWebUI-Chat-Id"]
        await client.chat.completions.create(
            model="stub-chat",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={**OPEN_WEBUI_HEADERS, "X-Other": "kept"},
        )
        await client.models.list(extra_headers=headers)
        await app.state.proxy.settle()
        await client.close()
    assert chat_on_disk(vault, "owui-chat-1")["messages"][0]["content"] == "hi"
    user = {"x-openwebui-user-name", "x-openwebui-user-id"}
    user |= {"x-openwebui-user-email", "x-openwebui-user-role"}
    relayed = [
        seen
        for (path, _), seen in zip(openai_server.requests, openai_server.headers, strict=True)
        if path != "/v1/embeddings"  # the plugin's own requests
    ]
    assert len(relayed) == 2
    for seen in relayed:
        assert seen["x-other"] == "kept"
        assert "x-openwebui-chat-id" not in seen and "x-openwebui-message-id" not in seen
        assert "x-conv" not in seen
        assert (user <= set(seen)) if keep else not (user & set(seen))


async def test_a_chat_is_named_by_any_of_its_sources(running: Running) -> None:
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-OpenWebUI-Chat-Id": "0f9e-77", "X-Conv": "ignored"},
    )
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Conv": "lc-1"},
    )
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "hi"}],
        metadata={"chat_id": "meta-1"},
    )
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Smart-Context-Chat": "../../etc"},
    )
    await running_settle(running)
    names = {p.stem for p in (running.vault / ".memory").glob("*.json")} - {
        p.name.split(".")[0] + ".embeddings" for p in (running.vault / ".memory").glob("*")
    }
    hashed = names - {"0f9e-77", "lc-1", "meta-1"}
    assert len(names) == 4 and len(hashed) == 1 and hashed.pop().startswith("h-")
    assert not (running.vault.parent / "etc.json").exists()


async def test_open_webui_background_tasks_pass_through_and_are_never_stored(
    running: Running,
) -> None:
    raw = await running.client.chat.completions.with_raw_response.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "### Task:\nGenerate a concise, 3-5 word title..."}],
        stream=False,
        extra_headers={"X-OpenWebUI-Chat-Id": "owui-1"},
    )
    assert note_of(raw.headers).startswith("off; a background task")  # type: ignore[union-attr]
    assert not (running.vault / ".memory" / "owui-1.json").exists()


TITLE_TASK = (
    "### Task:\nGenerate a concise title summarizing the chat history.\n### Output:\n"
    'JSON format: { "title": "your concise title here" }\n<chat_history>...</chat_history>'
)


async def test_open_webui_names_the_vault_chat_unless_the_user_renamed_it(
    running: Running,
) -> None:
    """Open WebUI's title call (its 0.12 template) passes untouched; its answer names the
    vault chat, as it names Open WebUI's own."""
    owui = {"X-OpenWebUI-Chat-Id": "owui-2"}
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "Which crampons fit my winter boots?"}],
        extra_headers=owui,
    )
    await running_settle(running)
    stored = chat_on_disk(running.vault, "owui-2")
    assert stored["title"] == "Which crampons fit my winter boots?"  # from its first message
    for answer, title in [
        ('```json\n{ "title": "Crampons for Winter Boots" }\n```', "Crampons for Winter Boots"),
        ("no JSON at all", "Crampons for Winter Boots"),  # nothing to take: it stays
    ]:
        running.stub.chat_replies.append(answer)
        reply = await running.client.chat.completions.create(
            model="stub-chat",
            messages=[{"role": "user", "content": TITLE_TASK}],
            stream=False,
            extra_headers=owui,
        )
        assert reply.choices[0].message.content == answer  # untouched
        await running_settle(running)
        assert chat_on_disk(running.vault, "owui-2")["title"] == title
    # a chat the user renamed keeps its name; a chat the vault does not have is not made
    path = running.vault / ".memory" / "owui-2.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "title": "Mine"}))
    for chat in ("owui-2", "owui-unknown"):
        running.stub.chat_replies.append('{"title": "Something Else"}')
        await running.client.chat.completions.create(
            model="stub-chat",
            messages=[{"role": "user", "content": TITLE_TASK}],
            extra_headers={"X-OpenWebUI-Chat-Id": chat},
        )
    await running_settle(running)
    assert chat_on_disk(running.vault, "owui-2")["title"] == "Mine"
    assert not (running.vault / ".memory" / "owui-unknown.json").exists()


async def test_when_smart_context_fails_the_original_request_goes_and_says_so(
    running: Running,
) -> None:
    (running.vault / ".memory").mkdir(exist_ok=True)
    (running.vault / ".memory" / "broken.json").mkdir()  # the chat cannot be written
    messages = [SYSTEM, {"role": "user", "content": "still answered?"}]
    raw = await running.client.chat.completions.with_raw_response.create(
        model="stub-chat",
        messages=messages,
        extra_headers={"X-Smart-Context-Chat": "broken"},  # type: ignore[arg-type]
    )
    assert raw.parse().choices[0].message.content == "echo: still answered?"
    assert note_of(raw.headers).startswith("off; failed")  # type: ignore[union-attr]
    assert running.chat_bodies()[-1]["messages"] == messages


async def test_a_bubble_clicked_in_the_page_changes_the_next_proxied_request(
    running: Running, vault: Path
) -> None:
    history: list[dict[str, Any]] = []
    trip = ["Plan four days in Kyoto", "Kyoto temples at dawn?", "Kyoto trains and passes?"]
    bread = ["My sourdough starter smells of acetone", "How often do I feed the starter?"]
    for text in trip + bread:
        await turn(running, history, text)
    await running_settle(running)
    messages = chat_on_disk(vault, "trip")["messages"]
    kyoto = [m["id"] for m in messages if "Kyoto" in m["content"]]
    sourdough = [m["id"] for m in messages if "starter" in m["content"]]
    # the page is another process on the same vault: its own sidecar and plugin, the same files
    page = Sidecar(vault, plugin_manager=manager_with(SmartContextPlugin()))
    async with running_app(create_page_app(page)) as browser:
        await page.host.memory.update_chat(
            "trip",
            lambda d: {
                **d,
                "topics": [
                    {"label": "Kyoto Trip", "count": len(kyoto), "message_ids": kyoto},
                    {"label": "Sourdough", "count": len(sourdough), "message_ids": sourdough},
                ],
            },
        )
        clicked = await browser.post(
            "/api/commands/smart_context.set_filter",
            json={"chat_id": "trip", "topics": ["Sourdough"]},
        )
        assert clicked.json()["status"] == "success", clicked.text
    _, note = await turn(running, history, "Any more tips?")
    assert note is not None and note.endswith("filter: Sourdough")
    sent = [m["content"] for m in running.chat_bodies()[-1]["messages"]]
    assert "My sourdough starter smells of acetone" in sent
    assert not any("Kyoto" in text for text in sent)
    await running_settle(running)
    last = chat_on_disk(vault, "trip")["messages"][-1]
    assert last["smart_context"]["active_topics"] == ["Sourdough"]


async def test_a_body_that_is_not_json_passes_through(running: Running) -> None:
    async with httpx.AsyncClient() as raw:
        answer = await raw.post(
            f"{running.url}/v1/chat/completions",
            content=b"{not json",
            headers={
                "Authorization": f"Bearer {running.stub.api_key}",
                "X-Smart-Context-Chat": "c",
            },
        )
    assert note_of(answer.headers) == "off; the body is not a JSON object"
    assert answer.status_code >= 400  # the upstream's own answer to it


async def test_a_stream_passes_each_piece_on_as_it_arrives(vault: Path) -> None:
    gate = asyncio.Event()

    async def completions(request: Request) -> StreamingResponse:
        async def pieces() -> AsyncIterator[bytes]:
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "first"}}]}\n\n'
            await gate.wait()  # the rest only once the client has shown it got the first
            last = {"index": 0, "delta": {"content": " second"}, "finish_reason": "stop"}
            yield f"data: {json.dumps({'choices': [last]})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(pieces(), media_type="text/event-stream")

    upstream = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    async with live_server(upstream) as up:
        app = create_app(Sidecar(vault), ProxyOptions(f"{up}/v1"))
        async with live_server(app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
            stream = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                extra_headers={"X-Smart-Context-Chat": "s"},
            )
            chunks = stream.__aiter__()
            first = await asyncio.wait_for(chunks.__anext__(), timeout=10)
            assert first.choices[0].delta.content == "first" and not gate.is_set()
            gate.set()
            rest = [c.choices[0].delta.content async for c in chunks]
            await client.close()
            await app.state.proxy.settle()
    assert rest == [" second"]
    assert chat_on_disk(vault, "s")["messages"][-1]["content"] == "first second"


async def test_an_upstream_that_stays_silent_is_a_504_and_the_turn_says_so(
    vault: Path, openai_server: OpenAIStub
) -> None:
    openai_server.delay = 2.0
    app = create_app(Sidecar(vault), ProxyOptions(openai_server.base_url, timeout=0.5))
    async with live_server(app) as url:
        caught = await refusal(url, openai_server.api_key, "slow")
        await app.state.proxy.settle()
    assert caught.status_code == 504
    assert "did not answer in time" in caught.body["message"]  # type: ignore[index]
    assert "did not answer" in chat_on_disk(vault, "slow")["messages"][-1]["error"]


WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
LOOK_BACK = ("smart_context__retrieve_context", {"query": "Kyoto temples"})


@pytest.mark.parametrize("stream", [False, True])
async def test_our_tools_run_here_and_the_client_sees_only_the_answer(
    running: Running, stream: bool
) -> None:
    history: list[dict[str, Any]] = []
    await turn(running, history, "Kyoto temples at dawn are quiet", tools=WEATHER)
    running.stub.chat_replies += [
        tool_calls(LOOK_BACK, text="Let me look. "),
        "They are quiet at dawn.",
    ]
    messages = [*history, {"role": "user", "content": "What did I say about temples?"}]
    headers = {"X-Smart-Context-Chat": "trip"}
    if stream:
        chunks = await running.client.chat.completions.create(
            model="stub-chat",
            messages=messages,
            tools=WEATHER,
            stream=True,
            extra_headers=headers,  # type: ignore[arg-type]
        )
        got = [c.choices[0].delta async for c in chunks if c.choices]
        text = "".join(d.content or "" for d in got)
        assert not any(d.tool_calls for d in got)
    else:
        reply = await running.client.chat.completions.create(
            model="stub-chat",
            messages=messages,
            tools=WEATHER,
            extra_headers=headers,  # type: ignore[arg-type]
        )
        assert reply.choices[0].message.tool_calls is None
        assert reply.choices[0].finish_reason == "stop"
        text = reply.choices[0].message.content or ""
    assert text.endswith("They are quiet at dawn.")
    again = running.chat_bodies()[-1]["messages"]
    asked, answered = again[-2], again[-1]
    assert asked["tool_calls"][0]["function"]["name"] == LOOK_BACK[0]
    # the memory tool's real answer: the chat is short, so all of it is in the prompt already
    assert answered["role"] == "tool" and "already in your prompt" in answered["content"]
    assert answered["tool_call_id"] == asked["tool_calls"][0]["id"]
    await running_settle(running)
    assert chat_on_disk(running.vault, "trip")["messages"][-1]["content"] == text


async def test_a_turn_calling_ours_and_the_clients_gives_the_client_its_own_calls(
    running: Running,
) -> None:
    running.stub.chat_replies.append(tool_calls(LOOK_BACK, ("get_weather", {"city": "Kyoto"})))
    chunks = await running.client.chat.completions.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "Weather for my trip?"}],
        tools=WEATHER,  # type: ignore[arg-type]
        stream=True,
        extra_headers={"X-Smart-Context-Chat": "mixed"},
    )
    calls = (
        [t for c in chunks async for t in (c.choices[0].delta.tool_calls or []) if c.choices]
        if False
        else []
    )
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.tool_calls:
            calls += chunk.choices[0].delta.tool_calls
    assert {c.index for c in calls} == {0}
    assert [c.function.name for c in calls if c.function and c.function.name] == ["get_weather"]
    assert len(running.chat_bodies()) == 1  # ours did not run: the model asks again later


async def test_a_client_tool_round_is_stored_whole_with_each_record_in_place(
    running: Running,
) -> None:
    headers = {"X-Smart-Context-Chat": "rain"}
    asked = [{"role": "user", "content": "Weather in Kyoto?"}]
    running.stub.chat_replies += [tool_calls(("get_weather", {"city": "Kyoto"})), "It rains."]
    first = await running.client.chat.completions.create(
        model="stub-chat",
        messages=asked,
        tools=WEATHER,
        extra_headers=headers,  # type: ignore[arg-type]
    )
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    conversation = [
        *asked,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Rain, 12 C"},
    ]
    second = await running.client.chat.completions.create(
        model="stub-chat",
        messages=conversation,
        tools=WEATHER,
        extra_headers=headers,  # type: ignore[arg-type]
    )
    conversation += [
        {"role": "assistant", "content": second.choices[0].message.content},
        {"role": "user", "content": "Thanks"},
    ]
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=conversation,
        tools=WEATHER,
        extra_headers=headers,  # type: ignore[arg-type]
    )
    await running_settle(running)
    stored = chat_on_disk(running.vault, "rain")["messages"]
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Weather in Kyoto?"),
        ("assistant", ""),
        ("tool", "Rain, 12 C"),
        ("assistant", "It rains."),
        ("user", "Thanks"),
        ("assistant", "echo: Thanks"),
    ]
    assert stored[1]["wire"]["tool_calls"][0]["id"] == call.id  # the call, as the client holds it
    assert all("smart_context" in m for m in stored if m["role"] == "assistant")
    assert "smart_context" not in stored[2]


async def test_the_next_turn_finds_the_reply_even_while_the_upstream_holds_the_stream(
    vault: Path,
) -> None:
    release = asyncio.Event()

    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        said = body["messages"][-1]["content"]

        async def pieces() -> AsyncIterator[bytes]:
            chunk = {
                "choices": [
                    {"index": 0, "delta": {"content": f"echo {said}"}, "finish_reason": "stop"}
                ]
            }
            yield f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
            await release.wait()  # the connection stays open after [DONE]

        return StreamingResponse(pieces(), media_type="text/event-stream")

    upstream = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    async with live_server(upstream) as up:
        app = create_app(Sidecar(vault), ProxyOptions(f"{up}/v1"))
        async with live_server(app) as url, httpx.AsyncClient(timeout=30) as client:
            history: list[dict[str, Any]] = []
            for said in ("one", "two"):
                history.append({"role": "user", "content": said})
                body = {"model": "m", "stream": True, "messages": history}
                headers = {"X-Smart-Context-Chat": "held"}
                async with client.stream(
                    "POST", f"{url}/v1/chat/completions", json=body, headers=headers
                ) as answer:
                    async for line in answer.aiter_lines():
                        if line == "data: [DONE]":
                            break  # and the client leaves, as soon as the reply is whole
                history.append({"role": "assistant", "content": f"echo {said}"})
            release.set()
            await app.state.proxy.settle()
    stored = chat_on_disk(vault, "held")["messages"]
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "one"),
        ("assistant", "echo one"),
        ("user", "two"),
        ("assistant", "echo two"),
    ]
    assert not any("error" in m for m in stored)


async def test_a_body_nested_past_pythons_limit_passes_through(running: Running) -> None:
    deep = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    async with httpx.AsyncClient() as raw:
        answer = await raw.post(
            f"{running.url}/v1/chat/completions",
            content=deep,
            headers={
                "Authorization": f"Bearer {running.stub.api_key}",
                "X-Smart-Context-Chat": "c",
            },
        )
    assert note_of(answer.headers) == "off; the body is not a JSON object"
    assert answer.status_code >= 400  # the upstream's own answer to it, not a crash of ours


async def test_a_body_nested_near_pythons_limit_never_fails(running: Running) -> None:
    """Nested just shallow enough to be read and too deep to be written again: the request
    goes as it came, and the chat's next turn does not wait for one that never ends."""
    user = b'{"role": "user", "content": "hi"}'
    async with httpx.AsyncClient() as raw:
        for depth in range(900, 990):
            nested = b"[" * depth + b"]" * depth
            answer = await raw.post(
                f"{running.url}/v1/chat/completions",
                content=b'{"model": "stub-chat", "messages": ['
                + user
                + b'], "x": '
                + nested
                + b"}",
                headers={
                    "Authorization": f"Bearer {running.stub.api_key}",
                    "X-Smart-Context-Chat": "deep",
                },
                timeout=5,
            )
            # the stub upstream's own parser gives up at some depths: a 502 that says so
            assert answer.status_code in (200, 502), (depth, answer.text)
            assert note_of(answer.headers) is not None
    assert any(body.get("x") is not None for _, body in running.stub.requests)


async def test_a_body_over_the_limit_is_a_413_that_says_so(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    import smart_context_hosts.proxy.app as proxy_app

    monkeypatch.setattr(proxy_app, "MAX_BODY_BYTES", 1_000)
    async with httpx.AsyncClient() as raw:
        answer = await raw.post(
            f"{running.url}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x" * 2_000}]},
            headers={"X-Smart-Context-Chat": "big"},
        )
    assert answer.status_code == 413 and "over 1000 bytes" in answer.json()["error"]["message"]
    assert running.chat_bodies() == []  # nothing went upstream


async def test_a_request_without_a_user_message_passes_and_says_why(running: Running) -> None:
    messages = [SYSTEM]
    raw = await running.client.chat.completions.with_raw_response.create(
        model="stub-chat",
        messages=messages,
        extra_headers={"X-Smart-Context-Chat": "sys"},  # type: ignore[arg-type]
    )
    assert note_of(raw.headers) == "off; no user message with text"
    assert running.chat_bodies()[-1]["messages"] == messages


async def test_two_turns_of_one_chat_at_once_leave_one_conversation(running: Running) -> None:
    """Open WebUI's multi-model chat sends one history to two models at once: the turns are
    taken one after the other, and the chat ends as the client's conversation, no message
    twice."""
    asked = [SYSTEM, {"role": "user", "content": "Plan four days in Kyoto"}]
    running.stub.chat_replies += ["first model", "second model"]
    headers = {"X-Smart-Context-Chat": "twin"}
    replies = await asyncio.gather(
        *(
            running.client.chat.completions.create(
                model="stub-chat",
                messages=asked,
                extra_headers=headers,  # type: ignore[arg-type]
            )
            for _ in range(2)
        )
    )
    await running_settle(running)
    stored = chat_on_disk(running.vault, "twin")["messages"]
    assert {r.choices[0].message.content for r in replies} == {"first model", "second model"}
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["content"] == "Plan four days in Kyoto"
    assert stored[1]["content"] in {"first model", "second model"} and "smart_context" in stored[1]


def relay_of(run: Running) -> Relay:
    vaults = run.proxy.vaults
    assert isinstance(vaults, OneVault)
    return vaults.vault.relay


async def test_the_proxy_keeps_a_chats_last_turn_with_each_replys_figures_only(
    running: Running,
) -> None:
    """What the proxy holds of a chat between turns (its last turn, to answer the next one
    from) keeps each reply's figures but not what its record names the chat's messages with,
    kilobytes a reply that the chat file keeps."""
    history: list[dict[str, Any]] = [SYSTEM]
    for text in ("Plan four days in Kyoto", "Which temples first?"):
        await turn(running, history, text)
        await running_settle(running)
    held = [m for m in relay_of(running)._memos["trip"].stored if m["role"] == "assistant"]
    on_disk = [
        m for m in chat_on_disk(running.vault, "trip")["messages"] if m["role"] == "assistant"
    ]
    assert len(held) == len(on_disk) == 2
    assert all("relevant_ids" in m["smart_context"] for m in on_disk)
    assert all(set(m["smart_context"]) <= set(HELD) for m in held)
    assert [m["smart_context"]["usage"] for m in held] == [
        m["smart_context"]["usage"] for m in on_disk
    ]


async def test_a_chat_changed_meanwhile_takes_the_clients_conversation_with_the_ids_given(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that continues the client's last one is answered from what the proxy holds, and
    its messages are written on the side; when someone else changed the chat meanwhile, the
    client's conversation is merged in the long way, with the ids the plugins were given."""
    relay = relay_of(running)
    turns: list[Turn] = []
    prepare = relay.prepare

    async def recorded(*args: Any) -> Turn:
        turns.append(await prepare(*args))
        return turns[-1]

    monkeypatch.setattr(relay, "prepare", recorded)
    history: list[dict[str, Any]] = [SYSTEM]
    await turn(running, history, "Plan four days in Kyoto")
    await running_settle(running)
    page = {"id": "from-page", "role": "user", "content": "a message sent from the page"}
    await running.sidecar.host.memory.append_message("trip", page)
    await turn(running, history, "Which temples first?")
    await running_settle(running)
    stored = chat_on_disk(running.vault, "trip")["messages"]
    assert [(m["role"], m["content"]) for m in stored] == [
        (m["role"], m["content"]) for m in history[1:]
    ]
    assert stored[2]["id"] == turns[-1].user_message["id"]
    assert "smart_context" in stored[3]
    await turn(running, history, "And where to eat?")  # the quick way again
    await running_settle(running)
    stored = chat_on_disk(running.vault, "trip")["messages"]
    assert [m["content"] for m in stored][-2:] == [m["content"] for m in history[-2:]]
    assert stored[4]["id"] == turns[-1].user_message["id"]
    assert len({m["id"] for m in stored}) == len(stored) == 6


async def test_messages_that_could_not_be_written_are_written_the_long_way_or_next_turn(
    running: Running, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    history: list[dict[str, Any]] = [SYSTEM]
    await turn(running, history, "Plan four days in Kyoto")
    await running_settle(running)
    memory = running.sidecar.host.memory
    failures: dict[str, list[Exception]] = {"append_messages": [], "update_chat": []}

    def failing(name: str) -> None:
        real = getattr(memory, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if failures[name]:
                raise failures[name].pop()
            return await real(*args, **kwargs)

        monkeypatch.setattr(memory, name, call)

    failing("append_messages")
    failing("update_chat")
    # the append fails once: the turn is written the long way, its reply with its record
    failures["append_messages"].append(OSError("disk full"))
    reply, note = await turn(running, history, "Which temples first?")
    assert reply == "echo: Which temples first?" and note is not None and note.startswith("sent")
    await running_settle(running)
    assert "were not appended" in caplog.text
    stored = chat_on_disk(running.vault, "trip")["messages"]
    assert [m["content"] for m in stored][-2:] == [m["content"] for m in history[-2:]]
    assert "smart_context" in stored[-1]
    await turn(running, history, "And where to eat?")  # the long way: the chat was merged
    await running_settle(running)
    # the long way fails too: the client still has its reply, and the next turn stores it
    failures["append_messages"].append(OSError("disk full"))
    failures["update_chat"].append(OSError("disk still full"))
    reply, note = await turn(running, history, "Is a rail pass worth it?")
    assert note is not None and note.startswith("sent")
    await running_settle(running)
    assert "the reply could not be stored" in caplog.text
    assert len(chat_on_disk(running.vault, "trip")["messages"]) == 6
    await turn(running, history, "Thanks!")
    await running_settle(running)
    stored = chat_on_disk(running.vault, "trip")["messages"]
    assert [(m["role"], m["content"]) for m in stored] == [
        (m["role"], m["content"]) for m in history[1:]
    ]


async def test_a_chats_next_body_is_read_from_where_its_last_turn_ended(running: Running) -> None:
    """Only a chat turn's body is kept for the next: Open WebUI's title task, sent between two
    turns with the chat's id, is not."""
    relay = relay_of(running)
    history: list[dict[str, Any]] = [SYSTEM]
    await turn(running, history, "Plan four days in Kyoto", chat="owui-2")
    known = relay.bodies.get("owui-2")
    assert known is not None and known.messages[-1]["content"] == "Plan four days in Kyoto"
    await running.client.chat.completions.create(
        model="stub-chat",
        messages=[{"role": "user", "content": "### Task:\nGenerate a concise title..."}],
        extra_headers={"X-Smart-Context-Chat": "owui-2"},
    )
    assert relay.bodies.get("owui-2") is known
    await turn(running, history, "Which temples first?", chat="owui-2")
    later = relay.bodies.get("owui-2")
    assert later is not None and later.prefix.startswith(known.prefix)
    assert later.messages[1] is known.messages[1]  # read on from there, not parsed again
    assert running.chat_bodies()[-1]["messages"][-1]["content"] == "Which temples first?"
