"""The sidecar served by uvicorn on loopback: streamed replies and the event stream, end to end."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import (
    Recorder,
    chat_on_disk,
    live_server,
    llm_table,
    manager_with,
    read_events,
    write_settings,
)

STREAM = {"Accept": "text/event-stream"}


async def post_streamed(client: httpx.AsyncClient, url: str, content: str) -> list[tuple[str, Any]]:
    async with client.stream("POST", url, json={"content": content}, headers=STREAM) as response:
        assert response.status_code == 200
        return [event async for event in read_events(response)]


def serve_vault(vault: Path, keepalive: float = 15.0) -> tuple[Sidecar, Any]:
    sidecar = Sidecar(vault, plugin_manager=manager_with(Recorder()))
    return sidecar, create_app(sidecar, keepalive_seconds=keepalive)


async def test_reply_streams_as_tokens_and_is_stored(
    vault: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    write_settings(vault, llm_table(openai_server.base_url, "STUB_KEY", fast="stub-chat"))
    reply = "Context windows are finite, so choose what goes in them with care."
    openai_server.chat_replies.append(reply)
    _, app = serve_vault(vault)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        events = await post_streamed(client, "/api/chats/live1/messages", "Why filter context?")
        page = await client.get("/")
    names = [name for name, _ in events]
    assert names.count("token") > 5 and names[-1] == "done" and "error" not in names
    assert "".join(data["text"] for name, data in events if name == "token") == reply
    done = events[-1][1]
    stored = chat_on_disk(vault, "live1")["messages"]
    shown = [done["user_message"], done["assistant_message"]]
    html = [m.pop("content_html") for m in shown]
    assert html == ["<p>Why filter context?</p>\n", f"<p>{reply}</p>\n"]
    assert stored == shown  # the file holds the text; its HTML is only ever served
    assert stored[1]["content"] == reply and stored[1]["model"] == "stub-chat"
    assert '"model_configured": true' in page.text and '"model_name": "stub-chat"' in page.text


async def test_endpoint_down_gives_an_error_event_and_keeps_the_message(vault: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    write_settings(vault, llm_table(dead, chat="any-model"))
    _, app = serve_vault(vault)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        events = await post_streamed(client, "/api/chats/live2/messages", "Anyone there?")
        as_json = await client.post("/api/chats/live2/messages", json={"content": "Hello?"})
    [(name, data)] = events
    assert name == "error" and "Cannot reach" in data["error"]
    assert as_json.status_code == 502 and as_json.json()["status"] == "error"
    stored = chat_on_disk(vault, "live2")["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[0]["content"] == "Anyone there?" and "Cannot reach" in stored[1]["error"]


async def test_emit_reaches_event_stream_clients_with_keepalives(vault: Path) -> None:
    sidecar, app = serve_vault(vault, keepalive=0.2)
    async with (
        live_server(app) as url,
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/api/events") as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
        assert (await anext(events)) == (":", "connected")
        sidecar.host.emit("smart_context.filter_changed", {"chat_id": "c1", "included_ids": ["a"]})
        assert await anext(events) == (
            "smart_context.filter_changed",
            {"chat_id": "c1", "included_ids": ["a"]},
        )
        assert await anext(events) == (":", "keep-alive")
    await asyncio.sleep(0)
    assert sidecar.host.events.client_count == 0


async def test_a_client_that_leaves_mid_reply_does_not_lose_it(
    vault: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    write_settings(vault, llm_table(openai_server.base_url, "STUB_KEY", chat="stub-chat"))
    openai_server.delay = 0.5
    _, app = serve_vault(vault)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(
                "/api/chats/live3/messages",
                json={"content": "slow one"},
                headers=STREAM,
                timeout=0.2,
            )
        for _ in range(100):
            messages = chat_on_disk(vault, "live3")["messages"]
            if len(messages) == 2:
                break
            await asyncio.sleep(0.05)
    assert [m["content"] for m in messages] == ["slow one", "echo: slow one"]


async def test_event_streams_end_cleanly_when_the_server_stops(vault: Path) -> None:
    sidecar, app = serve_vault(vault)
    async with (
        live_server(app) as url,
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/api/events") as response,
    ):
        events = read_events(response)
        assert await anext(events) == (":", "connected")
        sidecar.host.events.close()  # what `serve` does as soon as Ctrl+C arrives
        async with asyncio.timeout(5):
            rest = [event async for event in events]
    assert rest == []
