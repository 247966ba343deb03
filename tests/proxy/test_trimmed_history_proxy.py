"""Through the real proxy and the real ``openai`` client: a client that sends only its last ten
messages (or a summary of what it dropped and its last four) keeps the whole conversation in
the vault chat, and the upstream gets what the client dropped back (the plugins choose from the
stored chat)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from smart_context_hosts.proxy.app import Proxy, ProxyOptions, create_app
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import chat_on_disk, live_server, llm_table, write_settings

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
FACT = "My locker code at the climbing gym is 4417."
TURNS = 12


@pytest.fixture
def vault(tmp_path: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    table = '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
    write_settings(
        folder, table + llm_table(openai_server.base_url, "STUB_KEY", embedding="stub-embedding")
    )
    return folder


@pytest.fixture
async def running(
    vault: Path, openai_server: OpenAIStub
) -> AsyncIterator[tuple[openai.AsyncOpenAI, Proxy]]:
    sidecar = Sidecar(vault)
    app = create_app(sidecar, ProxyOptions(openai_server.base_url))
    async with live_server(app) as url:
        client = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key=openai_server.api_key, max_retries=0
        )
        yield client, app.state.proxy
        await app.state.proxy.settle()
        await client.close()


def window(conversation: list[dict[str, str]], shape: str) -> list[dict[str, str]]:
    """What the client sends: its system prompt and its last ten messages; or a summary of the
    rest as a message and its last four; or, as Open WebUI 0.12's context compaction does
    (utils/context_compaction.py), the summary appended to the system prompt under
    ``[CONVERSATION SUMMARY]`` and its last four."""
    if shape == "last-ten" or len(conversation) <= 4:
        return [SYSTEM, *conversation[-10:]]
    said = f"[Summary of {len(conversation) - 4} earlier messages]"
    if shape == "summary-message":
        return [SYSTEM, {"role": "user", "content": said}, *conversation[-4:]]
    system = {"role": "system", "content": f"{SYSTEM['content']}\n[CONVERSATION SUMMARY]\n{said}"}
    return [system, *conversation[-4:]]


@pytest.mark.parametrize("shape", ["last-ten", "summary-message", "open-webui-compaction"])
async def test_a_client_that_trims_its_history_keeps_the_whole_chat_and_gets_it_back(
    running: tuple[openai.AsyncOpenAI, Proxy], vault: Path, openai_server: OpenAIStub, shape: str
) -> None:
    client, proxy = running
    conversation: list[dict[str, str]] = []
    questions = [FACT, *(f"Question {k} about route grades and chalk." for k in range(1, TURNS))]
    for question in questions:
        asked = {"role": "user", "content": question}
        reply = await client.chat.completions.create(
            model="stub-chat",
            messages=[*window(conversation, shape), asked],  # type: ignore[list-item]
            extra_headers={"X-Smart-Context-Chat": "climbing"},
        )
        conversation += [asked, {"role": "assistant", "content": reply.choices[0].message.content}]
    await proxy.settle()
    stored = [m for m in chat_on_disk(vault, "climbing")["messages"] if m["role"] != "system"]
    assert [(m["role"], m["content"]) for m in stored] == [
        (m["role"], m["content"]) for m in conversation
    ]  # nothing erased, and the client's summary is not a message of the chat
    bodies: list[dict[str, Any]] = [b for p, b in openai_server.requests if "chat" in p]
    last = bodies[-1]["messages"]
    assert last[0] == window(conversation[:-2], shape)[0]  # the client's system prompt, as sent
    assert any(FACT in str(m.get("content")) for m in last)  # what the client dropped, back
    assert not any("[Summary of" in str(m.get("content")) for m in last[1:])
