"""The cache-stable layout through the real proxy (docs/contract.md §9, "The layout"): a stateless
client (the real ``openai`` client) resends a long conversation for 30 turns, model ``gpt-5``,
and what the upstream receives starts with the previous request outside cuts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from smart_context.plugin import SmartContextPlugin
from smart_context.services import Services
from smart_context_hosts.proxy.app import Proxy, ProxyOptions, create_app, note_of
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.context.test_budgeted import long_chat
from tests.context.test_layout import Clock
from tests.layout_checks import cuts_of, longer
from tests.openai_server import OpenAIStub
from tests.proxy.test_proxy import stub_vault
from tests.sidecar.conftest import chat_on_disk, live_server

TURNS = 30
SYSTEM = {"role": "system", "content": "You are terse. Never use emoji."}
# a budget the chat's history does not fit whole (it is cut and recalled from); the replayed
# turns are longer than the chat's (tests/layout_checks.longer), so 30 turns pass the high mark
# once more
PLUGIN_TABLE = (
    "[plugins.smart_context]\n"
    'embedder = "host"\ntopic_extractor = "offline"\nsummarizer = "offline"\n'
    "budget_tokens = 2000\n"
)


@dataclass
class Running:
    client: openai.AsyncOpenAI
    sidecar: Sidecar
    stub: OpenAIStub
    proxy: Proxy

    def chat_bodies(self) -> list[dict[str, Any]]:
        """What the upstream received at /v1/chat/completions, in order."""
        return [body for path, body in self.stub.requests if path == "/v1/chat/completions"]

    async def settle(self) -> None:
        await self.proxy.settle()
        await services_of(self.sidecar).settle(timeout=30)


@pytest.fixture
def vault(tmp_path: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stub_vault(tmp_path / "vault", openai_server, monkeypatch, PLUGIN_TABLE)


@pytest.fixture
async def running(vault: Path, openai_server: OpenAIStub) -> AsyncIterator[Running]:
    sidecar = Sidecar(vault)
    app = create_app(sidecar, ProxyOptions(openai_server.base_url))
    async with live_server(app) as url:
        client = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key=openai_server.api_key, max_retries=0
        )
        yield Running(client, sidecar, openai_server, app.state.proxy)
        await app.state.proxy.settle()
        await client.close()


def plain(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message["role"], "content": message["content"]}


def services_of(sidecar: Sidecar) -> Services:
    """The running plugin's services (its clock, its background work)."""
    plugin = sidecar.pm.get_plugin("smart_context")
    assert isinstance(plugin, SmartContextPlugin) and plugin.services is not None
    return plugin.services


async def test_thirty_proxied_turns_start_with_the_previous_request_outside_cuts(
    running: Running, vault: Path
) -> None:
    chat = [plain(m) for m in longer(long_chat(400), TURNS)]
    start = len(chat) - 2 * TURNS
    conversation = [SYSTEM, *chat[:start]]  # the client's copy, resent whole each turn
    clock = Clock()
    services_of(running.sidecar).clock = clock
    for k in range(TURNS):
        asked, answer = chat[start + 2 * k], chat[start + 2 * k + 1]
        running.stub.chat_replies.append(answer["content"])
        clock.now += 30
        raw = await running.client.chat.completions.with_raw_response.create(
            model="gpt-5",
            messages=[*conversation, asked],  # type: ignore[list-item]
            extra_headers={"X-Smart-Context-Chat": "long"},
        )
        note = note_of(raw.headers)
        assert note is not None and note.startswith("sent "), note
        assert raw.parse().choices[0].message.content == answer["content"]
        conversation += [asked, answer]
    await running.settle()

    requests = [body["messages"] for body in running.chat_bodies()]
    assert len(requests) == TURNS
    replies = [m for m in chat_on_disk(vault, "long")["messages"] if m["role"] == "assistant"]
    records = [m["smart_context"] for m in replies[-TURNS:]]
    cuts = cuts_of(requests, records)
    # the cut stretch is said by its stored summaries, in the stable system message
    cut = records[cuts.index("over the budget")]
    assert cut["budget"]["by_section"]["summaries"] > 0 and cut["summaries"]
    # the history does not fit whole: it was cut, and older messages were recalled
    assert any(r["layout"]["start_id"] is not None for r in records)
    assert any(r["layout"]["recalled_ids"] for r in records)
    assert any(m[-1]["content"].startswith("<context>\n") for m in requests)
    for request, asked in zip(requests, chat[start::2], strict=True):
        assert request[0] == SYSTEM  # the client's system prompt first and unchanged
        assert request[-1]["role"] == "user" and request[-1]["content"].endswith(asked["content"])
    keys = {body.get("prompt_cache_key") for body in running.chat_bodies()}
    assert len(keys) == 1 and None not in keys  # one chat, one cache route at OpenAI
    # the stored chat holds the user's messages as the client sent them
    stored = [m for m in chat_on_disk(vault, "long")["messages"] if m["role"] == "user"]
    assert [m["content"] for m in stored] == [m["content"] for m in chat if m["role"] == "user"]
    assert not any("<context>" in m["content"] for m in stored)
