"""The upstream's prompt cache through the proxy: the real ``openai`` client, the proxy on
loopback and a scripted upstream that reports cached tokens. What the upstream says it cached
reaches each stored reply's record and ``smart-context stats``; the ``X-Smart-Context`` header
is the request's estimate; OpenAI gets a ``prompt_cache_key`` naming the chat, never the
client's own replaced."""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from smart_context_hosts.cli_reports import show_stats
from smart_context_hosts.proxy.app import ProxyOptions, create_app, note_of
from smart_context_hosts.proxy.cache_key import prompt_cache_key, takes_cache_key
from smart_context_hosts.proxy.note import summary
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub
from tests.proxy.test_proxy import PLUGIN_TABLE, SYSTEM, Running
from tests.sidecar.conftest import chat_on_disk, live_server, llm_table, write_settings

# the stub counts a word a token: its prompts are some 20 tokens long
CACHED = {"prompt_tokens_details": {"cached_tokens": 8, "audio_tokens": 0}}


@pytest.fixture
async def proxied(
    tmp_path: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    vault = tmp_path / "vault"
    vault.mkdir()
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    table = llm_table(openai_server.base_url, "STUB_KEY", embedding="stub-embedding")
    write_settings(vault, PLUGIN_TABLE + table)
    sidecar = Sidecar(vault)
    app = create_app(sidecar, ProxyOptions(openai_server.base_url))
    async with live_server(app) as url:
        client = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key=openai_server.api_key, max_retries=0
        )
        yield Running(client, url, sidecar, openai_server, vault, app.state.proxy)
        await app.state.proxy.settle()
        await client.close()


async def ask(
    run: Running, chat: str, text: str, model: str = "stub-chat", **extra: Any
) -> str | None:
    """One turn of ``chat``, streamed or not (``extra``); our header."""
    raw = await run.client.chat.completions.with_raw_response.create(
        model=model,
        messages=[SYSTEM, {"role": "user", "content": text}],
        extra_headers={"X-Smart-Context-Chat": chat},
        **extra,
    )
    answer = raw.parse()
    if extra.get("stream"):
        _ = [chunk async for chunk in answer]  # type: ignore[union-attr]
    return note_of(raw.headers)


def replies(vault: Path, chat: str) -> list[dict[str, Any]]:
    return [m for m in chat_on_disk(vault, chat)["messages"] if m["role"] == "assistant"]


async def test_the_cached_tokens_the_upstream_reports_reach_each_stored_reply(
    proxied: Running,
) -> None:
    proxied.stub.usage_extra = CACHED
    note = await ask(proxied, "kyoto", "Plan four days in Kyoto", model="gpt-4o")
    proxied.stub.usage_extra = {"cache_read_input_tokens": 6, "cache_creation_input_tokens": 2}
    await ask(
        proxied, "nara", "A day in Nara?", stream=True, stream_options={"include_usage": True}
    )
    await proxied.settle()
    (first,) = replies(proxied.vault, "kyoto")
    assert first["usage"]["cached_tokens"] == 8
    usage = first["smart_context"]["usage"]
    assert usage["reported_cached_tokens"] == 8 and "reported_cache_write_tokens" not in usage
    # the header was written before the reply: the record as it was then gives it again
    before = {k: v for k, v in usage.items() if not k.startswith(("reported_", "chars_"))}
    assert note == summary(first["smart_context"] | {"usage": before})
    assert note is not None and "; cached ~0 (est.); bill " in note  # OpenAI's: a first request
    (streamed,) = replies(proxied.vault, "nara")
    usage = streamed["smart_context"]["usage"]
    assert (usage["reported_cached_tokens"], usage["reported_cache_write_tokens"]) == (6, 2)
    out, err = io.StringIO(), io.StringIO()
    assert show_stats(proxied.vault, True, out, err) == 0
    total = json.loads(out.getvalue())["total"]
    assert (total["cached_tokens"], total["cached_reported_replies"]) == (8 + 6, 2)
    assert total["billed"] > 0 and total["plain_billed"] > 0


async def test_a_reply_whose_usage_is_garbage_is_stored_without_cache_figures(
    proxied: Running,
) -> None:
    proxied.stub.usage_extra = {"prompt_tokens_details": [1024], "prompt_cache_hit_tokens": -1}
    await ask(proxied, "odd", "Hello?")
    await proxied.settle()
    (reply,) = replies(proxied.vault, "odd")
    assert reply["content"] == "echo: Hello?"
    assert "cached_tokens" not in reply["usage"]
    assert not any(k.startswith("reported_cache") for k in reply["smart_context"]["usage"])


async def test_openai_gets_a_key_naming_the_chat_and_a_clients_own_key_stays(
    proxied: Running,
) -> None:
    await ask(proxied, "kyoto", "Plan four days in Kyoto", model="gpt-4o")
    await ask(proxied, "kyoto", "Plan four days in Kyoto, in April", model="gpt-4o")
    await ask(proxied, "osaka", "And Osaka?", model="gpt-4o")
    await ask(proxied, "own", "Mine", model="gpt-4o", extra_body={"prompt_cache_key": "mine"})
    await ask(proxied, "local", "A local model", model="stub-chat")
    keys = [body.get("prompt_cache_key") for body in proxied.chat_bodies()]
    assert keys[0] == keys[1] == prompt_cache_key(proxied.vault, "kyoto")
    assert re.fullmatch(r"[0-9a-f]{16}", keys[0] or "") and "kyoto" not in (keys[0] or "")
    assert keys[2] not in (None, keys[0])
    assert keys[3:] == ["mine", None]  # the client's own; a model that is not OpenAI's: none


def test_openai_by_its_address_or_its_models_takes_a_key() -> None:
    assert takes_cache_key("https://api.openai.com/v1", "anything")
    assert takes_cache_key("http://127.0.0.1:11434/v1", "openai/gpt-4.1-mini")
    assert not takes_cache_key("http://127.0.0.1:11434/v1", "llama3.2:3b")
    assert not takes_cache_key("https://api.anthropic.com/v1", "claude-sonnet-4")
    assert not takes_cache_key("http://[::1", None)  # not a URL: no key, no crash
    assert prompt_cache_key(Path("/a"), "c") != prompt_cache_key(Path("/b"), "c")
