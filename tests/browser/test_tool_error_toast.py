"""A tool call with a wrong argument, run from the palette on the real page: the toast says in
words which argument is wrong, and leaves the composer and its Send button usable.

The real sidecar with the example MCP server (``items_site`` of ``test_context_items``), in
Debian's headless Chromium.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.test_context_items import items_site, wait_items
from tests.browser.test_e2e import SLOW

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page

__all__ = ["items_site"]  # the module-scoped sidecar, shared by this module's tests

OpenPage = Callable[..., Page]

SEND_IS_ON_TOP = """() => {
  const send = document.getElementById("composer-send");
  const box = send.getBoundingClientRect();
  return document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2) === send;
}"""


def run_tool(page: Page, tool: str, arguments: str) -> None:
    page.keyboard.press("Control+k")
    palette = page.locator("#palette")
    expect(palette).to_be_visible()
    page.keyboard.type("run a tool")
    page.keyboard.press("Enter")
    expect(palette.locator("[role='option']").first).to_be_visible()
    page.keyboard.type(tool)
    page.keyboard.press("Enter")
    page.keyboard.type(arguments)
    expect(palette.locator("[role='option']").first).to_contain_text(f"Run example.{tool}")
    page.keyboard.press("Enter")
    expect(palette).to_be_hidden()


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


@pytest.mark.parametrize("width", [1440, 800, 600])
def test_a_missing_argument_is_named_in_words_and_send_stays_usable(
    items_site: dict[str, Any], open_page: OpenPage, width: int
) -> None:
    page = open_page(f"{items_site['base']}/?chat=plain", width=width, height=700)
    wait_items(page)
    run_tool(page, "time_in", '{"zone": "Asia/Tokyo"}')
    toast = page.locator("#toast")
    expect(toast).to_be_visible(timeout=SLOW)
    expect(toast).to_contain_text("time_in needs the argument “timezone” (it was given “zone”)")
    text = toast.inner_text()
    assert "pydantic" not in text.lower() and "http" not in text and "[type=" not in text

    assert page.evaluate(SEND_IS_ON_TOP), "the toast covers the Send button"
    toast_box = toast.bounding_box()
    composer_box = page.locator("#composer").bounding_box()
    assert toast_box is not None and composer_box is not None
    assert not overlaps(toast_box, composer_box), (toast_box, composer_box)
    page.locator("#composer-input").fill("Still writing")
    page.locator("#composer-send").click(trial=True)  # Playwright: nothing else takes the click
    expect(toast).to_be_visible()  # the message is still there to read meanwhile
