"""The chat page's layout on the example vault: a chat's title shows in full in a narrow window,
and a message's pin stays at the right end of its header whether or not it is in context.

The real sidecar (uvicorn in a thread) over a copy of the example vault, in Debian's headless
Chromium.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from smart_context.resources import example_vault_dir
from tests.browser.conftest import running_sidecar

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page

OpenPage = Callable[..., Page]


@pytest.fixture(scope="module")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The example vault, copied, served as `smart-context serve` serves it."""
    vault = tmp_path_factory.mktemp("layout") / "example-vault"
    shutil.copytree(example_vault_dir(), vault)
    with running_sidecar(vault) as base:
        yield {"base": base, "vault": vault}


def titles() -> dict[str, str]:
    """Each example chat's title, by chat id, as the package ships them."""
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8"))["title"]
        for path in sorted((example_vault_dir() / ".memory").glob("*.json"))
    }


@pytest.mark.parametrize("width", [800, 1024, 1280, 1440])
def test_each_example_chats_title_shows_in_full(
    example_site: dict[str, Any], open_page: OpenPage, width: int
) -> None:
    chats = titles()
    assert "Sourdough basics" in chats.values()
    for chat_id, title in chats.items():
        page = open_page(f"{example_site['base']}/?chat={chat_id}", width=width)
        heading = page.locator("#chat-title")
        expect(heading).to_have_text(title)
        fits = heading.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert fits[0] <= fits[1], f"{title!r} is cut at {width}px: {fits}"
        page.context.close()


def pin_right(page: Page, message_id: str) -> float:
    """How far the pin's right edge is from its header's right edge, in px."""
    gap: float = page.locator(f'#messages [data-message-id="{message_id}"]').evaluate(
        """m => m.querySelector(".msg__meta").getBoundingClientRect().right
               - m.querySelector(".msg__pin").getBoundingClientRect().right"""
    )
    return gap


@pytest.mark.parametrize("width", [800, 1440])
def test_the_pin_stays_right_aligned_on_a_message_in_context(
    example_site: dict[str, Any], open_page: OpenPage, width: int
) -> None:
    page = open_page(f"{example_site['base']}/?chat=sourdough", width=width)
    messages = page.locator("#messages [data-message-id]")
    expect(messages.first).to_be_visible()
    ids = messages.evaluate_all("els => els.map(e => e.dataset.messageId)")
    inside, outside = ids[0], ids[2]  # two of the user's messages
    before = pin_right(page, inside)
    # What the panel sends the page when a topic keeps some messages.
    page.evaluate(
        """([chat, ids]) => document.dispatchEvent(new CustomEvent(
             "smart_context:filter_changed",
             {detail: {chat_id: chat, active_topics: ["Starter"], included_ids: ids}}))""",
        ["sourdough", [inside]],
    )
    mark = page.locator(f'#messages [data-message-id="{inside}"]')
    expect(mark).to_have_attribute("data-in-context", "")
    assert pin_right(page, inside) == pytest.approx(before, abs=0.5)
    assert pin_right(page, outside) == pytest.approx(before, abs=0.5)
    assert before == pytest.approx(0, abs=0.5)  # at the right end of the header
