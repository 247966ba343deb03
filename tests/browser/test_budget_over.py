"""A request whose must-send parts do not fit its budget, in a real headless Chromium against
the real sidecar: View context says it went over, by how much, and which items gave way.

A module of its own: it starts its own sidecar (see ``test_memory_progress.py`` on why).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.conftest import running_sidecar
from tests.browser.test_e2e import api
from tests.browser.test_memory_ui import OpenPage, memory_chat, open_chat, write_memory_vault

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

RULE = " ".join(["Always answer in British English, with metric units and grams."] * 8)
REFERENCE = " ".join(["The landlord, Mrs. Okafor, owns the flat; the lease ends in March."] * 8)


def item(path: Path, name: str, include: str, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ninclude: {include}\n---\n{text}\n", encoding="utf-8")


def test_view_context_says_the_request_went_over_and_what_gave_way(
    tmp_path: Path, open_page: OpenPage
) -> None:
    vault = write_memory_vault(
        tmp_path / "vault", {"tight": memory_chat(20)}, "budget_tokens = 150\n"
    )
    item(vault / "rules" / "house-style.md", "House Style", "always", RULE)
    item(vault / "references" / "the-flat.md", "The Flat", "agent", REFERENCE)
    with running_sidecar(vault) as base:
        answer = api(base, "/api/chats/tight/messages", {"content": "Who owns the flat?"})
        budget = answer["assistant_message"]["smart_context"]["budget"]
        assert budget["over"] == budget["used"] - 150 and budget["note"]
        page = open_chat(open_page, base, "tight")
        page.locator("#messages .msg--assistant").last.get_by_role(
            "button", name=re.compile("View context")
        ).click()
        dialog = page.locator("#context-dialog")
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text(f"Over the token budget by {budget['over']}")
        assert budget["left_out_items"] == [{"type": "reference", "name": "The Flat"}]
        expect(dialog).to_contain_text("1 item chosen by search was left out: The Flat")
        page.keyboard.press("Escape")
        page.context.close()  # before the sidecar stops, so no page sees it go
