"""Context items in a real headless Chromium: the panel's context section and "View context".

The real sidecar serves a vault whose rules and references are copied from ``items_vault/``
(with a hostile name and a broken file among them). Chats are written as files: ``plain`` has no
session yet (the vault's ``always`` items), ``recorded`` has replies whose ``request_context``
holds every include mode, scores, tools and an error, and one reply with no record at all.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import HOSTILE, KEY_ENV, llm_table, running_sidecar, write_vault
from tests.browser.test_e2e import ARTIFACTS, SLOW, api, wait_messages
from tests.browser.test_security_headers import RECORD_VIOLATIONS
from tests.openai_server import OpenAIStub

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page
OpenPage = Callable[..., Page]
Site = dict[str, Any]

ITEMS_VAULT = Path(__file__).parent / "items_vault"
EXAMPLE_TOOLS = ["convert_units", "hydration", "time_in", "word_count", "yen_to_euro"]
ALWAYS = ["British Spelling", "Metric Units", HOSTILE, "About Me"]
STAMP = "2026-03-01T09:00:00+00:00"
RECORD = {"mode": "full", "total_messages": 1}
REQUEST_CONTEXT = {
    "items": [
        {"type": "rule", "name": "Metric Units", "include_mode": "always"},
        {"type": "rule", "name": "British Spelling", "include_mode": "always"},
        {"type": "rule", "name": HOSTILE, "include_mode": "always"},
        {"type": "rule", "name": "Concise Answers", "include_mode": "manual"},
        {
            "type": "rule",
            "name": "Baking in Grams",
            "include_mode": "agent",
            "similarity_score": 0.8734,
        },
        {"type": "reference", "name": "About Me", "include_mode": "always"},
        {
            "type": "reference",
            "name": "Sourdough Schedule",
            "include_mode": "expansion",
            "similarity_score": 0.8,
        },
        {"type": "tool", "server_name": "files", "name": "read_file", "include_mode": "manual"},
        {
            "type": "tool",
            "server_name": "example",
            "name": "yen_to_euro",
            "include_mode": "agent",
            "similarity_score": 0.851,
        },
    ],
    "timestamp": STAMP,
}
SUMMARY = (
    "5 rules (1 agent, 3 always, 1 manual), 2 references (1 expansion, 1 always), "
    "2 tools (1 agent, 1 manual)"
)


def message(mid: str, role: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"id": mid, "role": role, "content": content, "created_at": STAMP, **extra}


def recorded_chat() -> dict[str, Any]:
    """Three replies: a full request_context, none at all, and one whose search failed."""
    failed = {
        "items": [{"type": "rule", "name": "British Spelling", "include_mode": "always"}],
        "timestamp": STAMP,
        "error": "Agent selection skipped: the embedding model is not reachable.",
    }
    return {
        "title": "Recorded context",
        "context_items": [{"type": "rule", "name": "Concise Answers", "include_mode": "manual"}],
        "messages": [
            message("u1", "user", "How do I bake sourdough at the weekend?"),
            message(
                "a1",
                "assistant",
                "Feed the starter on Friday.",
                smart_context=RECORD,
                request_context=REQUEST_CONTEXT,
            ),
            message("u2", "user", "And before context items existed?"),
            message("a2", "assistant", "An old reply.", smart_context=RECORD),
            message("u3", "user", "Once more?"),
            message(
                "a3",
                "assistant",
                "Without agent items.",
                smart_context=RECORD,
                request_context=failed,
            ),
        ],
    }


def write_chat(vault: Path, chat_id: str, data: dict[str, Any]) -> None:
    (vault / ".memory" / f"{chat_id}.json").write_text(json.dumps(data), encoding="utf-8")


def chat_file(vault: Path, chat_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((vault / ".memory" / f"{chat_id}.json").read_text())
    return data


@pytest.fixture(scope="module")
def items_site(tmp_path_factory: pytest.TempPathFactory, llm_stub: OpenAIStub) -> Iterator[Site]:
    """The sidecar over a vault with ``items_vault``'s rules and references and two chats."""
    vault = write_vault(tmp_path_factory.mktemp("items"), [], llm_table(llm_stub))
    for folder in ("rules", "references"):
        shutil.copytree(ITEMS_VAULT / folder, vault / folder)
    write_chat(vault, "plain", {"title": "Plain chat", "messages": []})
    write_chat(vault, "recorded", recorded_chat())
    with (vault / ".vault.toml").open("a", encoding="utf-8") as settings:  # a real MCP server
        settings.write(
            f'\n[mcp.servers.example]\ncommand = "{sys.executable}"\n'
            'args = ["-m", "smart_context_hosts.example_mcp"]\ninclude = "agent"\n'
        )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, llm_stub.api_key)
        with running_sidecar(vault) as base:
            listed = vault / ".memory" / "smart_context" / "tools" / "example.json"
            for _ in range(600):  # the server's tools are listed in the background at start
                if listed.exists():
                    break
                time.sleep(0.1)
            yield {"base": base, "vault": vault}


def shot(page: Page, name: str, selector: str | None = None) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    target = page.locator(selector) if selector else page
    target.screenshot(path=str(ARTIFACTS / f"items-{name}.png"))


def session_names(page: Page) -> list[str]:
    names: list[str] = page.eval_on_selector_all(
        "#sc-items-groups [data-item-key] .sc-item-name", "els => els.map(e => e.textContent)"
    )
    return names


def wait_items(page: Page) -> None:
    page.wait_for_function(
        "() => { const s = window.SmartContextPanel.items(); return s.loaded && !s.pending; }"
    )


def open_watched(open_page: OpenPage, url: str, **options: Any) -> Page:
    """``open_page``, loaded again with every Content-Security-Policy violation recorded."""
    page = open_page(url, **options)
    page.add_init_script(RECORD_VIOLATIONS)
    page.reload()
    page.wait_for_function("() => window.SmartContextPanel && window.__cspViolations")
    return page


def no_violations(page: Page) -> None:
    assert page.evaluate("() => window.__cspViolations") == []


def session_row(page: Page, name: str) -> Any:
    return page.locator("#sc-items-groups .sc-item").filter(
        has=page.locator(".sc-item-name", has_text=name)
    )


# ---- the panel ---------------------------------------------------------------------------------


def test_the_panel_lists_the_chats_items_with_badges_and_problems(
    items_site: Site, open_page: OpenPage
) -> None:
    page = open_page(f"{items_site['base']}/?chat=plain")
    wait_items(page)
    section = page.locator("#sc-items")
    expect(section).to_be_visible()
    assert session_names(page) == ["British Spelling", "Metric Units", HOSTILE, "About Me"]
    titles = section.locator(".sc-items-group-title")
    expect(titles).to_have_text(["Rules (3)", "References (1)"])
    spelling = session_row(page, "British Spelling")
    expect(spelling.locator(".sc-item-prefix")).to_have_text("001")
    expect(spelling.locator(".sc-badge")).to_have_text("Always")
    expect(spelling).to_have_attribute("title", "Spelling and dates for every answer")
    hostile = session_row(page, HOSTILE)
    expect(hostile.locator(".sc-item-name")).to_have_text(HOSTILE)
    expect(hostile.locator(".sc-item-prefix")).to_have_text("009")
    assert page.locator("img").count() == 0
    expect(section.locator("#sc-items-problems")).to_contain_text("references/broken.md")
    expect(section.locator("#sc-items-problems")).to_have_attribute(
        "title", "references/broken.md: " + _problem(items_site)
    )
    # the selection settings in effect, as the plugin names them: the vault's, the normal preset
    expect(page.locator("#sc-top-k")).to_have_value("20")
    expect(page.locator("#sc-top-n")).to_have_value("5")
    expect(page.locator("#sc-include-score")).to_have_value("0.70")
    expect(page.locator("#sc-preset")).to_have_value("normal")
    # through the real plugin: a number is this chat's own, a preset sets all three
    page.locator("#sc-top-n").fill("3")
    page.locator("#sc-top-n").press("Enter")
    expect(page.locator("#sc-preset")).to_have_value("")
    page.get_by_label("Selection preset").select_option("conservative")
    expect(page.locator("#sc-top-k")).to_have_value("10")
    expect(page.locator("#sc-include-score")).to_have_value("0.80")
    expect(page.locator("#sc-tools-top-k")).to_have_value("10")  # a preset sets tools too
    page.locator("#sc-tools-top-n").fill("2")  # and tools have numbers of their own
    page.locator("#sc-tools-top-n").press("Enter")
    expect(page.locator("#sc-preset")).to_have_value("")
    expect(page.locator("#sc-top-n")).to_have_value("3")
    stored = chat_file(items_site["vault"], "plain")["context_settings"]
    assert stored["context_top_n"] == 3 and stored["context_tools_top_k"] == 10
    assert stored["context_tools_top_n"] == 2
    shot(page, "panel", "#panels")

    # another chat: its own session
    page.locator('.chat-link[data-chat-id="recorded"]').click()
    expect(page.locator("#sc-items-groups .sc-item")).to_have_count(1)
    expect(session_row(page, "Concise Answers").locator(".sc-badge")).to_have_text("Manual")
    expect(titles).to_have_text(["Rules (1)"])


def _problem(site: Site) -> str:
    listed = api(site["base"], "/api/commands/smart_context.list_items", {})
    message: str = listed["problems"][0]["message"]
    return message


def test_add_by_search_and_remove_update_the_panel_and_the_chat_file(
    items_site: Site, open_page: OpenPage
) -> None:
    page = open_watched(open_page, f"{items_site['base']}/?chat=plain")
    wait_items(page)
    add = page.get_by_role("button", name="Add", exact=True)
    add.click()
    expect(add).to_have_attribute("aria-expanded", "true")
    search = page.locator("#sc-items-search")
    expect(search).to_be_focused()
    choices = page.locator("#sc-items-choices .sc-choice")
    # the vault's enabled items not in the session: the manual and agent ones
    expect(choices).to_have_count(4 + len(EXAMPLE_TOOLS))  # the example server's tools too
    search.fill("migration")  # Postgres Checklist's description
    expect(choices).to_have_count(1)
    expect(choices).to_contain_text("Postgres Checklist")
    shot(page, "panel-add", "#panels")
    page.get_by_role("button", name="Add 004 Postgres Checklist to this chat").click()
    expect(session_row(page, "Postgres Checklist").locator(".sc-badge")).to_have_text("Manual")
    expect(page.locator("#sc-items-choices .sc-choice-empty")).to_have_text("No item matches.")
    wait_items(page)
    stored = chat_file(items_site["vault"], "plain")["context_items"]
    assert {"type": "reference", "name": "Postgres Checklist", "include_mode": "manual"} in stored

    page.get_by_role("button", name="Remove 002 Metric Units from this chat").click()
    expect(session_row(page, "Metric Units")).to_have_count(0)
    wait_items(page)
    stored = chat_file(items_site["vault"], "plain")["context_items"]
    assert "Metric Units" not in [e["name"] for e in stored]
    assert "Postgres Checklist" in [e["name"] for e in stored]

    # a change made elsewhere (the API, another page) arrives as smart_context.items_changed
    api(
        items_site["base"],
        "/api/commands/smart_context.add_item",
        {"chat_id": "plain", "type": "rule", "name": "Concise Answers"},
    )
    expect(session_row(page, "Concise Answers").locator(".sc-badge")).to_have_text("Manual")
    api(
        items_site["base"],
        "/api/commands/smart_context.remove_item",
        {"chat_id": "plain", "type": "rule", "name": "Concise Answers"},
    )
    expect(session_row(page, "Concise Answers")).to_have_count(0)
    assert page.locator("img").count() == 0
    no_violations(page)


# ---- View context --------------------------------------------------------------------------------


def open_context(page: Page, reply_id: str) -> Any:
    reply = page.locator(f'#messages [data-message-id="{reply_id}"]')
    reply.get_by_role("button", name="View context").click()
    dialog = page.locator("#context-dialog")
    expect(dialog).to_be_visible()
    return dialog


def test_view_context_shows_the_summary_the_three_sections_and_an_items_text(
    items_site: Site, open_page: OpenPage
) -> None:
    page = open_watched(open_page, f"{items_site['base']}/?chat=recorded")
    wait_messages(page, 6)
    dialog = open_context(page, "a1")
    expect(dialog.locator(".ctx-ci__summary")).to_have_text(SUMMARY)
    expect(dialog.locator(".ctx-ci__title")).to_have_text(
        ["Rules (5)", "References (2)", "Tools (2)"]
    )
    rules = dialog.locator('[data-group="rule"] .ctx-ci__item')
    # once the vault's details came: by priority, then name
    expect(rules.locator(".ctx-ci__prefix")).to_have_text(["001", "002", "005", "009", "030"])
    expect(rules.locator(".ctx-ci__name")).to_have_text(
        ["British Spelling", "Metric Units", "Concise Answers", HOSTILE, "Baking in Grams"]
    )
    expect(rules.locator(".ci-badge")).to_have_text(
        ["Always", "Always", "Manual", "Always", "Agent"]
    )
    expect(rules.last.locator(".score")).to_have_text("0.87")
    expect(rules.last.locator(".ctx-ci__desc")).to_have_text(
        "Recipes as weights and baker's percentages"
    )
    references = dialog.locator('[data-group="reference"] .ctx-ci__item')
    expect(references.locator(".ci-badge")).to_have_text(["Always", "Expansion"])
    expect(references.last.locator(".score")).to_have_text("0.80")
    tools = dialog.locator('[data-group="tool"] .ctx-ci__item')
    expect(tools.locator(".ctx-ci__prefix")).to_have_text(["example.", "files."])
    expect(tools.locator(".ci-badge")).to_have_text(["Agent", "Manual"])
    expect(tools.first.locator(".score")).to_have_text("0.85")
    shot(page, "view-context", "#context-dialog")

    baking = rules.last
    baking.locator("summary").click()
    expect(baking.locator(".ctx-ci__text")).to_contain_text("Give every bread recipe in grams")
    hostile = rules.nth(3)
    hostile.locator("summary").click()
    expect(hostile.locator(".ctx-ci__text")).to_contain_text("<script>alert(3)</script>")
    expect(hostile.locator(".ctx-ci__desc")).to_have_text("</script><script>alert(2)</script>")
    tools.first.locator("summary").first.click()  # the example server's tool: its parameters
    expect(tools.first.locator(".ctx-ci__text").first).to_contain_text("yen (number, required)")
    tools.first.locator(".ctx-ci__schema summary").click()
    expect(tools.first.locator(".ctx-ci__schema pre")).to_contain_text('"required"')
    tools.last.locator("summary").click()
    expect(tools.last).to_contain_text("This item is no longer in the vault.")
    assert dialog.locator("img, b, script").count() == 0
    # the history section is still there, below
    expect(dialog.locator(".ctx-explain")).to_contain_text("Full history")
    shot(page, "view-context-text", "#context-dialog")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    no_violations(page)


def test_a_reply_without_a_record_says_so_and_an_error_is_shown(
    items_site: Site, open_page: OpenPage
) -> None:
    page = open_page(f"{items_site['base']}/?chat=recorded", scheme="dark")
    wait_messages(page, 6)
    dialog = open_context(page, "a2")
    expect(dialog.locator(".ctx-ci")).to_contain_text("No context data available")
    expect(dialog.locator(".ctx-ci__column")).to_have_count(0)
    page.keyboard.press("Escape")

    dialog = open_context(page, "a3")
    expect(dialog.locator(".ctx-ci__summary")).to_have_text(
        "1 rule (always), no references, no tools"
    )
    expect(dialog.locator(".ctx-ci .ctx-error")).to_have_text(
        "Error: Agent selection skipped: the embedding model is not reachable."
    )
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    shot(page, "panel-dark", "#panels")
    open_context(page, "a1")
    shot(page, "view-context-dark", "#context-dialog")


def test_a_real_reply_records_the_chats_items(items_site: Site, open_page: OpenPage) -> None:
    write_chat(items_site["vault"], "fresh", {"title": "Fresh", "messages": []})
    api(items_site["base"], "/api/chats/fresh/messages", {"content": "What should I bake?"})
    page = open_page(f"{items_site['base']}/?chat=fresh")
    wait_messages(page, 2)
    reply = page.locator("#messages .msg--assistant").last.get_attribute("data-message-id")
    assert reply
    dialog = open_context(page, reply)
    # the session's always items, and whatever agent selection chose for the message
    expect(dialog.locator(".ctx-ci__summary")).to_have_text(
        re.compile(
            r"\d+ rules \((\d+ agent, )?3 always\), \d+ references? \((\d+ agent, )?1 always\)"
        )
    )
    rules = dialog.locator('[data-group="rule"] .ctx-ci__item')
    expect(rules.locator(".ctx-ci__name").first).to_have_text("British Spelling")
    stored = chat_file(items_site["vault"], "fresh")["messages"][-1]["request_context"]
    assert {i["name"] for i in stored["items"]} >= set(ALWAYS)


# ---- the command palette -------------------------------------------------------------------------


def palette_command(page: Page, words: str) -> Any:
    page.keyboard.press("Control+k")
    palette = page.locator("#palette")
    expect(palette).to_be_visible()
    page.keyboard.type(words)
    page.keyboard.press("Enter")
    return palette


def test_the_palette_lists_adds_removes_and_searches_items(
    items_site: Site, open_page: OpenPage
) -> None:
    write_chat(items_site["vault"], "palette", {"title": "Palette", "messages": []})
    page = open_page(f"{items_site['base']}/?chat=palette")
    wait_items(page)

    palette = palette_command(page, "add context item")
    options = palette.locator("[role='option']")
    expect(options.locator(".palette__label")).to_have_text(
        [
            "005 Concise Answers",
            "030 Baking in Grams",
            "003 Sourdough Schedule",
            "004 Postgres Checklist",
            *(f"example.{t}" for t in EXAMPLE_TOOLS),
        ]
    )
    page.keyboard.type("postgres")
    expect(options).to_have_count(1)
    page.keyboard.press("Enter")
    expect(palette).to_be_hidden()
    expect(session_row(page, "Postgres Checklist").locator(".sc-badge")).to_have_text("Manual")

    palette = palette_command(page, "remove context item")
    page.keyboard.type("metric")
    expect(options).to_have_count(1)
    page.keyboard.press("Enter")
    expect(session_row(page, "Metric Units")).to_have_count(0)
    wait_items(page)
    stored = [e["name"] for e in chat_file(items_site["vault"], "palette")["context_items"]]
    assert "Postgres Checklist" in stored and "Metric Units" not in stored

    palette = palette_command(page, "context items")
    expect(options.filter(has_text="Postgres Checklist")).to_have_attribute("aria-checked", "true")
    expect(options.filter(has_text="Metric Units")).to_have_attribute("aria-checked", "false")
    expect(options.filter(has_text=HOSTILE)).to_have_count(1)
    assert page.locator("img").count() == 0
    page.keyboard.press("Escape")

    palette = palette_command(page, "search context items")
    page.keyboard.type("How long should my sourdough rise before I bake the bread?")
    expect(options).to_have_count(1)
    expect(options).to_contain_text("Search: How long should my sourdough")
    page.keyboard.press("Enter")
    found = palette.locator("[role='option'] .palette__hint")
    expect(found.first).to_have_text(re.compile(r"\d\.\d\d · Enter adds it"), timeout=SLOW)
    shot(page, "palette-search", "#palette")
    page.keyboard.press("Escape")


def test_an_edited_item_file_shows_after_the_next_message(
    items_site: Site, open_page: OpenPage
) -> None:
    write_chat(items_site["vault"], "edits", {"title": "Edits", "messages": []})
    page = open_page(f"{items_site['base']}/?chat=edits")
    wait_items(page)
    about = session_row(page, "About Me")
    expect(about).to_have_attribute("title", "Who is asking")
    path = items_site["vault"] / "references" / "about-me.md"
    original = path.read_text(encoding="utf-8")
    try:
        path.write_text(original.replace("Who is asking", "Who asks, and from where"), "utf-8")
        page.locator("#composer-input").fill("Where do I live?")
        page.locator("#composer-input").press("Enter")
        expect(about).to_have_attribute("title", "Who asks, and from where", timeout=SLOW)
    finally:
        path.write_text(original, encoding="utf-8")


def test_the_palette_runs_a_tool_of_the_vaults_mcp_server(
    items_site: Site, open_page: OpenPage
) -> None:
    page = open_page(f"{items_site['base']}/?chat=plain")
    wait_items(page)
    palette = palette_command(page, "run a tool")
    options = palette.locator("[role='option']")
    expect(options.locator(".palette__label")).to_have_text([f"example.{t}" for t in EXAMPLE_TOOLS])
    page.keyboard.type("yen")
    expect(options).to_have_count(1)
    page.keyboard.press("Enter")
    expect(palette.locator("input")).to_have_attribute("placeholder", re.compile("yen"))
    page.keyboard.type('{"yen": 16000')
    expect(options.first).to_contain_text("Not JSON yet")
    page.keyboard.type("}")
    expect(options.first).to_contain_text("Run example.yen_to_euro")
    page.keyboard.press("Enter")
    expect(palette).to_be_hidden()
    expect(page.locator("#toast")).to_contain_text("example.yen_to_euro: ")
    expect(page.locator("#toast")).to_contain_text("100")
