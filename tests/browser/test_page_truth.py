"""What the page says must be what was done: the counts after a send, View context of a filtered
reply, and a click the embedding model cannot score.

The real reference sidecar (uvicorn in a thread) with the real plugin, driven in Debian's
headless Chromium; replies come from the loopback OpenAI-compatible stub or from no model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import running_sidecar, subject_chat
from tests.browser.test_e2e import (
    SLOW,
    OpenPage,
    Site,
    api,
    bubble,
    in_context_status,
    shot,
    wait_messages,
    wait_settled,
)
from tests.openai_server import OpenAIStub

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

ServeVault = Callable[[list[str]], AbstractContextManager[str]]
NO_KEY_ENV = "SMART_CONTEXT_E2E_NO_KEY"  # never set: the stub refuses the placeholder key


def topics_of(base: str, chat_id: str) -> dict[str, Any]:
    result: dict[str, Any] = api(
        base, "/api/commands/smart_context.get_topics", {"chat_id": chat_id}
    )
    return result


def test_after_a_send_the_status_follows_the_new_map_and_counts_real_messages(
    serve_vault: ServeVault, open_page: OpenPage
) -> None:
    with serve_vault(["subjects"]) as base:
        page = open_page(f"{base}/?chat=subjects")
        wait_messages(page, 31)
        bubble(page, "Python Asyncio").click()
        wait_settled(page)
        in_context_status(page)

        page.locator("#composer-input").fill("How do I use asyncio queues in Python?")
        page.locator("#composer-input").press("Enter")
        expect(page.locator("#messages .msg--notice")).to_have_count(1, timeout=SLOW)
        # The chat's topics had no map yet: the pass after the reply makes one, and the click
        # keeps other messages under it. The bubbles show it; the status must too.
        page.wait_for_function(
            "() => document.querySelector('#smart-context-panel [data-topic=\"Python Asyncio\"]')"
            ".textContent.endsWith('11')",
            timeout=SLOW,
        )
        now = topics_of(base, "subjects")
        kept, total = len(now["included_ids"]), now["total_messages"]
        assert total == 32  # 31 and the question; the no-model notice is no chat message
        status = page.locator("#sc-status")
        expect(status).to_have_text(f"{kept} of {total} messages in context", timeout=SLOW)
        expect(page.locator("#filter-summary")).to_contain_text(f"{kept} of {total} in context")
        expect(page.locator("#chat-subtitle")).to_have_text(f"{total} messages")
        assert len(page.locator("#messages [data-in-context]").all()) == kept

        page.reload()  # and a reload says the same
        wait_messages(page, 33)
        expect(status).to_have_text(f"{kept} of {total} messages in context", timeout=SLOW)
        expect(page.locator("#chat-subtitle")).to_have_text(f"{total} messages")
        page.close()  # before the server stops, so its event stream is not cut under it


def test_view_context_of_a_filtered_reply_says_only_what_is_true(
    site: Site, open_page: OpenPage
) -> None:
    api(
        site["base"],
        "/api/commands/smart_context.set_filter",
        {"chat_id": "subjects", "topics": ["Python Asyncio"]},
    )
    page = open_page(f"{site['base']}/?chat=subjects")
    wait_messages(page, 31)
    page.locator("#composer-input").fill("How do I cancel a Python asyncio task?")
    page.locator("#composer-input").press("Enter")
    wait_messages(page, 33)
    assistant = page.locator("#messages .msg--assistant").last
    expect(assistant).to_contain_text("echo:", timeout=SLOW)

    chat = json.loads((site["vault"] / ".memory" / "subjects.json").read_text(encoding="utf-8"))
    record = chat["messages"][-1]["smart_context"]
    assert record["mode"] == "filtered" and record["threshold"] == "auto"
    assert record["budget"]["by_section"]["tools"] > 0  # the memory tools went with it

    assistant.get_by_role("button", name="View context").click()
    dialog = page.locator("#context-dialog")
    expect(dialog).to_contain_text("Filtered by topic")
    # the budget cut nothing, but the filter did: never "sent whole"
    expect(dialog).not_to_contain_text("sent whole")
    expect(dialog).to_contain_text("What the topic filter kept fits the token budget")
    # the cut the filter used under "auto", as `smart-context context` prints it
    cut = record["cuts"]["Python Asyncio"]
    threshold = dialog.locator(".ctx-fact", has_text="Threshold").locator("dd")
    expect(threshold).to_have_text(f"auto: {cut:.2f}")
    expect(dialog).to_contain_text(f"reached {cut:.2f}")
    # every tool sent and counted is listed: here the plugin's own two
    tools = dialog.locator('details[data-group="tool"]')
    expect(tools.locator("summary").first).to_have_text("Tools (2)")
    for name in ("retrieve_context", "store_memory"):
        row = tools.locator(".ctx-ci__item", has_text=name)
        expect(row).to_contain_text("smart_context.")
        expect(row).to_contain_text("Built in")
    expect(dialog.locator(".ctx-ci__summary")).to_contain_text("2 tools (all built in)")
    shot(page, "context-dialog-filtered-truth")
    page.keyboard.press("Escape")


@pytest.fixture
def refused_site(tmp_path: Path, openai_server: OpenAIStub) -> Iterator[str]:
    """A vault whose embeddings go to an OpenAI-compatible server that refuses the key (a user
    without an OpenAI key), with no chat model."""
    vault = tmp_path / "vault"
    (vault / ".memory").mkdir(parents=True)
    (vault / ".vault.toml").write_text(
        '[plugins.smart_context]\nembedder = "openai"\ntopic_extractor = "offline"\n'
        f'openai_base_url = "{openai_server.base_url}"\nopenai_api_key_env = "{NO_KEY_ENV}"\n',
        encoding="utf-8",
    )
    chat = json.dumps(subject_chat())
    (vault / ".memory" / "subjects.json").write_text(chat, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(NO_KEY_ENV, raising=False)
        with running_sidecar(vault) as base:
            yield base


def test_a_click_the_embedding_model_refuses_says_so_and_that_everything_is_sent(
    refused_site: str, open_page: OpenPage
) -> None:
    page = open_page(f"{refused_site}/?chat=subjects")
    wait_messages(page, 31)
    bubble(page, "Python Asyncio").click()
    wait_settled(page)
    expect(bubble(page, "Python Asyncio")).to_have_attribute("aria-pressed", "true")
    status = page.locator("#sc-status")
    expect(status).to_contain_text("Embeddings failed")
    expect(status).to_contain_text("the whole history is sent")
    expect(status).to_contain_text("rejected the API key (HTTP 401)")
    expect(status).not_to_have_text(re.compile(r"\d+ of \d+ messages in context"))
    expect(status).to_have_attribute("data-fallback", "")
    hint = page.locator("#sc-hint")
    expect(hint).not_to_contain_text("Only messages about the selected topics")
    expect(hint).to_contain_text("every message is sent")
    summary = page.locator("#filter-summary")
    expect(summary).to_contain_text("Embeddings failed")
    expect(summary).not_to_contain_text("in context")
    shot(page, "embeddings-refused", "#panels")

    # the reply's record says the same (no model here: the notice carries it)
    page.locator("#composer-input").fill("How do I cancel a Python asyncio task?")
    page.locator("#composer-input").press("Enter")
    expect(page.locator("#messages .msg--notice")).to_have_count(1, timeout=SLOW)
    page.locator("#messages .msg--notice").get_by_role("button", name="View context").click()
    dialog = page.locator("#context-dialog")
    expect(dialog.locator(".ctx-error")).to_contain_text("Embeddings failed")
    expect(dialog.locator(".ctx-error")).to_contain_text("HTTP 401")
    page.keyboard.press("Escape")
    page.close()
