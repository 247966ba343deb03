"""The Open WebUI filter (smart_context_hosts/open_webui_filter.py) against a real ``serve`` on
loopback: its inlet rebuilds a chat's messages, its outlet stores the reply with its record,
and nothing of ours ever costs the chat its request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smart_context_hosts.open_webui_filter import Filter
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub
from tests.proxy.test_proxy import SYSTEM
from tests.sidecar.conftest import chat_on_disk, live_server, llm_table, write_settings

CHAT = "3f2b9c1e-5d6a-4e8f-9a0b-1c2d3e4f5a6b"  # an Open WebUI chat id


def settings(vault: Path, stub: OpenAIStub) -> None:
    write_settings(
        vault,
        '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
        + llm_table(stub.base_url, "STUB_KEY", embedding="stub-embedding"),
    )


class Statuses(list[str]):
    async def __call__(self, event: dict[str, Any]) -> None:
        assert event["type"] == "status"
        self.append(event["data"]["description"])


async def test_the_filter_rebuilds_a_turn_and_stores_its_reply(
    tmp_path: Path, openai_server: OpenAIStub, monkeypatch: Any
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    settings(tmp_path, openai_server)
    sidecar = Sidecar(tmp_path)
    async with live_server(create_app(sidecar)) as url:
        webui = Filter()
        webui.valves.url = url
        assert not hasattr(webui, "toggle")  # no per-chat switch: on every chat
        history: list[dict[str, Any]] = [SYSTEM]
        for text in ("Plan four days in Kyoto", "Which temples first?"):
            history.append({"role": "user", "content": text})
            statuses = Statuses()
            body = await webui.inlet(
                {"model": "llama3.2", "messages": list(history), "stream": True},
                __metadata__={"chat_id": CHAT, "message_id": "m1"},
                __event_emitter__=statuses,
            )
            assert body["messages"][0] == SYSTEM and body["messages"][-1] == history[-1]
            assert statuses and statuses[0].startswith("Smart Context: sent ")
            history.append({"role": "assistant", "content": f"About {text}: ..."})
            await webui.outlet(
                {"model": "llama3.2", "messages": list(history), "chat_id": CHAT},
                __metadata__={"chat_id": CHAT},
            )
        task = await webui.inlet(
            {"messages": [{"role": "user", "content": "### Task:\nSuggest a title"}]},
            __metadata__={"chat_id": CHAT, "task": "title_generation"},
        )
        assert task["messages"] == [{"role": "user", "content": "### Task:\nSuggest a title"}]
        await sidecar.pm.get_plugin("smart_context").services.settle(timeout=30)
    stored = chat_on_disk(tmp_path, CHAT)["messages"]
    assert [m["content"] for m in stored] == [m["content"] for m in history[1:]]
    replies = [m for m in stored if m["role"] == "assistant"]
    assert all(m["smart_context"]["usage"]["sent_tokens"] > 0 for m in replies)
    assert all(m["model"] == "llama3.2" for m in replies)


async def test_without_smart_context_the_messages_go_as_they_were() -> None:
    webui = Filter()
    webui.valves.url = "http://127.0.0.1:9"  # nothing listens
    webui.valves.timeout = 2
    statuses = Statuses()
    messages = [SYSTEM, {"role": "user", "content": "hello"}]
    body = await webui.inlet(
        {"messages": list(messages)}, __metadata__={"chat_id": CHAT}, __event_emitter__=statuses
    )
    assert body["messages"] == messages
    assert statuses[0].startswith("Smart Context is off for this message")
    reply = {"messages": [*messages, {"role": "assistant", "content": "hi"}]}
    assert await webui.outlet(dict(reply), __metadata__={"chat_id": CHAT}) == reply
    webui.valves.url = "file:///etc/passwd"
    assert (await webui.inlet({"messages": list(messages)}, __metadata__={"chat_id": CHAT}))[
        "messages"
    ] == messages


async def test_a_reply_without_its_turn_is_refused_plainly(
    tmp_path: Path, openai_server: OpenAIStub, monkeypatch: Any
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    settings(tmp_path, openai_server)
    import httpx

    async with live_server(create_app(Sidecar(tmp_path))) as url, httpx.AsyncClient() as client:
        orphan = await client.post(f"{url}/api/turns/reply", json={"chat_id": "c", "content": "x"})
        bad = await client.post(f"{url}/api/turns", json={"chat_id": "c", "messages": "no"})
        not_json = await client.post(f"{url}/api/turns", content=b"{")
        no_chat = await client.post(f"{url}/api/turns", json={"messages": []})
        too_long = await client.post(
            f"{url}/api/turns/reply", json={"chat_id": "c", "content": "x" * 1_000_001}
        )
        hostile = await client.post(
            f"{url}/api/turns",
            json={"chat_id": "../../etc", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert orphan.status_code == 404 and "no turn waiting" in orphan.json()["error"]
    assert bad.status_code == 400 and not_json.status_code == 400
    assert no_chat.status_code == 400 and "chat_id is required" in no_chat.json()["error"]
    assert too_long.status_code == 400 and "at most" in too_long.json()["error"]
    assert hostile.json()["rebuilt"] is True
    assert not (tmp_path / "etc.json").exists() and not (tmp_path.parent / "etc.json").exists()


async def test_a_reply_that_cannot_be_stored_is_refused_with_why(
    tmp_path: Path, openai_server: OpenAIStub, monkeypatch: Any
) -> None:
    """The turn's messages could not be written, either way: the reply is refused with a
    message that says so, never a bare server error, and the next turn stores them."""
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    settings(tmp_path, openai_server)
    import httpx

    sidecar = Sidecar(tmp_path)
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "Plan four days in Kyoto"}]
    async with live_server(create_app(sidecar)) as url, httpx.AsyncClient() as client:

        async def one_turn(text: str) -> httpx.Response:
            started = await client.post(
                f"{url}/api/turns", json={"chat_id": CHAT, "messages": conversation}
            )
            assert started.json()["rebuilt"] is True
            conversation.append({"role": "assistant", "content": text})
            return await client.post(
                f"{url}/api/turns/reply", json={"chat_id": CHAT, "content": text}
            )

        assert (await one_turn("Day one: Higashiyama.")).status_code == 200
        memory = sidecar.host.memory
        working = memory.append_messages, memory.update_chat

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise OSError("disk full")

        monkeypatch.setattr(memory, "append_messages", broken)
        monkeypatch.setattr(memory, "update_chat", broken)
        conversation.append({"role": "user", "content": "Which temples first?"})
        refused = await one_turn("Kiyomizu-dera, early.")
        assert refused.status_code == 500
        assert refused.json()["error"] == "The reply could not be stored: OSError: disk full"
        monkeypatch.setattr(memory, "append_messages", working[0])
        monkeypatch.setattr(memory, "update_chat", working[1])
        conversation.append({"role": "user", "content": "Thanks!"})
        assert (await one_turn("You're welcome.")).status_code == 200
        await sidecar.pm.get_plugin("smart_context").services.settle(timeout=30)
    stored = chat_on_disk(tmp_path, CHAT)["messages"]
    assert [m["content"] for m in stored] == [m["content"] for m in conversation]
