"""``smart-context mcp VAULT`` driven by the official SDK's client over stdio, as an MCP-capable
app would: the tools are listed, memories are stored and found, a bad argument is a tool
error, and what the server stores is what the plugin's commands see."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters, stdio_client

from smart_context.memory.db import MemoryDB
from tests.conftest import write_chat
from tests.fakes import make_messages

TOOLS = {
    "store_memory",
    "retrieve_context",
    "summarize_conversation",
    "mark_important",
    "forget_context",
    "post_direct_message",
}


def vault_with_chat(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    (vault / ".memory").mkdir(parents=True)
    # the local model would take a while to load in a test: the words-only path is enough here
    (vault / ".vault.toml").write_text(
        '[plugins.smart_context]\nembedder = "openai"\nopenai_base_url = "http://127.0.0.1:9/v1"\n'
        'summarizer = "offline"\ntopic_extractor = "offline"\n',
        encoding="utf-8",
    )
    texts = [
        "My landlord is Mrs. Okafor and the lease ends on 14 March.",
        "Noted: Mrs. Okafor, lease until 14 March.",
        "How long should the rye dough rest?",
        "About 12 hours in the fridge.",
    ]
    write_chat(vault, "flat", make_messages(texts))
    return vault


def payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


async def test_an_mcp_client_stores_finds_and_forgets_memories(tmp_path: Path) -> None:
    vault = vault_with_chat(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "smart_context_hosts.cli", "mcp", str(vault)]
    )
    async with Client(stdio_client(params), cache=None) as client:
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        stored = payload(
            await client.call_tool(
                "store_memory", {"content": "The deposit was 950 euros.", "chat_id": "flat"}
            )
        )
        memory_id = stored["memory"]["id"]
        found = payload(
            await client.call_tool(
                "retrieve_context", {"query": "When does the Okafor lease end?", "chat_id": "flat"}
            )
        )
        assert {m["id"] for m in found["messages"]} >= {"m0", "m1"}
        pinned = payload(
            await client.call_tool("mark_important", {"chat_id": "flat", "message_id": "m2"})
        )
        assert pinned["important"] is True
        bad = await client.call_tool("mark_important", {"chat_id": "../../etc", "message_id": "m2"})
        assert bad.is_error and "not valid" in bad.content[0].text
        note = payload(
            await client.call_tool(
                "post_direct_message",
                {"chat_id": "flat", "content": "Ask about the deposit.", "priority": 0.8},
            )
        )
        assert note["direct_message"]["priority"] == 0.8
        forgotten = payload(await client.call_tool("forget_context", {"memory_id": memory_id}))
        assert forgotten["forgotten"] == 1
    db = MemoryDB(vault)
    assert db.marks("flat") == {"m2"}
    assert [m.content for m in db.live_direct("flat")] == ["Ask about the deposit."]
    assert db.all_memories() == []
