"""The command palette on the real page: the best title match runs, and a command that changes a
setting never runs on a loose match.

The real sidecar (uvicorn in a thread) over a vault in ``tmp_path`` (see ``conftest.py``), driven
in Debian's headless Chromium.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.test_e2e import SLOW, wait_messages, wait_settled

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page

Site = dict[str, Any]
OpenPage = Callable[..., Page]


def open_palette(page: Page, typed: str) -> Any:
    page.keyboard.press("Control+k")
    palette = page.locator("#palette")
    expect(palette).to_be_visible()
    page.keyboard.type(typed)
    return palette


def labels(palette: Any) -> list[str]:
    result: list[str] = palette.locator("[role='option'] .palette__label").all_inner_texts()
    return result


def settled_subjects_page(site: Site, open_page: OpenPage) -> Page:
    page = open_page(f"{site['base']}/?chat=subjects")
    wait_messages(page, 31)
    wait_settled(page)
    expect(page.locator("#sc-similarity-toggle")).to_be_checked()
    return page


@pytest.mark.parametrize("typed", ["search", "Search context"])
def test_search_opens_search_context_items_and_leaves_the_filter_alone(
    site: Site, open_page: OpenPage, typed: str
) -> None:
    page = settled_subjects_page(site, open_page)
    config = (site["vault"] / ".vault.toml").read_bytes()
    palette = open_palette(page, typed)
    expect(palette.locator("[role='option']").first).to_have_text("Search context items…")
    expect(palette.locator("[aria-selected='true']")).to_have_text("Search context items…")
    page.keyboard.press("Enter")
    expect(palette.locator("[data-role='title']")).to_have_text("Search context items")
    page.keyboard.press("Escape")
    expect(palette).to_be_hidden()
    wait_settled(page)
    expect(page.locator("#sc-similarity-toggle")).to_be_checked()
    assert (site["vault"] / ".vault.toml").read_bytes() == config


def test_the_best_title_match_comes_first(site: Site, open_page: OpenPage) -> None:
    page = settled_subjects_page(site, open_page)
    palette = open_palette(page, "filter")
    found = labels(palette)
    # a title prefix, then the titles with the word, in the palette's order
    assert found[:3] == ["Filter by topics…", "Clear filter", "Similarity filter: turn off"]
    page.keyboard.press("Escape")
    palette = open_palette(page, "clear filter")
    expect(palette.locator("[aria-selected='true']")).to_have_text("Clear filter")
    page.keyboard.press("Escape")


def test_a_loose_match_of_a_setting_is_listed_but_enter_does_not_run_it(
    site: Site, open_page: OpenPage
) -> None:
    page = settled_subjects_page(site, open_page)
    config = (site["vault"] / ".vault.toml").read_bytes()
    toggle = page.locator("#sc-similarity-toggle")
    palette = open_palette(page, "embedding")  # one of its keywords, not its title
    assert labels(palette) == ["Similarity filter: turn off"]
    expect(palette.locator("[aria-selected='true']")).to_have_count(0)
    page.keyboard.press("Enter")
    expect(palette.locator("[data-role='message']")).to_contain_text("Choose with ↑ ↓")
    expect(palette).to_be_visible()
    expect(toggle).to_be_checked()
    assert (site["vault"] / ".vault.toml").read_bytes() == config

    page.keyboard.press("ArrowDown")  # picked by the user: now Enter runs it
    page.keyboard.press("Enter")
    expect(palette).to_be_hidden()
    expect(toggle).not_to_be_checked(timeout=SLOW)
    wait_settled(page)
    assert "embedding_search = false" in (site["vault"] / ".vault.toml").read_text("utf-8")

    open_palette(page, "similarity")  # a clear prefix of its own title runs it
    page.keyboard.press("Enter")
    expect(toggle).to_be_checked(timeout=SLOW)
    wait_settled(page)
