"""The long-memory UI in a real headless Chromium against the real sidecar and plugin: pins on
messages, View context with the budget's reasons and summaries, the panel's progress indicator
and its memories list. Vaults are built in ``tmp_path``; there is no model (replies are notices,
which still carry the record of what would have been sent)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import SUBJECTS, message, running_sidecar
from tests.browser.test_e2e import api, shot

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page
OpenPage = Callable[..., Page]

HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT_BREAKER = "</script><script>alert(2)</script>"
QUESTION = "When does the lease with Mrs. Okafor end?"
PLANTED = "The landlord, Mrs. Okafor, said the lease ends on 14 March and the deposit is 950."
SLOW = 60_000  # ms: the first request loads the local model


def memory_chat(n: int = 240) -> dict[str, Any]:
    """``n`` messages over the three subjects, with one planted fact (``c0041``) and its
    question (``c0040``)."""
    texts = [t for group in SUBJECTS.values() for t in group]
    messages = [
        message(f"c{i:04d}", "user" if i % 2 == 0 else "assistant", texts[i % len(texts)], i % 600)
        for i in range(n)
    ]
    if n > 41:
        messages[40]["content"] = "Who is the landlord, and when does the flat's lease run out?"
        messages[41]["content"] = PLANTED
    return {"title": "A long memory", "messages": messages, "topics": []}


def write_memory_vault(root: Path, chats: dict[str, dict[str, Any]], settings: str) -> Path:
    (root / ".memory").mkdir(parents=True)
    (root / ".vault.toml").write_text(
        '[plugins.smart_context]\nembedder = "local"\ntopic_extractor = "offline"\n'
        f'summarizer = "offline"\n{settings}',
        encoding="utf-8",
    )
    for chat_id, chat in chats.items():
        (root / ".memory" / f"{chat_id}.json").write_text(json.dumps(chat), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def memory_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A sidecar without a model over a vault with a 240-message chat and a 1,200-token budget;
    the search adds at most 5 older messages, so so small a room keeps some for summaries
    (it gives them no share of its own)."""
    chats = {"memo": memory_chat(), "other": memory_chat(30)}
    settings = "budget_tokens = 1200\nsearch_limit = 5\n"
    vault = write_memory_vault(tmp_path_factory.mktemp("vault"), chats, settings)
    (vault / "notes").mkdir()
    (vault / "notes" / "flat-lease.md").write_text(
        "# The flat's lease\n\nMrs. Okafor's lease for the flat runs out at the end of March; "
        "notice is due two months before.\n",
        encoding="utf-8",
    )
    (vault / "notes" / "bread.md").write_text("# Bread\n\nRye starter, fed twice a day.\n")
    with running_sidecar(vault) as base:
        yield base


def command(base: str, name: str, **kwargs: Any) -> dict[str, Any]:
    result: dict[str, Any] = api(base, f"/api/commands/smart_context.{name}", kwargs)
    return result


def pin_of(page: Page, message_id: str) -> Any:
    return page.locator(f'#messages [data-message-id="{message_id}"] .msg__pin')


def open_chat(open_page: OpenPage, base: str, chat_id: str) -> Page:
    page = open_page(f"{base}/?chat={chat_id}")
    expect(page.locator("#messages .msg").first).to_be_visible(timeout=SLOW)
    return page


# ---- pins ----------------------------------------------------------------------------------------


def test_a_pin_survives_a_reload_reaches_another_tab_and_reverts_when_it_fails(
    memory_site: str, open_page: OpenPage
) -> None:
    page = open_chat(open_page, memory_site, "other")
    other_tab = open_chat(open_page, memory_site, "other")
    pin = pin_of(page, "c0005")
    expect(pin).to_have_attribute("aria-pressed", "false")
    expect(pin).to_have_accessible_name("Pin this message")
    pin.focus()
    page.keyboard.press("Enter")  # the keyboard pins as a click does
    expect(pin).to_have_attribute("aria-pressed", "true")
    expect(pin_of(other_tab, "c0005")).to_have_attribute("aria-pressed", "true")  # live
    pin_of(page, "c0005").scroll_into_view_if_needed()
    shot(page, "memory-pins", "#message-scroller")
    assert command(memory_site, "list_marks", chat_id="other")["important_ids"] == ["c0005"]

    page.reload()
    expect(pin_of(page, "c0005")).to_have_attribute("aria-pressed", "true")
    expect(pin_of(page, "c0006")).to_have_attribute("aria-pressed", "false")
    pin_of(page, "c0005").click()
    expect(pin_of(page, "c0005")).to_have_attribute("aria-pressed", "false")
    expect(pin_of(other_tab, "c0005")).to_have_attribute("aria-pressed", "false")
    page.reload()
    expect(pin_of(page, "c0005")).to_have_attribute("aria-pressed", "false")

    # The host refuses (an error result; a 4xx/5xx would also log a console error): the pin
    # goes back and the page says why.
    page.route(
        "**/api/commands/smart_context.mark_important",
        lambda route: route.fulfill(
            status=200,
            content_type="application/json",
            body=json.dumps({"status": "error", "error": "the memory store is locked"}),
        ),
    )
    pin_of(page, "c0007").click()
    expect(page.locator("#toast")).to_contain_text("Could not pin the message")
    expect(page.locator("#toast")).to_contain_text("the memory store is locked")
    expect(pin_of(page, "c0007")).to_have_attribute("aria-pressed", "false")
    assert command(memory_site, "list_marks", chat_id="other")["important_ids"] == []


# ---- View context --------------------------------------------------------------------------------


def test_view_context_of_a_long_chat_shows_summaries_and_why_each_message_was_sent(
    memory_site: str, open_page: OpenPage
) -> None:
    made = command(memory_site, "summarize_conversation", chat_id="memo")
    assert made["status"] == "success" and made["summaries"]
    command(memory_site, "mark_important", chat_id="memo", message_id="c0003", important=True)
    command(memory_site, "store_memory", content="The user rents a flat in Lisbon.", chat_id="memo")
    command(
        memory_site,
        "post_direct_message",
        chat_id="memo",
        content="Reply in English.",
        priority=0.8,
        ttl_seconds=3600,
        source="calendar",
    )
    api(memory_site, "/api/chats/memo/messages", {"content": QUESTION})

    page = open_chat(open_page, memory_site, "memo")
    expect(pin_of(page, "c0003")).to_have_attribute("aria-pressed", "true")
    page.locator("#messages .msg--assistant").last.get_by_role(
        "button", name=re.compile("View context")
    ).click()
    dialog = page.locator("#context-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("A token budget of 1200 tokens cut the history")
    expect(dialog).to_contain_text(re.compile(r"Budget\s*\d+ of 1200 tokens"))

    summaries = dialog.locator(".ctx-summary")
    expect(summaries.first).to_be_visible()
    expect(summaries.first).to_contain_text(re.compile(r"(Summary|Key facts) · level \d"))
    expect(summaries.first).to_contain_text(re.compile(r"messages \d+\u2013\d+ \(\d+\)"))
    first_text = summaries.first.locator(".ctx-summary__text")
    expect(first_text).not_to_have_text("Loading the summary…")
    expect(first_text).not_to_have_class(re.compile("is-missing"))

    def why(message_id: str) -> Any:
        row = dialog.locator(f'[data-jump="{message_id}"]')
        return row.locator(".badge--why")

    expect(why("c0041")).to_have_text(re.compile(r"^relevant \d\.\d\d$"))
    expect(why("c0040")).to_have_text("turn of #42")
    expect(why("c0003")).to_have_text("pinned")
    # a room of 1,200 tokens is too small to give the last ten a share: the last turn goes
    expect(dialog.locator('.badge--why[data-why="recent"]')).to_have_count(2)

    memory = dialog.locator("[data-role='memory']")
    expect(memory.locator('[data-memory-kind="direct"]')).to_contain_text("Reply in English.")
    expect(memory.locator('[data-memory-kind="direct"]')).to_contain_text("priority 0.80")
    expect(memory.locator('[data-memory-kind="direct"]')).to_contain_text("from calendar")
    expect(memory.locator('[data-memory-kind="direct"]')).to_contain_text("until")
    expect(memory.locator('[data-memory-kind="memory"]')).to_contain_text("rents a flat in Lisbon")
    notes = dialog.locator("[data-role='notes']")
    expect(notes.locator("[data-note-path]")).to_have_count(1)
    expect(notes.locator('[data-note-path="notes/flat-lease.md"]')).to_contain_text(
        re.compile(r"notes/flat-lease\.md\s*score \d\.\d\d")
    )
    shot(page, "memory-context-dialog")
    summaries.first.scroll_into_view_if_needed()
    shot(page, "memory-context-summaries")
    memory.scroll_into_view_if_needed()
    shot(page, "memory-context-memory")

    # Order as sent: each summary stands before the first message sent after its start.
    order = summaries.first.locator("xpath=..").evaluate(
        "list => [...list.children].map(li => li.classList.contains('ctx-summary') ? 'S' : 'M')"
    )
    assert "S" in order and order[-1] == "M"

    # a jump from the dialog leaves the focus on the message it jumped to, not on the opener
    dialog.locator('[data-jump="c0041"]').first.click()
    expect(dialog).to_be_hidden()
    expect(page.locator('#messages [data-message-id="c0041"]')).to_be_focused()
    page.wait_for_timeout(300)  # the dialog's "close" comes a task later
    expect(page.locator('#messages [data-message-id="c0041"]')).to_be_focused()


def test_a_preview_of_the_message_being_written_is_a_dry_run_with_reasons(
    memory_site: str, open_page: OpenPage
) -> None:
    assert command(memory_site, "summarize_conversation", chat_id="memo")["summaries"]
    before = len(api(memory_site, "/api/chats/memo")["messages"])
    page = open_chat(open_page, memory_site, "memo")
    page.locator("#composer-input").fill("What deposit did Mrs. Okafor ask for?")
    page.keyboard.press("Control+k")
    expect(page.locator("#palette")).to_be_visible()
    page.keyboard.type("Preview context")
    expect(page.locator("#palette [role='option']").first).to_contain_text("Preview context")
    page.keyboard.press("Enter")
    dialog = page.locator("#context-dialog")
    expect(dialog.locator("#context-dialog-title")).to_have_text(
        "What this message would be sent with"
    )
    expect(dialog).to_contain_text("What deposit did Mrs. Okafor ask for?")
    expect(dialog.locator('[data-jump="c0041"] .badge--why')).to_have_text(
        re.compile(r"^relevant \d\.\d\d$")
    )
    expect(dialog.locator(".ctx-summary").first).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#composer-input")).to_be_focused()
    expect(page.locator("#composer-input")).to_have_value("What deposit did Mrs. Okafor ask for?")
    assert len(api(memory_site, "/api/chats/memo")["messages"]) == before  # nothing stored

    # with nothing written there is nothing to preview: what is sent depends on the message
    page.locator("#composer-input").fill("")
    page.keyboard.press("Control+k")
    page.keyboard.type("Preview context")
    page.keyboard.press("Enter")
    expect(page.locator("#toast")).to_contain_text("Write the message first")
    expect(dialog).to_be_hidden()


# ---- the panel: memories -------------------------------------------------------------------------


def memory_rows(page: Page) -> Any:
    return page.locator("#sc-memory-list [data-memory-id]")


def test_memories_are_listed_edited_and_deleted_in_the_panel_live_across_tabs(
    memory_site: str, open_page: OpenPage
) -> None:
    for memory in command(memory_site, "list_memories")["memories"]:
        command(memory_site, "delete_memory", memory_id=memory["id"])
    mine = command(
        memory_site, "store_memory", content="Waters the plants on Sundays.", chat_id="other"
    )["memory"]
    command(memory_site, "store_memory", content="Prefers metric units.", importance=0.9)
    command(memory_site, "store_memory", content="Another chat's secret.", chat_id="memo")
    page = open_chat(open_page, memory_site, "other")
    other_tab = open_chat(open_page, memory_site, "other")
    rows = memory_rows(page)
    expect(rows).to_have_count(2)  # this chat's and the global one, not another chat's
    expect(rows.first).to_contain_text("Prefers metric units.")
    expect(rows.first).to_contain_text("All chats")
    row = page.locator(f'#sc-memory-list [data-memory-id="{mine["id"]}"]')
    expect(row).to_contain_text("This chat")

    row.get_by_role("button", name="Edit").click()
    box = row.get_by_role("textbox")
    expect(box).to_be_focused()
    box.fill("Waters the plants on Sundays and Wednesdays.")
    box.press("Control+Enter")
    expect(row.locator(".sc-memory-text")).to_have_text(
        "Waters the plants on Sundays and Wednesdays."
    )
    expect(row.get_by_role("button", name="Edit")).to_be_focused()
    stored = {m["id"]: m["content"] for m in command(memory_site, "list_memories")["memories"]}
    assert stored[mine["id"]] == "Waters the plants on Sundays and Wednesdays."
    other_row = other_tab.locator(f'#sc-memory-list [data-memory-id="{mine["id"]}"]')
    expect(other_row).to_contain_text("Sundays and Wednesdays")  # live, from memory_changed

    # Escape leaves an edit without saving
    row.get_by_role("button", name="Edit").click()
    row.get_by_role("textbox").fill("not this")
    row.get_by_role("textbox").press("Escape")
    expect(row.locator(".sc-memory-text")).to_have_text(
        "Waters the plants on Sundays and Wednesdays."
    )

    # Delete asks first; "Keep" has the focus, so a stray Enter keeps it
    row.get_by_role("button", name="Delete").click()
    expect(row).to_contain_text("Delete this memory?")
    expect(row.get_by_role("button", name="Keep")).to_be_focused()
    page.keyboard.press("Enter")
    expect(row.get_by_role("button", name="Edit")).to_be_visible()
    row.get_by_role("button", name="Delete").click()
    row.get_by_role("button", name="Delete").click()  # the confirmation's Delete
    expect(rows).to_have_count(1)
    expect(memory_rows(other_tab)).to_have_count(1)
    assert mine["id"] not in {m["id"] for m in command(memory_site, "list_memories")["memories"]}

    # a change by another client arrives by itself
    command(memory_site, "store_memory", content="Allergic to cats.", chat_id="other")
    expect(rows).to_have_count(2)
    expect(page.locator("#sc-memory-heading")).to_have_text("Memories · 2")
    shot(page, "memory-panel", "#smart-context-panel")


def test_a_memory_deleted_elsewhere_while_edited_says_so(
    memory_site: str, open_page: OpenPage
) -> None:
    gone = command(memory_site, "store_memory", content="Short-lived.", chat_id="other")["memory"]
    page = open_chat(open_page, memory_site, "other")
    row = page.locator(f'#sc-memory-list [data-memory-id="{gone["id"]}"]')
    row.get_by_role("button", name="Edit").click()
    row.get_by_role("textbox").fill("Edited too late.")
    command(memory_site, "delete_memory", memory_id=gone["id"])
    expect(page.locator("#sc-memory-error")).to_contain_text(
        "The memory you were editing was deleted elsewhere."
    )
    expect(row).to_have_count(0)


# ---- hostile text --------------------------------------------------------------------------------


def test_hostile_memories_and_labels_render_as_text(memory_site: str, open_page: OpenPage) -> None:
    evil = f"{HOSTILE}{SCRIPT_BREAKER}"
    command(memory_site, "store_memory", content=evil, chat_id="other")
    command(
        memory_site,
        "post_direct_message",
        chat_id="other",
        content=evil,
        source=evil[:60],
        priority=0.5,
    )
    api(memory_site, "/api/chats/other/messages", {"content": "What do you remember?"})
    page = open_chat(open_page, memory_site, "other")
    hostile = page.locator("#sc-memory-list .sc-memory-text", has_text="<img")
    expect(hostile).to_have_text(evil)
    page.locator("#messages .msg--assistant").last.get_by_role(
        "button", name=re.compile("View context")
    ).click()
    memory = page.locator("#context-dialog [data-role='memory']")
    stored = memory.locator('[data-memory-kind="memory"]', has_text="<img")
    expect(stored.locator(".ctx-item__text")).to_have_text(evil)
    direct = memory.locator('[data-memory-kind="direct"]', has_text="<img")
    expect(direct.locator(".ctx-item__text")).to_have_text(evil)
    expect(direct).to_contain_text(f"from {evil[:60]}")
    assert page.locator("img[src='x']").count() == 0  # and no alert fired (open_page checks)
