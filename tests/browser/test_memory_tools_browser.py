"""In the browser: the chat model's memory tool call shows in the chat like any tool
call. The real sidecar runs under uvicorn with the installed Smart Context plugin and the loopback
OpenAI stub scripting a ``store_memory`` call, which runs unasked (the default)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import KEY_ENV, llm_table, running_sidecar
from tests.browser.test_e2e import shot
from tests.openai_server import OpenAIStub, tool_calls

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Browser = sync_api.Browser

FACT = "The user's bicycle is blue."
PLUGIN = (
    '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
    'summarizer = "offline"\n'
)


def test_a_memory_the_model_stores_shows_as_a_tool_call(
    chromium: Browser, tmp_path: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, openai_server.api_key)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / ".vault.toml").write_text(PLUGIN + llm_table(openai_server), encoding="utf-8")
    openai_server.chat_replies += [
        tool_calls(("smart_context__store_memory", {"content": FACT})),
        "Noted, I will remember that.",
    ]
    with running_sidecar(vault) as base:
        context = chromium.new_context(
            viewport={"width": 1280, "height": 900}, reduced_motion="reduce"
        )
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        try:
            page.goto(base + "/")
            page.locator("#composer-input").fill("My bicycle is blue, remember that.")
            page.locator("#composer-input").press("Enter")

            reply = page.locator("#messages .msg--assistant").last
            expect(reply).to_contain_text("Noted, I will remember that.", timeout=20_000)
            call = reply.locator(".tool-call")
            expect(call).to_have_attribute("data-state", "done")
            expect(call.locator(".tool-call__name")).to_have_text("smart_context.store_memory")
            expect(call.locator(".tool-call__summary")).to_have_text(f"Stored: {FACT}")
            # (its text, not innerText: a message out of view skips rendering, content-visibility)
            expect(call.locator(".tool-call__args")).to_contain_text(FACT)
            assert page.locator(".tool-call__approve").count() == 0  # ran unasked
            shot(page, "memory-tool-call", "#messages")
            chat_id = httpx.get(f"{base}/api/chats").json()["chats"][0]["id"]
            listed = httpx.post(
                f"{base}/api/commands/smart_context.list_memories", json={"chat_id": chat_id}
            ).json()
        finally:
            page.close()  # before the server stops, so its event stream is not cut mid-way
            context.close()
    assert [m["content"] for m in listed["memories"]] == [FACT]
    assert errors == []
