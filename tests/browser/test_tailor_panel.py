"""The panel inside Tailor's window, in Debian's Chromium: the HTML the adapter sends
(``static/tailor/bridge.js`` then ``render_panel()``) inserted as Tailor's PanelManager inserts
it (``innerHTML``, each script re-created to run), with Tailor's ``window.request`` (JSON-RPC
replies ``{result}`` / ``{error}``) and its events dispatched as ``CustomEvent`` on ``window``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from smart_context.panel import PANEL_ID, render_panel
from smart_context_hosts.tailor.host import bridged
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, sync_playwright
from tests.browser.harness import HarnessServer, running_server, script_json

if CHROMIUM is None or sync_playwright is None:
    pytest.skip("Debian's chromium and Playwright are needed", allow_module_level=True)

TOPICS = [{"label": "Python Asyncio", "count": 2}, {"label": "Paris Trip", "count": 2}]

# Tailor's window, in small: window.request answers as its WebSocket does, setPanelContent
# inserts HTML as its PanelManager does, and events arrive as CustomEvents on window.
TAILOR_PAGE = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<div id="panel-%(id)s"></div>
<script>
window.__calls = [];
%(before)s
window.request = (method, params) => {
  window.__calls.push({method, params});
  if (method === "smart_context.usage_stats") {
    return Promise.resolve({jsonrpc: "2.0", id: 1, error: {code: -32603, message: "no stats"}});
  }
  const active = method === "smart_context.set_filter" ? params.topics : [];
  const result = {status: "success", chat_id: "c1", topics: %(topics)s, total_messages: 4,
    active_topics: active, included_ids: ["m1", "m2"], embedding_search: true,
    memories: [], global_memories: []};
  return Promise.resolve({jsonrpc: "2.0", id: 1, result});
};
const setPanelContent = (id, html) => {
  const el = document.getElementById(`panel-${id}`);
  el.innerHTML = `<div class="scrollable" style="padding: 12px;">${html}</div>`;
  el.querySelectorAll("script").forEach((old) => {
    const fresh = document.createElement("script");
    Array.from(old.attributes).forEach((a) => fresh.setAttribute(a.name, a.value));
    fresh.textContent = old.textContent;
    old.parentNode.replaceChild(fresh, old);
  });
};
setPanelContent(%(id_json)s, %(html)s);
</script></body></html>"""


@pytest.fixture(scope="module")
def server() -> Iterator[HarnessServer]:
    with running_server() as srv:
        yield srv


@pytest.fixture
def page(server: HarnessServer) -> Iterator[Any]:
    yield from open_tailor(server, "")


@pytest.fixture
def page_with_open_chat(server: HarnessServer) -> Iterator[Any]:
    yield from open_tailor(server, 'window.activeChatId = "c3";')


def open_tailor(server: HarnessServer, before: str) -> Iterator[Any]:
    """Tailor's window with the bridged panel; ``before`` runs before the panel is inserted."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        tab = browser.new_page()
        errors: list[Any] = []
        tab.on("pageerror", lambda error: errors.append(error))
        html = bridged(render_panel({"chat_id": "c1", "embedding_search": True}))
        body = TAILOR_PAGE % {
            "id": PANEL_ID,
            "id_json": json.dumps(PANEL_ID),
            "topics": json.dumps(TOPICS),
            "html": script_json(html),
            "before": before,
        }
        tab.goto(server.add_page(f"/tailor{len(before)}", body))
        yield tab
        browser.close()
        assert not errors, f"uncaught errors in the page: {errors}"


def requests(page: Any, method: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = page.evaluate("() => window.__calls")
    return [c["params"] for c in calls if c["method"] == method]


def test_the_panel_talks_to_tailor_through_window_request(page: Any) -> None:
    bubble = page.locator(f"#{PANEL_ID} [data-topic='Python Asyncio']")
    bubble.wait_for()
    assert requests(page, "smart_context.get_topics")[0].get("chat_id") == "c1"
    bubble.click()
    page.wait_for_function(
        "() => window.__calls.some(c => c.method === 'smart_context.set_filter')"
    )
    assert requests(page, "smart_context.set_filter")[-1]["topics"] == ["Python Asyncio"]


def test_tailors_window_events_reach_the_panel(page: Any) -> None:
    page.locator(f"#{PANEL_ID} [data-topic='Paris Trip']").wait_for()
    page.evaluate(
        """() => window.dispatchEvent(new CustomEvent("smart_context.topics_updated", {detail: {
            chat_id: "c1", total_messages: 6,
            topics: [{label: "Garden Roses", count: 3}, {label: "Paris Trip", count: 3}]}}))"""
    )
    page.locator(f"#{PANEL_ID} [data-topic='Garden Roses']").wait_for()


def test_the_panel_follows_the_chat_tailor_opens(page: Any) -> None:
    page.locator(f"#{PANEL_ID} [data-topic='Paris Trip']").wait_for()
    page.evaluate(
        """() => window.dispatchEvent(new CustomEvent("chat:historyLoaded", {
            detail: {chatId: "c2", result: {status: "success", history: []}}}))"""
    )
    page.wait_for_function(
        "() => window.__calls.some(c => c.method === 'smart_context.get_topics'"
        " && c.params.chat_id === 'c2')"
    )
    page.wait_for_function("() => window.SmartContextPanel.state().chat_id === 'c2'")


def test_a_chat_open_when_the_panel_starts_is_followed(page_with_open_chat: Any) -> None:
    page_with_open_chat.wait_for_function(
        "() => window.SmartContextPanel && window.SmartContextPanel.state().chat_id === 'c3'"
    )
    assert requests(page_with_open_chat, "smart_context.get_topics")[-1]["chat_id"] == "c3"
