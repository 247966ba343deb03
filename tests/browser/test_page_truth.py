"""What the page says must be what was done: the counts after a send, View context of a filtered
reply, and a click the embedding model cannot score.

The real reference sidecar (uvicorn in a thread) with the real plugin, driven in Debian's
headless Chromium; replies come from the loopback OpenAI-compatible stub or from no model.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tests.browser.test_e2e import (
    SLOW,
    OpenPage,
    api,
    bubble,
    in_context_status,
    wait_messages,
    wait_settled,
)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

ServeVault = Callable[[list[str]], AbstractContextManager[str]]


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
