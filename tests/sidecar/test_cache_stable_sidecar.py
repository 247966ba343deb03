"""The cache-stable layout through the reference sidecar (docs/contract.md §9, "The layout"): 30
messages posted to a long chat through the HTTP API, chat model ``gpt-5``; what the model
receives starts with the previous request outside cuts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smart_context.plugin import SmartContextPlugin
from smart_context.services import Services
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.conftest import write_chat
from tests.context.test_budgeted import long_chat
from tests.context.test_layout import Clock
from tests.layout_checks import cuts_of, longer
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import chat_on_disk, llm_table, running_app, write_settings

TURNS = 30
# a budget the chat's history does not fit whole (it is cut and recalled from); the replayed
# turns are longer than the chat's (tests/layout_checks.longer), so 30 turns pass the high mark
# once more
PLUGIN_TABLE = (
    "[plugins.smart_context]\n"
    'embedder = "host"\ntopic_extractor = "offline"\nsummarizer = "offline"\n'
    "budget_tokens = 2000\n"
)


@pytest.fixture
def stub_settings(vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vault's settings: the plugin offline, the chat model ``gpt-5`` and the embeddings
    answered by the stub."""
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    write_settings(
        vault,
        PLUGIN_TABLE
        + llm_table(openai_server.base_url, "STUB_KEY", chat="gpt-5", embedding="stub-embedding"),
    )


def services_of(sidecar: Sidecar) -> Services:
    """The running plugin's services (its clock, its background work)."""
    plugin = sidecar.pm.get_plugin("smart_context")
    assert isinstance(plugin, SmartContextPlugin) and plugin.services is not None
    return plugin.services


async def test_thirty_posted_messages_start_with_the_previous_request_outside_cuts(
    vault: Path, openai_server: OpenAIStub, stub_settings: None
) -> None:
    chat = longer(long_chat(400), TURNS)
    start = len(chat) - 2 * TURNS
    write_chat(vault, "long", chat[:start])
    sidecar = Sidecar(vault)
    records: list[dict[str, Any]] = []
    async with running_app(create_app(sidecar)) as client:
        clock = Clock()
        services_of(sidecar).clock = clock
        for k in range(TURNS):
            asked, answer = chat[start + 2 * k], chat[start + 2 * k + 1]
            openai_server.chat_replies.append(answer["content"])
            clock.now += 30
            posted = await client.post(
                "/api/chats/long/messages", json={"content": asked["content"]}
            )
            assert posted.status_code == 200, posted.text
            reply = posted.json()["assistant_message"]
            assert reply["content"] == answer["content"]
            records.append(reply["smart_context"])
        await services_of(sidecar).settle(timeout=30)

    bodies = [b for path, b in openai_server.requests if path == "/v1/chat/completions"]
    assert len(bodies) == TURNS and {b["model"] for b in bodies} == {"gpt-5"}
    requests = [body["messages"] for body in bodies]
    cuts = cuts_of(requests, records)
    for (i, before), after in zip(enumerate(bodies), bodies[1:], strict=False):
        if cuts[i + 1] is None:  # the tools, too, are kept between cuts
            assert after.get("tools") == before.get("tools")
    # the history does not fit whole: it was cut, and older messages were recalled
    assert any(r["layout"]["start_id"] is not None for r in records)
    assert any(r["layout"]["recalled_ids"] for r in records)
    assert any(m[-1]["content"].startswith("<context>\n") for m in requests)
    for request, asked in zip(requests, chat[start::2], strict=True):
        assert request[-1]["role"] == "user" and request[-1]["content"].endswith(asked["content"])
    # the stored chat holds the user's messages as they were posted
    stored = [m for m in chat_on_disk(vault, "long")["messages"] if m["role"] == "user"]
    assert [m["content"] for m in stored] == [m["content"] for m in chat if m["role"] == "user"]
    assert not any("<context>" in m["content"] for m in stored)
