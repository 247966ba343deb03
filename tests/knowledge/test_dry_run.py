"""The knowledge base seen from outside: the reference sidecar's dry run
(``POST /api/chats/{id}/context``) and ``smart-context context`` show the notes a message would
be sent with, the embeddings coming from the loopback OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smart_context_hosts.cli import main
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.conftest import write_chat
from tests.fakes import make_messages
from tests.knowledge.test_request import QUESTION
from tests.knowledge.test_section import DISTRACTORS, STARTER, write_notes
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import chat_on_disk, llm_table, running_app, write_settings


@pytest.fixture
def stub_vault(vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    write_settings(
        vault,
        '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
        'budget_tokens = 3000\nprompt_cache = "none"\n'
        + llm_table(
            openai_server.base_url, "STUB_KEY", chat="gpt-4o-mini", embedding="stub-embedding"
        ),
    )
    write_notes(vault, {**DISTRACTORS, "kitchen/starter.md": STARTER})
    write_chat(vault, "bake", make_messages(["Hello!", "Hello, how can I help?"]))
    return vault


async def test_the_dry_run_shows_the_notes_a_message_would_be_sent_with(stub_vault: Path) -> None:
    before = chat_on_disk(stub_vault, "bake")
    async with running_app(create_app(Sidecar(stub_vault))) as client:
        answer = await client.post("/api/chats/bake/context", json={"content": QUESTION})
        assert answer.status_code == 200, answer.text
        shown = answer.json()
        small_talk = await client.post("/api/chats/bake/context", json={"content": "Thanks!"})
    record = shown["smart_context"]
    assert [n["path"] for n in record["knowledge"]] == ["kitchen/starter.md"]
    system = shown["messages"][0]
    assert system["role"] == "system" and "## kitchen/starter.md" in system["content"]
    assert shown["messages"][-1] == {"role": "user", "content": QUESTION}
    by_section = record["budget"]["by_section"]
    assert by_section["knowledge"] > 0
    # counted exactly (gpt-4o-mini's tokenizer ships offline): the prompt is inside the budget
    assert shown["tokens"]["exact"] and shown["tokens"]["total"] <= record["budget"]["used"] <= 3000
    assert "knowledge" not in small_talk.json()["smart_context"]
    assert chat_on_disk(stub_vault, "bake") == before  # a dry run stores nothing
    saved = stub_vault / ".memory" / "smart_context" / "knowledge.embeddings.json"
    assert json.loads(saved.read_text(encoding="utf-8"))["model"].endswith("stub-embedding")


def test_the_command_line_prints_the_notes(
    stub_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["context", str(stub_vault), "bake", "--message", QUESTION]) == 0
    out = capsys.readouterr().out.split("sent with, for")[1]
    assert "  notes:\n" in out and "kitchen/starter.md (1 passage)" in out
    assert main(["context", str(stub_vault), "bake", "--message", "Thanks!"]) == 0
    assert "  notes: none" in capsys.readouterr().out
    assert main(["context", str(stub_vault), "bake", "--message", QUESTION, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["smart_context"]["knowledge"][0]["path"] == "kitchen/starter.md"
