"""In the browser: a chat file that cannot be read is named on the page, never lost."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from tests.browser.test_e2e import OpenPage


def test_a_damaged_chat_file_is_named_with_where_it_was_kept(
    serve_vault: Callable[[list[str]], AbstractContextManager[str]],
    open_page: OpenPage,
    tmp_path: Path,
) -> None:
    memory = tmp_path / "vault" / ".memory"
    with serve_vault(["subjects"]) as base:
        (memory / "broken.json").write_text('{"messages": [{"id": "a", "con', encoding="utf-8")
        page = open_page(f"{base}/?chat=broken")
        (kept,) = memory.glob("broken.json.corrupt-*")
        notice = page.locator(".damaged-files")
        notice.get_by_text(f".memory/{kept.name}").wait_for()
        banner = page.locator(".chat-warnings .banner")
        banner.wait_for()
        assert f".memory/{kept.name}" in banner.inner_text()
        assert kept.read_text(encoding="utf-8") == '{"messages": [{"id": "a", "con'
        # another file breaks while the page is open: the page hears of it at once
        (memory / "later.json").write_text("[1, 2", encoding="utf-8")
        page.evaluate("fetch('/api/chats')")  # anyone listing the chats finds it
        page.locator("#toast").get_by_text("later").wait_for()
        page.locator(".damaged-files li").nth(1).wait_for()
        # a chat without problems shows no warning
        page.locator('a[data-chat-id="subjects"]').click()
        page.wait_for_function("() => document.querySelector('.chat-warnings').hidden")
        page.close()  # before the server stops, so its event stream is not cut mid-way
