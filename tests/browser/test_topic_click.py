"""In the browser: a click on a bubble keeps that topic, a click that keeps nothing says
so, and every open page follows messages written elsewhere.

The real sidecar (uvicorn in a thread) with the real plugin on the offline default, driven in
Debian's headless Chromium.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from smart_context.resources import example_vault_dir
from tests.browser.conftest import running_sidecar, write_vault
from tests.browser.test_e2e import (
    COLD,
    SLOW,
    OpenPage,
    api,
    bubble,
    highlighted,
    in_context_status,
    wait_messages,
    wait_settled,
)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page


@pytest.fixture
def example_site(tmp_path: Path) -> Iterator[str]:
    """The example vault, copied, served as `smart-context serve` serves it on a fresh clone."""
    vault = tmp_path / "example-vault"
    shutil.copytree(example_vault_dir(), vault)
    with running_sidecar(vault) as base:
        yield base


def test_each_bubble_of_the_weekend_chat_keeps_its_own_messages(
    example_site: str, open_page: OpenPage
) -> None:
    page = open_page(f"{example_site}/?chat=weekend-project")
    wait_messages(page, 68)
    bubbles = page.locator("#smart-context-panel [data-topic]")
    expect(bubbles.first).to_be_visible(timeout=COLD)  # mapped in the background on first open
    wait_settled(page)
    labels = [bubbles.nth(i).get_attribute("data-topic") for i in range(bubbles.count())]
    assert len(labels) >= 3
    for label in labels:
        assert label
        bubble(page, label).click()
        expect(bubble(page, label)).to_have_attribute("aria-pressed", "true")
        wait_settled(page)
        kept, total = in_context_status(page)
        assert total == 68 and kept < total, f"{label!r} kept {kept} of {total}"
        page.wait_for_function(
            f"() => document.querySelectorAll('#messages [data-in-context]').length === {kept}"
        )
        assert len(highlighted(page)) == kept
        expect(bubble(page, label)).not_to_have_attribute("data-fallback", "")
        bubble(page, label).click()  # unselect before the next one
        expect(bubble(page, label)).to_have_attribute("aria-pressed", "false")
        wait_settled(page)


def test_a_click_that_keeps_nothing_says_so_everywhere(tmp_path: Path, open_page: OpenPage) -> None:
    vault = write_vault(tmp_path / "vault", ["subjects"])
    with (vault / ".vault.toml").open("a", encoding="utf-8") as toml:
        toml.write("similarity_threshold = 0.95\n")  # a fixed cut no message clears
    with running_sidecar(vault) as base:
        page = open_page(f"{base}/?chat=subjects")
        wait_messages(page, 31)
        expect(page.locator("#smart-context-panel [data-topic]").first).to_be_visible(timeout=COLD)
        wait_settled(page)
        # A label no message is about (as the palette or another page may send it).
        result = api(
            base,
            "/api/commands/smart_context.set_filter",
            {"chat_id": "subjects", "topics": ["Medieval Tapestry Weaving"]},
        )
        assert result["status"] == "success" and result["mode"] == "fallback"
        said = "No message is close enough to 'Medieval Tapestry Weaving': the full history is sent"
        expect(page.locator("#sc-status")).to_have_text(said, timeout=SLOW)
        expect(page.locator("#filter-summary")).to_contain_text(said)
        assert "of 31" not in page.locator("#filter-summary").inner_text()
        page.close()  # before the server stops, so its event stream is not cut under it


def test_two_pages_on_one_chat_stay_in_step(
    serve_vault: Callable[[list[str]], AbstractContextManager[str]], open_page: OpenPage
) -> None:
    with serve_vault(["subjects"]) as base:
        first = open_page(f"{base}/?chat=subjects")
        second = open_page(f"{base}/?chat=subjects")
        for page in (first, second):
            wait_messages(page, 31)
            expect(page.locator("#smart-context-panel [data-topic]").first).to_be_visible(
                timeout=COLD
            )
            wait_settled(page)

        # Another client (curl, another app) writes to the chat: both pages show it.
        answer = api(base, "/api/chats/subjects/messages", {"content": "How long should it proof?"})
        assert answer["user_message"]["content"] == "How long should it proof?"
        for page in (first, second):
            wait_messages(page, 33)  # the message and the sidecar's notice (no model here)
            expect(page.locator("#chat-subtitle")).to_have_text("32 messages")  # not the notice

        # A click in one page: the other highlights the same messages.
        label = first.locator("#smart-context-panel [data-topic]").first.get_attribute("data-topic")
        assert label
        bubble(first, label).click()
        wait_settled(first)
        kept, _ = in_context_status(first)
        for page in (first, second):
            page.wait_for_function(
                f"() => document.querySelectorAll('#messages [data-in-context]').length === {kept}",
                timeout=SLOW,
            )
        assert set(highlighted(first)) == set(highlighted(second))
        expect(bubble(second, label)).to_have_attribute("aria-pressed", "true")
        first.close()  # before the server stops, so their event streams are not cut under them
        second.close()


SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshot.py"


def readme_walk() -> tuple[str, str, int, int]:
    """What the README's walk names, read as docs/screenshot.py (which walks it) reads it."""
    spec = importlib.util.spec_from_file_location("screenshot", SCREENSHOT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    walk: tuple[str, str, int, int] = module.readme_walk()
    return walk


def test_the_readmes_walk_names_what_the_example_vault_gives(
    example_site: str, open_page: OpenPage
) -> None:
    """A newcomer follows the README's walk: the chat it names is listed, the bubble it names
    is drawn, and a click on it says the count the README says."""
    chat, label, kept, total = readme_walk()
    page = open_page(example_site)
    page.get_by_role("link", name=re.compile(re.escape(chat))).click()
    # the first open maps the chat: the panel says so, not "after the first replies"
    expect(page.locator("#sc-empty")).to_contain_text("Mapping this chat's topics", timeout=SLOW)
    wait_messages(page, total)
    bubbles = page.locator("#smart-context-panel [data-topic]")
    expect(bubbles.first).to_be_visible(timeout=COLD)
    wait_settled(page)
    labels = [bubbles.nth(i).get_attribute("data-topic") for i in range(bubbles.count())]
    assert label in labels, f"the README names {label!r}; the example chat's bubbles: {labels}"
    bubble(page, label).click()
    wait_settled(page)
    said = in_context_status(page)
    assert said == (kept, total), f"the README says {kept} of {total}; the page says {said}"


AT_END = """() => {
  const s = document.getElementById("message-scroller");
  return s.scrollHeight - s.scrollTop - s.clientHeight;
}"""
IN_VIEW = """() => {
  const view = document.getElementById("message-scroller").getBoundingClientRect();
  return [...document.querySelectorAll("#messages .msg[data-in-context]")].filter((el) => {
    const box = el.getBoundingClientRect();
    return box.bottom > view.top && box.top < view.bottom;
  }).length;
}"""


def test_a_chat_opens_at_its_newest_message_and_a_click_shows_what_it_keeps(
    example_site: str, open_page: OpenPage
) -> None:
    """Messages off screen are laid out at an estimated height: scrolled to the end once, a
    68-message chat stopped 528 px short of it, and a switch kept the old chat's place; a
    bubble click dimmed every message in view while the kept ones were further up."""
    page = open_page(f"{example_site}/?chat=weekend-project")
    wait_messages(page, 68)
    page.wait_for_timeout(800)  # the messages near the end are drawn at their real height
    assert page.evaluate(AT_END) < 2
    page.mouse.move(400, 300)
    page.mouse.wheel(0, -2500)  # the user reads further up
    page.wait_for_timeout(300)
    assert page.evaluate(AT_END) > 500
    page.get_by_role("link", name=re.compile("Japan")).click()
    page.wait_for_function("() => document.body.dataset.chatId === 'japan-trip'")
    page.wait_for_timeout(800)
    assert page.evaluate(AT_END) < 2  # another chat opens at its end, not at the old place
    page.get_by_role("link", name=re.compile("lenswatch")).click()
    wait_messages(page, 68)
    bubbles = page.locator("#smart-context-panel [data-topic]")
    expect(bubbles.first).to_be_visible(timeout=COLD)
    wait_settled(page)
    page.wait_for_timeout(500)
    assert page.evaluate(AT_END) < 2
    for k in range(bubbles.count()):  # a topic whose messages are not all at the end
        label = bubbles.nth(k).get_attribute("data-topic")
        assert label
        bubble(page, label).click()
        wait_settled(page)
        page.wait_for_timeout(300)
        assert page.evaluate(IN_VIEW) > 0, f"{label!r}: no message in context is in view"
        bubble(page, label).click()
        wait_settled(page)
