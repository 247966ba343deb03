"""The panel in a real headless Chromium, driven by Playwright, against a fake sidecar.

Needs Debian's ``chromium`` on PATH (never a downloaded browser); skipped when it is absent.
Screenshots for a person to judge go to ``test-artifacts/``.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smart_context.panel import render_panel
from tests.browser.harness import HarnessServer, chat_fixture, harness_page, running_server

try:
    from playwright.sync_api import Browser, Dialog, Error, Page, Route, sync_playwright
except ImportError:  # pragma: no cover - playwright is a test-only dependency
    pytest.skip("playwright is not installed", allow_module_level=True)

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT_BREAKER = "</script><script>alert(2)</script>"
TOPICS = [
    ("LangGraph", 9),
    ("Vector Search", 6),
    ("Python Async", 4),
    ("Debugging", 2),
    ("Testing", 1),
]
CHATS: dict[str, Any] = {
    "chat-1": chat_fixture(TOPICS, sticky_ids=["m1"], total=14),
    "chat-2": chat_fixture([("Sourdough", 5), ("Hydration", 3), ("Oven Spring", 2)], total=8),
    "chat-3": chat_fixture([], total=2),
    "hostile": chat_fixture([(HOSTILE, 3), (SCRIPT_BREAKER, 2), ("Plain", 1)], total=5),
}
_PAGE_NUMBERS = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[HarnessServer]:
    with running_server() as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 900, "height": 760}, reduced_motion="reduce")
    tab = context.new_page()
    errors: list[Error] = []

    def on_error(error: Error) -> None:
        errors.append(error)

    tab.on("pageerror", on_error)
    yield tab
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def open_panel(
    page: Page,
    server: HarnessServer,
    *,
    chat_id: str | None = "chat-1",
    initial: dict[str, Any] | None = None,
    delay: int = 0,
    fake: bool = True,
) -> None:
    """Load a harness page with the panel and wait until its first load has settled."""
    config = {"chats": CHATS, "current": chat_id, "delay": delay} if fake else None
    html = harness_page(render_panel(initial), chat_id=chat_id, fake=config)
    page.goto(server.add_page(f"/panel-{next(_PAGE_NUMBERS)}", html))
    settle(page)


def settle(page: Page) -> None:
    page.wait_for_function(
        "() => window.SmartContextPanel && !window.SmartContextPanel.state().pending"
    )


def bubble(page: Page, label: str) -> Any:
    return page.locator("#smart-context-panel [data-topic]").filter(has_text=label).first


def status(page: Page) -> str:
    return page.locator("#sc-status").inner_text()


def calls(page: Page, name: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = page.evaluate("(n) => window.__fake.commands(n)", name)
    return result


def labels(page: Page) -> list[str]:
    result: list[str] = page.eval_on_selector_all(
        "#smart-context-panel [data-topic]", "els => els.map(e => e.dataset.topic)"
    )
    return result


def test_bubbles_carry_the_page_hooks(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    assert sorted(labels(page)) == sorted(label for label, _ in TOPICS)
    for label, count in TOPICS:
        node = bubble(page, label)
        assert node.get_attribute("role") == "button"
        assert node.get_attribute("aria-pressed") == "false"
        assert node.get_attribute("tabindex") == "0"
        noun = "message" if count == 1 else "messages"
        assert node.get_attribute("aria-label") == f"{label}, {count} {noun}"
    assert calls(page, "smart_context.get_topics")[0]["args"] == {"chat_id": "chat-1"}
    assert status(page) == "All messages in context"
    assert page.locator("#sc-similarity-toggle").is_checked()
    assert page.get_by_label("Similarity filter").count() == 1


def test_sticky_topic_is_a_locked_indicator_not_a_bubble(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    sticky = page.locator("#smart-context-panel [data-sticky-count]")
    assert sticky.get_attribute("data-sticky-count") == "1"
    assert sticky.is_visible()
    assert "Instructions & Preferences" in sticky.inner_text()
    assert "Instructions & Preferences" not in labels(page)
    page.evaluate(
        "() => document.dispatchEvent(new CustomEvent('sidecar:chat_selected', "
        "{detail: {chat_id: 'chat-2'}}))"
    )
    settle(page)
    assert sticky.get_attribute("data-sticky-count") == "0"
    assert not sticky.is_visible()


def _boxes(page: Page) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = page.eval_on_selector_all(
        "#smart-context-panel [data-topic]",
        """els => Object.fromEntries(els.map(e => {
            const r = e.getBoundingClientRect();
            return [e.dataset.topic, {x: r.x, y: r.y, w: r.width, h: r.height}];
        }))""",
    )
    return result


def test_bubble_area_is_proportional_to_count_and_bubbles_do_not_overlap(
    page: Page, server: HarnessServer
) -> None:
    open_panel(page, server)
    boxes = _boxes(page)
    counts = dict(TOPICS)
    per_message = [math.pi * (b["w"] / 2) ** 2 / counts[label] for label, b in boxes.items()]
    assert max(per_message) / min(per_message) == pytest.approx(1.0, abs=0.03)
    for b in boxes.values():
        assert b["w"] == pytest.approx(b["h"], abs=0.5)
    for (a_label, a), (b_label, b) in itertools.combinations(boxes.items(), 2):
        ax, ay, bx, by = (
            a["x"] + a["w"] / 2,
            a["y"] + a["h"] / 2,
            b["x"] + b["w"] / 2,
            b["y"] + b["h"] / 2,
        )
        gap = math.hypot(ax - bx, ay - by) - (a["w"] + b["w"]) / 2
        assert gap >= 2, f"{a_label!r} and {b_label!r} overlap (gap {gap:.1f}px)"
    panel = page.locator("#smart-context-panel").bounding_box()
    assert panel is not None
    for b in boxes.values():
        assert panel["x"] <= b["x"] and b["x"] + b["w"] <= panel["x"] + panel["width"]


def test_clicking_a_bubble_filters_and_dims_the_others(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    page.evaluate("() => { window.__domEvents.length = 0; }")
    bubble(page, "Python Async").click()
    settle(page)
    assert calls(page, "smart_context.set_filter")[-1]["args"] == {
        "topics": ["Python Async"],
        "chat_id": "chat-1",
    }
    assert bubble(page, "Python Async").get_attribute("aria-pressed") == "true"
    assert status(page) == "5 of 14 messages in context"
    opacity = "e => parseFloat(getComputedStyle(e).opacity)"
    assert bubble(page, "Python Async").evaluate(opacity) == pytest.approx(1.0)
    for other in ("LangGraph", "Debugging", "Testing"):
        assert bubble(page, other).evaluate(opacity) == pytest.approx(0.4, abs=0.02)
    events = page.evaluate("() => window.__domEvents")
    assert events[-1] == {
        "chat_id": "chat-1",
        "active_topics": ["Python Async"],
        "included_ids": ["m1", "m7", "m8", "m9", "m10"],
        "total_messages": 14,
        "embedding_search": True,
    }
    clear = page.locator("#sc-clear")
    assert clear.is_visible()
    clear.click()
    settle(page)
    assert calls(page, "smart_context.set_filter")[-1]["args"]["topics"] == []
    assert status(page) == "All messages in context"
    assert bubble(page, "LangGraph").evaluate(opacity) == pytest.approx(1.0)
    assert not clear.is_visible()


def test_keyboard_reaches_and_toggles_bubbles(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    page.locator("#sc-similarity-toggle").focus()
    page.keyboard.press("Tab")
    focused = page.evaluate("() => document.activeElement.dataset.topic")
    assert focused == "LangGraph"  # the largest topic comes first
    page.keyboard.press("Enter")
    settle(page)
    assert bubble(page, "LangGraph").get_attribute("aria-pressed") == "true"
    page.keyboard.press(" ")
    settle(page)
    assert bubble(page, "LangGraph").get_attribute("aria-pressed") == "false"
    topics_sent = [c["args"]["topics"] for c in calls(page, "smart_context.set_filter")]
    assert topics_sent == [["LangGraph"], []]
    focused = "() => document.activeElement.dataset.topic"
    page.keyboard.press("ArrowRight")
    assert page.evaluate(focused) == "Vector Search"
    page.keyboard.press("End")
    assert page.evaluate(focused) == "Testing"
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == "LangGraph"  # wraps around
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(focused) == "Testing"


def test_similarity_off_makes_the_cloud_a_view_only(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    bubble(page, "Debugging").click()
    settle(page)
    page.locator("label[for='sc-similarity-toggle']").click()
    settle(page)
    assert calls(page, "smart_context.set_similarity_mode")[-1]["args"] == {"enabled": False}
    assert not page.locator("#sc-similarity-toggle").is_checked()
    assert status(page) == "All messages in context"
    before = len(calls(page, "smart_context.set_filter"))
    node = bubble(page, "LangGraph")
    assert node.get_attribute("aria-disabled") == "true"
    assert node.get_attribute("tabindex") == "-1"
    node.click(force=True)
    node.press("Enter")
    settle(page)
    assert len(calls(page, "smart_context.set_filter")) == before
    assert node.get_attribute("aria-pressed") == "false"
    opacity = node.evaluate("e => parseFloat(getComputedStyle(e).opacity)")
    assert opacity == pytest.approx(1.0)
    assert page.evaluate("() => window.__domEvents.at(-1).active_topics") == []

    page.locator("#sc-similarity-toggle").check()
    settle(page)
    assert node.get_attribute("tabindex") == "0"
    assert node.get_attribute("aria-disabled") is None
    assert status(page) == "3 of 14 messages in context"  # the stored filter is back


def test_topics_updated_event_rerenders_the_cloud(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    page.evaluate("() => { document.querySelector('[data-topic=\"LangGraph\"]').__kept = 1; }")
    new_topics = [
        {"label": "LangGraph", "count": 11},
        {"label": "Vector Search", "count": 6},
        {"label": "Embeddings", "count": 3},
        {"label": "Instructions & Preferences", "sticky": True, "message_ids": ["m1", "m2"]},
    ]
    page.evaluate(
        "(t) => window.__fake.emit('smart_context.topics_updated', "
        "{chat_id: 'chat-2', topics: [{label: 'Elsewhere', count: 3}], total_messages: 3})",
        new_topics,
    )
    assert "Elsewhere" not in labels(page)  # another chat's topics are ignored
    page.evaluate(
        "(t) => window.__fake.emit('smart_context.topics_updated', "
        "{chat_id: 'chat-1', topics: t, total_messages: 16})",
        new_topics,
    )
    assert sorted(labels(page)) == ["Embeddings", "LangGraph", "Vector Search"]
    assert bubble(page, "LangGraph").evaluate("e => e.__kept") == 1  # keyed: same element moved
    assert bubble(page, "LangGraph").get_attribute("aria-label") == "LangGraph, 11 messages"
    assert page.locator("[data-sticky-count]").get_attribute("data-sticky-count") == "2"


def test_host_filter_changed_event_updates_selection_and_is_redispatched(
    page: Page, server: HarnessServer
) -> None:
    open_panel(page, server)
    payload = {
        "chat_id": "chat-1",
        "active_topics": ["Vector Search"],
        "included_ids": ["m1", "m4", "m5"],
        "total_messages": 14,
    }
    page.evaluate("(p) => window.__fake.emit('smart_context.filter_changed', p)", payload)
    assert bubble(page, "Vector Search").get_attribute("aria-pressed") == "true"
    assert status(page) == "3 of 14 messages in context"
    last = page.evaluate("() => window.__domEvents.at(-1)")
    assert last["included_ids"] == ["m1", "m4", "m5"]
    assert last["active_topics"] == ["Vector Search"]


def test_hostile_labels_render_as_text(page: Page, server: HarnessServer) -> None:
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    hostile_topics = CHATS["hostile"]["topics"]
    open_panel(
        page, server, chat_id="hostile", initial={"chat_id": "hostile", "topics": hostile_topics}
    )
    assert sorted(labels(page)) == sorted([HOSTILE, SCRIPT_BREAKER, "Plain"])
    assert page.locator("#smart-context-panel img").count() == 0
    assert page.locator("#smart-context-panel script").count() == 0
    texts = page.eval_on_selector_all(
        "#smart-context-panel [data-topic] .sc-bubble-label", "els => els.map(e => e.textContent)"
    )
    assert HOSTILE in texts and SCRIPT_BREAKER in texts
    bubble(page, "Plain").click()
    settle(page)
    page.wait_for_timeout(100)
    assert dialogs == []
    assert calls(page, "smart_context.set_filter")[-1]["args"]["topics"] == ["Plain"]


def test_an_error_is_shown_and_the_previous_state_kept(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    page.evaluate("() => { window.__fake.failNext = 'Embedding service unreachable: start it.'; }")
    bubble(page, "Testing").click()
    settle(page)
    alert = page.get_by_role("alert")
    assert alert.is_visible()
    assert "Embedding service unreachable: start it." in alert.inner_text()
    assert bubble(page, "Testing").get_attribute("aria-pressed") == "false"
    assert status(page) == "All messages in context"
    bubble(page, "Testing").click()
    settle(page)
    assert not alert.is_visible()
    assert bubble(page, "Testing").get_attribute("aria-pressed") == "true"


def test_clicks_while_a_command_is_in_flight_all_count(page: Page, server: HarnessServer) -> None:
    open_panel(page, server, delay=250)
    bubble(page, "LangGraph").click()
    bubble(page, "Debugging").click()  # before the first reply arrives
    assert bubble(page, "LangGraph").get_attribute("aria-pressed") == "true"
    assert bubble(page, "Debugging").get_attribute("aria-pressed") == "true"
    settle(page)
    assert page.evaluate("() => window.SmartContextPanel.state().active_topics") == [
        "LangGraph",
        "Debugging",
    ]
    assert calls(page, "smart_context.set_filter")[-1]["args"]["topics"] == [
        "LangGraph",
        "Debugging",
    ]


def test_chat_switch_and_empty_states(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    select = (
        "(id) => document.dispatchEvent(new CustomEvent('sidecar:chat_selected', "
        "{detail: {chat_id: id}}))"
    )
    page.evaluate(select, "chat-2")
    settle(page)
    assert sorted(labels(page)) == ["Hydration", "Oven Spring", "Sourdough"]
    assert calls(page, "smart_context.get_topics")[-1]["args"] == {"chat_id": "chat-2"}
    page.evaluate(select, "chat-3")
    settle(page)
    assert labels(page) == []
    assert "Topics appear after the first replies" in page.locator("#sc-empty").inner_text()
    page.evaluate(select, None)
    settle(page)
    assert status(page) == "No chat open"
    assert "Open a chat" in page.locator("#sc-empty").inner_text()


def test_message_added_refreshes_the_topics(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    before = len(calls(page, "smart_context.get_topics"))
    page.evaluate(
        "() => document.dispatchEvent(new CustomEvent('sidecar:message_added', "
        "{detail: {chat_id: 'chat-1'}}))"
    )
    page.wait_for_function(
        "(n) => window.__fake.commands('smart_context.get_topics').length > n", arg=before
    )


def test_no_chat_open_shows_a_friendly_empty_state(page: Page, server: HarnessServer) -> None:
    config = {"chats": CHATS, "current": None}
    html = harness_page(render_panel(), chat_id="", fake=config)
    page.goto(server.add_page(f"/panel-{next(_PAGE_NUMBERS)}", html))
    settle(page)
    assert status(page) == "No chat open"
    assert page.locator("#sc-empty").inner_text() == "Open a chat to see its topics."
    assert calls(page, "smart_context.get_topics") == []


def test_without_an_announced_chat_the_panel_asks_the_host(
    page: Page, server: HarnessServer
) -> None:
    html = harness_page(render_panel(), chat_id=None, fake={"chats": CHATS, "current": "chat-2"})
    page.goto(server.add_page(f"/panel-{next(_PAGE_NUMBERS)}", html))
    settle(page)
    assert calls(page, "smart_context.get_topics")[0]["args"] == {}
    assert sorted(labels(page)) == ["Hydration", "Oven Spring", "Sourdough"]
    bubble(page, "Hydration").click()
    settle(page)
    assert calls(page, "smart_context.set_filter")[-1]["args"]["chat_id"] == "chat-2"


_PANEL_BACKGROUND = (
    "() => getComputedStyle(document.getElementById('smart-context-panel')).backgroundColor"
)
LIGHT_BACKGROUND = "rgb(251, 251, 253)"
DARK_BACKGROUND = "rgb(21, 23, 28)"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_data_theme_overrides_the_system_scheme(
    browser: Browser, server: HarnessServer, scheme: str
) -> None:
    context = browser.new_context(color_scheme=scheme)  # type: ignore[arg-type]
    try:
        tab = context.new_page()
        open_panel(tab, server)
        system = DARK_BACKGROUND if scheme == "dark" else LIGHT_BACKGROUND
        assert tab.evaluate(_PANEL_BACKGROUND) == system
        tab.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
        assert tab.evaluate(_PANEL_BACKGROUND) == DARK_BACKGROUND
        tab.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
        assert tab.evaluate(_PANEL_BACKGROUND) == LIGHT_BACKGROUND
        tab.evaluate(
            "() => { document.getElementById('smart-context-panel').dataset.theme = 'dark'; }"
        )
        assert tab.evaluate(_PANEL_BACKGROUND) == DARK_BACKGROUND  # the panel's own attribute wins
    finally:
        context.close()


def test_javascript_api_for_the_command_palette(page: Page, server: HarnessServer) -> None:
    open_panel(page, server)
    result = page.evaluate("() => window.SmartContextPanel.setFilter(['Vector Search'])")
    assert result["status"] == "success"
    state = page.evaluate("() => window.SmartContextPanel.state()")
    assert state["active_topics"] == ["Vector Search"]
    assert state["filter_active"] is True
    assert state["chat_id"] == "chat-1"
    result = page.evaluate("() => window.SmartContextPanel.setSimilarityMode(false)")
    assert result == {"status": "success", "embedding_search": False}
    settle(page)
    assert page.evaluate("() => window.SmartContextPanel.state().embedding_search") is False
    topics = page.evaluate("() => window.SmartContextPanel.getTopics()")
    assert [t["label"] for t in topics["topics"]][:2] == ["LangGraph", "Vector Search"]


def test_without_a_host_bridge_the_panel_uses_http_and_server_sent_events(
    page: Page, server: HarnessServer
) -> None:
    chat = CHATS["chat-2"]

    def handle(name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name != "smart_context.get_topics":
            return {"status": "error", "error": f"unexpected {name}"}
        return {
            "status": "success",
            "chat_id": args.get("chat_id"),
            "topics": chat["topics"],
            "total_messages": len(chat["messages"]),
            "active_topics": [],
            "included_ids": chat["messages"],
            "embedding_search": True,
        }

    server.command_handler = handle
    open_panel(page, server, chat_id="chat-2", fake=False)
    assert ("smart_context.get_topics", {"chat_id": "chat-2"}) in server.command_calls
    assert sorted(labels(page)) == ["Hydration", "Oven Spring", "Sourdough"]
    server.wait_for_stream()  # the page's EventSource, an earlier page's gone
    server.publish(
        "smart_context.topics_updated",
        {"chat_id": "chat-2", "topics": [{"label": "Levain", "count": 4}], "total_messages": 9},
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-topic]')]"
        ".some(e => e.dataset.topic === 'Levain')"
    )
    assert labels(page) == ["Levain"]


def test_the_http_fallback_is_the_shared_bridge_under_api_base(
    page: Page, server: HarnessServer
) -> None:
    """Without a host bridge the panel installs app/bridge.js's as ``window.sidecar``."""
    chat = CHATS["chat-2"]
    posted: list[str] = []

    def command(route: Route) -> None:
        posted.append(route.request.url.removeprefix(server.base_url))
        result = {
            "status": "success",
            "chat_id": "chat-2",
            "topics": chat["topics"],
            "total_messages": len(chat["messages"]),
            "active_topics": [],
            "included_ids": chat["messages"],
            "embedding_search": True,
        }
        route.fulfill(json=result)

    page.route("**/mounted/api/commands/*", command)
    html = harness_page(render_panel({"api_base": "/mounted/"}), chat_id="chat-2")
    page.goto(server.add_page(f"/panel-{next(_PAGE_NUMBERS)}", html))
    settle(page)
    assert posted[0] == "/mounted/api/commands/smart_context.get_topics"
    # then the chat's context items, memories and usage, through the same bridge
    later = {"list_items", "list_memories", "usage_stats"}
    assert set(posted) <= {posted[0], *(f"/mounted/api/commands/smart_context.{n}" for n in later)}
    assert sorted(labels(page)) == ["Hydration", "Oven Spring", "Sourdough"]
    bridge = "() => ['command', 'on', 'lastFilter', 'chatId'].map((k) => typeof window.sidecar[k])"
    assert page.evaluate(bridge) == ["function"] * 4
    assert page.evaluate("() => window.sidecar.chatId()") == "chat-2"


_GLIDE_JS = """async (topics) => {
    const node = document.querySelector("#smart-context-panel [data-topic]");
    const x = () => new DOMMatrix(getComputedStyle(node).transform).m41;
    const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    const start = x();
    window.__fake.emit("smart_context.topics_updated",
                       {chat_id: "chat-1", topics: topics, total_messages: 20});
    await wait(150);
    const middle = x();
    const leaving = document.querySelectorAll("#smart-context-panel .sc-leaving").length;
    await wait(900);
    return {label: node.dataset.topic, start, middle, end: x(), leaving,
            left: document.querySelectorAll("#smart-context-panel .sc-leaving").length};
}"""


def test_bubbles_glide_to_their_new_place(browser: Browser, server: HarnessServer) -> None:
    context = browser.new_context(viewport={"width": 900, "height": 760})  # motion allowed
    try:
        tab = context.new_page()
        open_panel(tab, server)
        moved = [
            {"label": "Vector Search", "count": 12},
            {"label": "Embeddings", "count": 5},
            {"label": "LangGraph", "count": 3},
        ]
        seen = tab.evaluate(_GLIDE_JS, moved)
        assert seen["label"] == "LangGraph"
        low, high = sorted([seen["start"], seen["end"]])
        assert high - low > 20, seen  # the layout really moved it
        assert low < seen["middle"] < high, seen  # and it was caught in between: a glide
        assert seen["leaving"] == 3 and seen["left"] == 0, seen  # old topics fade, then go
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots(browser: Browser, server: HarnessServer, scheme: str) -> None:
    """Pictures of the panel for a person to judge (not compared with anything)."""
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(
        viewport={"width": 900, "height": 760},
        color_scheme=scheme,  # type: ignore[arg-type]
        reduced_motion="reduce",
        device_scale_factor=2,
    )
    try:
        tab = context.new_page()
        open_panel(tab, server)
        panel = tab.locator("#panel-host")
        panel.screenshot(path=str(ARTIFACTS / f"panel-{scheme}.png"))
        bubble(tab, "Python Async").click()
        bubble(tab, "Debugging").click()
        settle(tab)
        tab.locator("#sc-similarity-toggle").focus()
        tab.keyboard.press("Tab")
        panel.screenshot(path=str(ARTIFACTS / f"panel-{scheme}-filtered.png"))
        tab.evaluate("() => window.SmartContextPanel.setSimilarityMode(false)")
        settle(tab)
        panel.screenshot(path=str(ARTIFACTS / f"panel-{scheme}-similarity-off.png"))
        tab.evaluate(
            "() => document.dispatchEvent(new CustomEvent('sidecar:chat_selected', "
            "{detail: {chat_id: 'chat-3'}}))"
        )
        settle(tab)
        panel.screenshot(path=str(ARTIFACTS / f"panel-{scheme}-empty.png"))
        assert (ARTIFACTS / f"panel-{scheme}.png").stat().st_size > 0
    finally:
        context.close()
