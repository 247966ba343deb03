"""Four clients writing to one long chat at once, through the reference sidecar, the real
plugin with a token budget, and the loopback OpenAI-compatible server: every message and reply
is stored, every request keeps within its budget, and nothing raises."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from smart_context_hosts.sidecar.runtime import Sidecar
from tests.conftest import write_chat
from tests.context.test_budgeted import long_chat
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import chat_on_disk, llm_table, write_settings

WRITERS, ROUNDS, LIMIT = 4, 3, 1500


async def test_four_writers_on_one_chat_lose_nothing_and_keep_the_budget(
    vault: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    table = llm_table(
        openai_server.base_url, "STUB_KEY", chat="stub-chat", embedding="stub-embedding"
    )
    plugin = (
        '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
        f'budget_tokens = {LIMIT}\ntoken_model = "gpt-4o"\n'
    )
    write_settings(vault, plugin + table)
    write_chat(vault, "busy", long_chat(300))
    sidecar = Sidecar(vault)
    await sidecar.start()

    async def writer(k: int) -> None:
        for r in range(ROUNDS):
            text = f"Writer {k}, round {r}: what did we say about Lisbon in message {40 * k}?"
            events = [e async for e in sidecar.send_message("busy", text).events()]
            assert events and events[-1].name == "done", events[-1]

    try:
        with caplog.at_level(logging.WARNING):
            await asyncio.gather(*(writer(k) for k in range(WRITERS)))
    finally:
        await sidecar.stop()
    # ours only: another test's model client, collected late, may log its own close here
    ours = [r for r in caplog.records if r.name.startswith("smart_context")]
    assert not [r for r in ours if r.exc_info], "a request raised"
    messages = chat_on_disk(vault, "busy")["messages"]
    sent = [m["content"] for m in messages[300:] if m["role"] == "user"]
    asked = {f"Writer {k}, round {r}" for k in range(WRITERS) for r in range(ROUNDS)}
    assert {text.split(":")[0] for text in sent} == asked and len(sent) == len(asked)
    replies = [m for m in messages[300:] if m["role"] == "assistant"]
    assert len(replies) == len(asked)
    for reply in replies:
        budget = reply["smart_context"]["budget"]
        assert budget["limit"] == LIMIT and budget["used"] <= LIMIT
