"""In the browser: a tool call waits for the user's Approve, then its result and the
final reply show, and the stored call shows again after a reload.

The real sidecar runs under uvicorn with one small plugin (``tests.fakes.ToolPlugin``, the tool
side of the Smart Context plugin) and the loopback OpenAI stub scripting the model's tool call.
The tool's name and arguments are HTML: they must show as text, never run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import HOSTILE, KEY_ENV, llm_table, running_sidecar
from tests.browser.test_e2e import shot
from tests.fakes import ToolPlugin
from tests.openai_server import OpenAIStub, tool_calls

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Browser = sync_api.Browser

FINAL = "Found it: the answer is 42."
SUMMARY = f"read {len('contents of ' + HOSTILE)}"  # what ToolPlugin's call_tool reports


@pytest.fixture
def tool_site(
    tmp_path: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, ToolPlugin]]:
    """A sidecar whose model asks for ``notes__search`` (a server that asks first)."""
    monkeypatch.setenv(KEY_ENV, openai_server.api_key)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / ".vault.toml").write_text(
        llm_table(openai_server) + '\n[mcp.servers.notes]\ncommand = "notes-server"\n',
        encoding="utf-8",
    )
    openai_server.chat_replies += [
        tool_calls(("notes__search", {"path": HOSTILE}), text="Let me search."),
        FINAL,
    ]
    plugin = ToolPlugin(tools=("notes__search",))
    with running_sidecar(vault, plugins=[plugin]) as base:
        yield base, plugin


def test_approving_a_tool_call_shows_its_result_and_the_reply(
    chromium: Browser, tool_site: tuple[str, ToolPlugin], openai_server: OpenAIStub
) -> None:
    base, plugin = tool_site
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    try:
        page.goto(base + "/")
        page.locator("#composer-input").fill("Search my notes for the answer")
        page.locator("#composer-input").press("Enter")

        call = page.locator(".tool-call")
        expect(call).to_have_attribute("data-state", "waiting", timeout=15_000)
        expect(call.locator(".tool-call__name")).to_have_text("notes.search")
        assert HOSTILE in call.locator(".tool-call__args").inner_text()
        assert page.locator(".tool-call img").count() == 0  # the arguments are text
        assert plugin.calls == []  # nothing runs before the user says so
        shot(page, "tool-call-waiting", "#messages")

        openai_server.delay = 1.5  # the model's second turn is slow: the live result shows first
        call.get_by_role("button", name="Approve").click()
        expect(call).to_have_attribute("data-state", "done")
        expect(call.locator(".tool-call__summary")).to_have_text(SUMMARY)
        expect(call.get_by_role("button", name="Approve")).to_have_count(0)

        reply = page.locator("#messages .msg--assistant").last
        expect(reply).to_contain_text(FINAL, timeout=15_000)
        stored = reply.locator(".tool-call")
        expect(stored).to_have_attribute("data-state", "done")
        expect(stored.locator(".tool-call__summary")).to_have_text(SUMMARY)
        assert plugin.calls == [("notes", "search", {"path": HOSTILE})]
        shot(page, "tool-call-done", "#messages")

        page.reload()
        again = page.locator("#messages .msg--assistant .tool-call")
        expect(again).to_have_attribute("data-state", "done", timeout=15_000)
        expect(again.locator(".tool-call__name")).to_have_text("notes.search")
        assert page.locator(".tool-call__approve").count() == 0
    finally:
        page.close()  # before the server stops, so its event stream is not cut mid-way
        context.close()
    assert errors == []


def test_another_page_on_the_chat_can_answer_the_call(
    chromium: Browser, tool_site: tuple[str, ToolPlugin]
) -> None:
    base, plugin = tool_site
    chat_id = httpx.post(f"{base}/api/chats", json={"title": "Two pages"}).json()["id"]
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    sender, other = context.new_page(), context.new_page()
    errors: list[str] = []
    for page in (sender, other):
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        for page in (sender, other):
            page.goto(f"{base}/?chat={chat_id}")
            expect(page.locator("#composer-input")).to_be_enabled()
        other.wait_for_timeout(500)  # its event stream is open
        sender.locator("#composer-input").fill("Search my notes for the answer")
        sender.locator("#composer-input").press("Enter")
        waiting = other.locator(".tool-call--elsewhere")
        expect(waiting).to_have_attribute("data-state", "waiting", timeout=15_000)
        expect(waiting.locator(".tool-call__name")).to_have_text("notes.search")
        assert plugin.calls == []
        waiting.get_by_role("button", name="Approve").click()  # answered here, not by the sender
        expect(sender.locator("#messages .msg--assistant").last).to_contain_text(
            FINAL, timeout=15_000
        )
        expect(other.locator("#messages .msg--assistant").last).to_contain_text(
            FINAL, timeout=15_000
        )
        assert plugin.calls == [("notes", "search", {"path": HOSTILE})]
        expect(sender.locator(".tool-call__approve")).to_have_count(0)
    finally:
        for page in (sender, other):
            page.close()
        context.close()
    assert errors == []
