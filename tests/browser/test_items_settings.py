"""The context section's selection settings row, in a real headless Chromium, against a host
played by Playwright routes: the panel's HTTP fallback posts each command, the test answers.

``set_session_settings`` is a command the sidecar may not have yet: the row must work when the
host answers it, and fall back to the defaults, read-only, when the host says it is unknown.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from smart_context.panel import render_panel
from tests.browser.harness import HarnessServer, harness_page, running_server

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Browser = sync_api.Browser
Page = sync_api.Page
Route = sync_api.Route

Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
_PAGES = itertools.count()
TOPICS = {
    "status": "success",
    "chat_id": "chat-1",
    "topics": [],
    "total_messages": 0,
    "active_topics": [],
    "included_ids": [],
    "embedding_search": True,
}
ROWS = [
    {
        "type": "rule",
        "name": "Metric Units",
        "server_name": None,
        "description": "Units",
        "priority": "002",
        "include": "always",
        "enabled": True,
        "in_session": True,
        "include_mode": "always",
    },
    {
        "type": "tool",
        "name": "read_file",
        "server_name": "files",
        "description": "Read a file",
        "priority": "999",
        "include": "agent",
        "enabled": True,
        "in_session": True,
        "include_mode": "manual",
    },
]


@pytest.fixture(scope="module")
def server() -> Iterator[HarnessServer]:
    with running_server() as srv:
        yield srv


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 400, "height": 800}, reduced_motion="reduce")
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


class Host:
    """Answers the panel's commands; ``answers[name]`` may replace one; records each call."""

    def __init__(self, listed: dict[str, Any]) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answers: dict[str, Answer] = {
            "smart_context.get_topics": lambda args: (200, TOPICS),
            "smart_context.list_items": lambda args: (200, listed),
        }

    def route(self, route: Route) -> None:
        name = route.request.url.rsplit("/", 1)[-1]
        args = json.loads(route.request.post_data or "{}")
        self.calls.append((name, args))
        answer = self.answers.get(name)
        status, body = (
            answer(args)
            if answer
            else (404, {"status": "error", "error": f"Unknown command {name!r}."})
        )
        route.fulfill(status=status, json=body)

    def called(self, name: str) -> list[dict[str, Any]]:
        return [args for called, args in self.calls if called == name]


def open_panel(page: Page, server: HarnessServer, host: Host) -> None:
    page.route("**/api/commands/*", host.route)
    html = harness_page(render_panel({}), chat_id="chat-1")
    page.goto(server.add_page(f"/items-{next(_PAGES)}", html))
    page.wait_for_function(
        "() => { const s = window.SmartContextPanel.items(); return s.loaded && !s.pending; }"
    )


def values(page: Page) -> list[str]:
    return [
        page.locator(f"#{i}").input_value() for i in ("sc-top-k", "sc-top-n", "sc-include-score")
    ]


def test_a_number_and_a_preset_go_to_the_host_and_its_effective_values_show(
    page: Page, server: HarnessServer
) -> None:
    host = Host({"status": "success", "items": ROWS, "problems": []})
    effective = {
        "context_top_k": 20,
        "context_top_n": 7,
        "context_include_score": 0.7,
        "context_expansion_depth": 0,
    }
    host.answers["smart_context.set_session_settings"] = lambda args: (
        200,
        {"status": "success", "settings": effective | args["settings"]},
    )
    open_panel(page, server, host)
    # the tool shows as server.tool, with the session's mode
    tool = page.locator("#sc-items .sc-item[data-type='tool']")
    expect(tool.locator(".sc-item-prefix")).to_have_text("files.")
    expect(tool.locator(".sc-badge")).to_have_text("Manual")
    expect(page.locator("#sc-items .sc-items-group-title")).to_have_text(["Rules (1)", "Tools (1)"])
    assert values(page) == ["20", "5", "0.70"]

    top_n = page.get_by_role("group", name="Rules and references").get_by_label("Top N")
    top_n.fill("7")
    top_n.press("Enter")
    page.wait_for_function("() => !window.SmartContextPanel.items().pending")
    expect(page.locator("#sc-settings-note")).to_be_hidden()
    assert host.called("smart_context.set_session_settings") == [
        {"chat_id": "chat-1", "settings": {"context_top_n": 7}}
    ]
    page.locator("#sc-items-heading").click()  # leave the field: it shows what is in effect
    assert values(page) == ["20", "7", "0.70"]

    effective = {
        "context_top_k": 40,
        "context_top_n": 8,
        "context_include_score": 0.6,
        "context_expansion_depth": 1,
    }
    page.get_by_label("Selection preset").select_option("aggressive")
    expect(page.locator("#sc-settings-note")).to_have_text("Expansion: 1 pass.")
    assert values(page) == ["40", "8", "0.60"]
    assert page.get_by_label("Selection preset").input_value() == "aggressive"
    assert host.called("smart_context.set_session_settings")[-1]["settings"] == {
        "preset": "aggressive"
    }

    page.get_by_role("group", name="Rules and references").get_by_label("Score").fill(
        "1.5"
    )  # out of range: back to the value in effect
    page.get_by_role("group", name="Rules and references").get_by_label("Score").press("Enter")
    assert len(host.called("smart_context.set_session_settings")) == 2
    page.locator("#sc-items-heading").click()
    assert values(page)[2] == "0.60"


def test_a_host_without_the_command_leaves_the_defaults_read_only(
    page: Page, server: HarnessServer
) -> None:
    host = Host({"status": "success", "items": ROWS, "problems": []})
    open_panel(page, server, host)
    top_k = page.get_by_role("group", name="Rules and references").get_by_label("Top K")
    top_k.fill("30")
    top_k.press("Enter")
    expect(top_k).to_be_disabled()
    expect(page.get_by_label("Selection preset")).to_be_disabled()
    expect(page.locator("#sc-settings-note")).to_contain_text("the vault's defaults apply")
    page.locator("#sc-items-heading").click()
    assert values(page) == ["20", "5", "0.70"]
    expect(page.locator("#sc-items-error")).to_be_hidden()


def test_settings_listed_with_the_items_are_shown(page: Page, server: HarnessServer) -> None:
    settings = {
        "context_top_k": 12,
        "context_top_n": 3,
        "context_include_score": 0.85,
        "context_expansion_depth": 0,
        "preset": "conservative",
    }
    host = Host({"status": "success", "items": ROWS, "problems": [], "settings": settings})
    open_panel(page, server, host)
    assert values(page) == ["12", "3", "0.85"]
    assert page.get_by_label("Selection preset").input_value() == "conservative"
    expect(page.locator("#sc-settings-note")).to_be_hidden()


def test_a_host_without_context_items_shows_no_section(page: Page, server: HarnessServer) -> None:
    host = Host({})
    del host.answers["smart_context.list_items"]  # unknown: the host has no context items
    page.route("**/api/commands/*", host.route)
    html = harness_page(render_panel({}), chat_id="chat-1")
    page.goto(server.add_page(f"/items-{next(_PAGES)}", html))
    page.wait_for_function("() => window.SmartContextPanel.items().available === false")
    expect(page.locator("#sc-items")).to_be_hidden()
