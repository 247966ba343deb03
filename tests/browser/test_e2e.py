"""The whole reference sidecar in a real headless Chromium: page, panel, plugin, HTTP API.

Each test drives the real Starlette app (uvicorn in a thread) with the real plugin on its offline
embedding model, over a vault built in ``tmp_path`` (see ``conftest.py``). Replies come from the
loopback OpenAI-compatible stub, or from no model at all. Screenshots for a person to judge go to
``test-artifacts/``; the highlight latency on a 1,000-message chat is printed (run with ``-s``).
"""

from __future__ import annotations

import json
import re
import statistics
import time
import urllib.request
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.openai_server import OpenAIStub

# Playwright drives the browser; without it (or without chromium, see conftest.py) these skip.
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SLOW = 60_000  # ms: the first filter of a chat loads the local model and embeds the chat
COLD = 300_000  # ms: embedding 1,000 messages on a busy two-core machine

Site = dict[str, Any]
OpenPage = Callable[..., Page]


def api(base: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A JSON request to the sidecar, as curl would send it."""
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if body is None else "POST"
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def shot(page: Page, name: str, selector: str | None = None) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    target = page.locator(selector) if selector else page
    target.screenshot(path=str(ARTIFACTS / f"e2e-{name}.png"))


# ---- page helpers --------------------------------------------------------------------------------


def bubble(page: Page, label: str) -> Any:
    return page.locator(f'#smart-context-panel [data-topic="{label}"]')


def highlighted(page: Page) -> list[str]:
    result: list[str] = page.eval_on_selector_all(
        "#messages [data-in-context]", "els => els.map(e => e.dataset.messageId)"
    )
    return result


def wait_messages(page: Page, n: int) -> None:
    expect(page.locator("#messages [data-message-id]")).to_have_count(n, timeout=SLOW)


def in_context_status(page: Page) -> tuple[int, int]:
    status = page.locator("#sc-status")
    expect(status).to_have_text(re.compile(r"\d+ of \d+ messages in context"), timeout=SLOW)
    match = re.search(r"(\d+) of (\d+)", status.inner_text())
    assert match
    return int(match.group(1)), int(match.group(2))


def wait_settled(page: Page) -> None:
    page.wait_for_function("() => !window.SmartContextPanel.state().pending", timeout=SLOW)


# ---- tests ---------------------------------------------------------------------------------------


def test_bubble_filters_and_highlights_then_state_survives_reload(
    site: Site, open_page: OpenPage
) -> None:
    page = open_page(f"{site['base']}/?chat=subjects")
    wait_messages(page, 31)
    expect(page.locator("#smart-context-panel [data-topic]")).to_have_count(3)
    expect(page.locator("body")).to_have_attribute("data-chat-id", "subjects")
    assert highlighted(page) == []
    shot(page, "chat-light")

    bubble(page, "Sourdough Baking").click()
    expect(bubble(page, "Sourdough Baking")).to_have_attribute("aria-pressed", "true")
    n, total = in_context_status(page)
    assert total == 31
    marked = highlighted(page)
    assert len(marked) == n
    sourdough = set(site["ids"]["Sourdough Baking"])
    assert "m00" in marked, "the sticky instruction is always in context"
    last_turn = {"m29", "m30"}  # the turn the next message follows goes whatever its topic
    assert last_turn <= set(marked)
    off_topic = set(marked) - {"m00"} - last_turn
    assert off_topic <= sourdough, f"off-topic messages highlighted: {marked}"
    assert len(set(marked) & sourdough) >= 5
    # The highlight is the server's decision, not the page's guess.
    server_ids = api(
        site["base"], "/api/commands/smart_context.get_topics", {"chat_id": "subjects"}
    )
    assert set(server_ids["included_ids"]) == set(marked)
    expect(page.locator("#filter-summary")).to_contain_text("Sourdough Baking")
    page.locator("#message-scroller").evaluate("el => { el.scrollTop = 0; }")
    shot(page, "chat-filtered")
    shot(page, "panel-filtered", "#panels")

    page.reload()
    wait_messages(page, 31)
    expect(bubble(page, "Sourdough Baking")).to_have_attribute("aria-pressed", "true", timeout=SLOW)
    page.wait_for_function(
        f"() => document.querySelectorAll('#messages [data-in-context]').length === {n}"
    )
    assert set(highlighted(page)) == set(marked)

    toggle = page.locator("#sc-similarity-toggle")
    expect(toggle).to_be_checked()
    toggle.click()
    expect(toggle).not_to_be_checked()
    wait_settled(page)
    page.wait_for_function("() => !document.querySelector('#messages [data-in-context]')")
    page.reload()
    wait_messages(page, 31)
    expect(page.locator("#sc-similarity-toggle")).not_to_be_checked()
    assert "embedding_search = false" in (site["vault"] / ".vault.toml").read_text()

    page.locator("#sc-similarity-toggle").click()
    expect(page.locator("#sc-similarity-toggle")).to_be_checked()
    page.wait_for_function(
        f"() => document.querySelectorAll('#messages [data-in-context]').length === {n}",
        timeout=SLOW,
    )
    assert set(highlighted(page)) == set(marked)

    dark = open_page(f"{site['base']}/?chat=subjects", scheme="dark")
    dark.wait_for_function(
        f"() => document.querySelectorAll('#messages [data-in-context]').length === {n}",
        timeout=SLOW,
    )
    dark.locator("#message-scroller").evaluate("el => { el.scrollTop = 0; }")
    shot(dark, "chat-filtered-dark")


def test_send_streams_reply_and_view_context_shows_the_record(
    site: Site, llm_stub: OpenAIStub, open_page: OpenPage
) -> None:
    api(
        site["base"],
        "/api/commands/smart_context.set_filter",
        {"chat_id": "replies", "topics": ["Python Asyncio"]},
    )
    page = open_page(f"{site['base']}/?chat=replies")
    wait_messages(page, 31)
    page.wait_for_function(
        "() => document.querySelector('#messages [data-in-context]')", timeout=SLOW
    )
    before = set(highlighted(page))

    reply = "Use asyncio.gather to run both coroutines, and asyncio.timeout to bound them."
    llm_stub.chat_replies.append(reply)
    llm_stub.delay = 1.5  # long enough to see the waiting state
    box = page.locator("#composer-input")
    box.fill("How do I await two Python coroutines with a timeout?")
    box.press("Enter")
    waiting = page.locator("#messages .msg.is-thinking")
    expect(waiting).to_contain_text("Thinking")
    expect(waiting).to_have_attribute("aria-busy", "true")
    expect(box).to_be_disabled()
    expect(page.locator("#composer")).to_have_attribute("aria-busy", "true")
    shot(page, "thinking")
    llm_stub.delay = 0.0
    assistant = page.locator("#messages .msg--assistant").last
    expect(assistant).to_contain_text(reply, timeout=SLOW)
    wait_messages(page, 33)
    expect(box).to_be_enabled()
    expect(page.locator("#composer")).to_have_attribute("aria-busy", "false")
    reply_id = assistant.get_attribute("data-message-id")
    assert reply_id and not reply_id.startswith("tmp")

    # The model saw exactly the filtered history plus the new message.
    chat_calls = [
        body
        for path, body in llm_stub.requests
        if path.endswith("/chat/completions") and body.get("stream")
    ]
    sent = chat_calls[-1]["messages"]
    assert sent[-1]["content"].startswith("How do I await two Python coroutines")
    assert len(sent) == len(before) + 1

    assistant.get_by_role("button", name="View context").click()
    dialog = page.locator("#context-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Filtered")
    expect(dialog).to_contain_text("Python Asyncio")
    expect(dialog).to_contain_text(f"{len(before)} of 31 earlier messages")
    expect(dialog.locator(".ctx-item")).to_have_count(len(before) + 1)  # + the message answered
    expect(dialog.locator(".badge--sticky")).to_have_count(1)
    expect(dialog.locator(".score").first).to_have_text(re.compile(r"0\.\d\d"))
    shot(page, "context-dialog")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(assistant.get_by_role("button", name="View context")).to_be_focused()

    page.reload()
    wait_messages(page, 33)
    expect(page.locator("#messages .msg--assistant").last).to_contain_text(reply)

    # The model fails (the client retries once): the bubble says so and the message stays.
    llm_stub.fail_next.extend([500, 500])
    page.locator("#composer-input").fill("Will this one fail?")
    page.locator("#composer-input").press("Enter")
    alert = page.locator("#messages .msg--error [role='alert']")
    expect(alert).to_be_visible(timeout=SLOW)
    expect(alert).to_contain_text("failed")
    unsent = page.locator("#messages .msg--user").last
    expect(unsent).to_contain_text("Will this one fail?")
    expect(unsent).to_have_attribute("data-message-id", re.compile(r"\w+"))  # stored
    expect(page.locator("#composer-input")).to_be_enabled()
    shot(page, "reply-error")


def test_closing_the_palette_never_takes_the_focus_back_from_what_took_it_meanwhile(
    site: Site, open_page: OpenPage
) -> None:
    """The palette's "close" event comes a task after Escape: the CSP test once typed into the
    composer right then, and Enter went to the topic bubble the palette was opened from."""
    page = open_page(f"{site['base']}/?chat=hostile")
    wait_messages(page, 31)
    opener = bubble(page, site["hostile"])
    opener.focus()
    page.keyboard.press("Control+k")
    expect(page.locator("#palette")).to_be_visible()
    # close and focus the composer in one task, before the dialog's "close" event runs
    page.evaluate(
        """() => {
          document.getElementById("palette").close();
          document.getElementById("composer-input").focus();
        }"""
    )
    page.wait_for_timeout(100)  # the "close" event has run by now
    expect(page.locator("#composer-input")).to_be_focused()
    # with nothing focused meanwhile, the opener gets the focus back as before
    opener.focus()
    page.keyboard.press("Control+k")
    page.keyboard.press("Escape")
    expect(opener).to_be_focused()


def test_palette_filters_by_topic_and_hostile_labels_stay_text(
    site: Site, open_page: OpenPage
) -> None:
    page = open_page(f"{site['base']}/?chat=hostile")
    wait_messages(page, 31)
    hostile = bubble(page, site["hostile"])
    expect(hostile).to_have_count(1)
    expect(hostile).to_contain_text(site["hostile"])
    assert page.locator("img").count() == 0
    expect(page.locator(".chat-link[aria-current='page']")).to_contain_text(site["hostile"])

    page.keyboard.press("Control+k")
    palette = page.locator("#palette")
    expect(palette).to_be_visible()
    expect(page.locator("#palette input")).to_be_focused()
    page.keyboard.type("show topics")
    page.keyboard.press("Enter")
    expect(palette.locator("[role='option']").first).to_contain_text(site["hostile"])
    shot(page, "palette-topics")
    page.keyboard.press("Escape")
    expect(palette).to_be_hidden()

    page.keyboard.press("Control+k")
    page.keyboard.type("filter by")
    page.keyboard.press("Enter")
    options = palette.locator("[role='option']")
    expect(options.nth(1)).to_contain_text(site["hostile"])
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")  # toggles the hostile topic
    expect(options.nth(1)).to_have_attribute("aria-checked", "true")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")  # applies
    expect(palette).to_be_hidden()
    expect(hostile).to_have_attribute("aria-pressed", "true", timeout=SLOW)
    in_context_status(page)
    assert page.locator("img").count() == 0

    page.keyboard.press("Control+k")
    page.keyboard.type("clear filter")
    page.keyboard.press("Enter")
    expect(hostile).to_have_attribute("aria-pressed", "false", timeout=SLOW)
    page.wait_for_function("() => !document.querySelector('#messages [data-in-context]')")

    toggle = page.locator("#sc-similarity-toggle")
    expect(toggle).to_be_checked()
    page.keyboard.press("Meta+k")
    expect(
        palette.locator("[role='option']", has_text="Similarity filter: turn off")
    ).to_have_count(1)
    page.keyboard.type("similarity")
    page.keyboard.press("Enter")
    expect(toggle).not_to_be_checked()
    wait_settled(page)
    page.keyboard.press("Control+k")
    page.keyboard.type("similarity filter: turn on")
    page.keyboard.press("Enter")
    expect(toggle).to_be_checked()
    wait_settled(page)


# Times, in the page, from a click to the frame after the highlight changed (painted).
LATENCY_PROBE = """() => {
    const lat = (window.__lat = { clicked: 0, shown: 0, cleared: 0 });
    document.addEventListener("click", () => { lat.clicked = performance.now(); }, true);
    new MutationObserver(() => {
        const on = Boolean(document.querySelector("#messages [data-in-context]"));
        requestAnimationFrame(() => setTimeout(() => {
            lat[on ? "shown" : "cleared"] = performance.now();
        }, 0));
    }).observe(document.getElementById("messages"),
               { attributes: true, subtree: true, attributeFilter: ["data-in-context"] });
}"""


def test_highlight_latency_on_a_1000_message_chat(site: Site, open_page: OpenPage) -> None:
    started = time.perf_counter()
    page = open_page(f"{site['base']}/?chat=long")
    wait_messages(page, 1000)
    opened = time.perf_counter() - started
    topic = bubble(page, "Python Asyncio")
    expect(topic).to_have_count(1)
    page.evaluate(LATENCY_PROBE)

    def click_and_wait(key: str, timeout: float = SLOW) -> float:
        page.evaluate(f"() => {{ window.__lat.{key} = 0; }}")
        topic.click()
        page.wait_for_function(f"() => window.__lat.{key} > 0", timeout=timeout)
        wait_settled(page)
        result: float = page.evaluate(f"() => window.__lat.{key} - window.__lat.clicked")
        return result

    cold = click_and_wait("shown", COLD)  # embeds the 1,000 messages once
    click_and_wait("cleared")
    times = []
    for _ in range(20):
        times.append(click_and_wait("shown"))
        click_and_wait("cleared")
    dom: list[float] = page.evaluate(
        "() => performance.getEntriesByName('sc:highlight').map(e => e.duration)"
    )
    render: float = page.evaluate(
        "() => performance.getEntriesByName('sc:render-chat').map(e => e.duration)[0]"
    )
    median = statistics.median(times)
    print(
        f"\n[e2e] 1,000-message chat: page ready in {opened * 1000:.0f} ms (message list "
        f"built in {render:.0f} ms); first filter (cold) "
        f"{cold:.0f} ms; click -> highlight painted: median {median:.1f} ms over 20 "
        f"(min {min(times):.1f}, max {max(times):.1f}); applying the highlight in the DOM: "
        f"median {statistics.median(dom):.2f} ms"
    )
    topic.click()
    page.wait_for_function("() => document.querySelector('#messages [data-in-context]')")
    page.locator("#message-scroller").evaluate("el => { el.scrollTop = el.scrollHeight - 1400; }")
    shot(page, "long-chat-filtered")
    assert median < 1000


def test_without_a_model_the_reply_is_a_notice_and_context_still_shows(
    serve_vault: Callable[[list[str]], AbstractContextManager[str]], open_page: OpenPage
) -> None:
    with serve_vault(["subjects"]) as base:
        page = open_page(f"{base}/", scheme="dark")
        wait_messages(page, 31)
        expect(page.locator(".banner")).to_contain_text("replies are off")

        page.locator("#new-chat").click()
        page.wait_for_function(
            "() => new URL(location.href).searchParams.get('chat') "
            "&& document.body.dataset.chatId !== 'subjects'"
        )
        chat_id = page.evaluate("() => document.body.dataset.chatId")
        assert chat_id and page.url.endswith(f"?chat={chat_id}")
        expect(page.locator("#empty-state")).to_be_visible()
        expect(page.locator("#messages [data-message-id]")).to_have_count(0)

        page.locator("#composer-input").fill("Hello there")
        page.locator("#composer-send").click()
        notice = page.locator("#messages .msg--notice")
        expect(notice).to_have_count(1, timeout=SLOW)
        expect(page.locator("#messages [data-message-id]")).to_have_count(2)
        expect(notice.locator(".msg__role")).to_have_text("Notice")
        shot(page, "no-model-dark")

        page.go_back()
        expect(page.locator("body")).to_have_attribute("data-chat-id", "subjects")
        wait_messages(page, 31)
        page.locator("#composer-input").fill("What should I bake this weekend?")
        page.locator("#composer-input").press("Enter")
        expect(page.locator("#messages .msg--notice")).to_have_count(1, timeout=SLOW)
        page.locator("#messages .msg--notice").get_by_role("button").click()
        dialog = page.locator("#context-dialog")
        expect(dialog).to_contain_text("Full history")
        expect(dialog).to_contain_text("31 of 31 earlier messages")
        shot(page, "context-dialog-dark")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        chats = api(base, "/api/chats")["chats"]
        assert {c["id"] for c in chats} == {"subjects", chat_id}
        page.close()  # before the server stops, so its event stream is not cut under it


def test_small_screen_layout(site: Site, open_page: OpenPage) -> None:
    page = open_page(f"{site['base']}/?chat=subjects", width=420, height=860)
    wait_messages(page, 31)
    expect(page.locator("#sidebar")).to_be_hidden()
    page.get_by_role("button", name="Chats", exact=True).click()
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.locator(".chat-link[aria-current='page']")).to_be_focused()
    shot(page, "narrow-sidebar")
    page.keyboard.press("Escape")
    expect(page.locator("#sidebar")).to_be_hidden()
    page.get_by_role("button", name="Smart Context panel").click()
    expect(page.locator("#panels")).to_be_visible()
    expect(bubble(page, "Sourdough Baking")).to_be_visible()
    shot(page, "narrow-panel")
    page.locator("#scrim").click(position={"x": 20, "y": 400})
    expect(page.locator("#panels")).to_be_hidden()

    page.set_viewport_size({"width": 1100, "height": 800})
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.locator("#panels")).to_be_hidden()
    shot(page, "medium")


RENDER_PROBE = """async () => {
    const { renderText } = await import("/static/app/messages.js");
    const { contextOf } = await import("/static/app/context-dialog.js");
    const box = document.createElement("div");
    // without the sidecar's HTML of it (a message still being sent), a text stays text
    const text = "Hi <img src=x onerror=alert(1)> and `code`\\n\\n```py\\nx = '<b>'\\n```\\ntail";
    renderText(box, text);
    const m = (id, role) => ({ id, role, content: id });
    const chat = [m("a", "user"), m("b", "assistant"), m("c", "user"), m("d", "assistant"),
                  m("q", "user"), m("r", "assistant")];
    const sent = (record) => {
        const ctx = contextOf(chat, 5, { total_messages: 4, ...record });
        return { prompt: ctx.prompt && ctx.prompt.id, sent: ctx.included.map((x) => x.id),
                 total: ctx.total };
    };
    return {
        images: box.querySelectorAll("img").length,
        text: box.textContent,
        code: [...box.querySelectorAll("code")].map((c) => c.textContent),
        pre: box.querySelectorAll("pre").length,
        excluded: sent({ mode: "filtered", excluded_ids: ["b"] }),
        included: sent({ mode: "filtered", included_ids: ["c"] }),
        full: sent({ mode: "full", excluded_ids: [] }),
    };
}"""
RECORD_CHAT_SELECTED = """() => {
    window.__selected = [];
    document.addEventListener("sidecar:chat_selected", (e) => window.__selected.push(e.detail));
}"""


def test_message_text_is_never_markup_and_records_are_rebuilt(
    site: Site, open_page: OpenPage
) -> None:
    page = open_page(f"{site['base']}/?chat=subjects")
    page.evaluate(RECORD_CHAT_SELECTED)
    page.locator(".chat-link", has_text=site["hostile"]).click()
    expect(page).to_have_url(re.compile(r"\?chat=hostile$"))
    expect(page.locator("body")).to_have_attribute("data-chat-id", "hostile")
    expect(page.locator("#chat-title")).to_have_text(site["hostile"])
    expect(bubble(page, "Plain Topic")).to_have_count(1, timeout=SLOW)
    assert page.evaluate("() => window.__selected") == [{"chat_id": "hostile"}]

    result = page.evaluate(RENDER_PROBE)
    assert result["images"] == 0
    assert "<img src=x onerror=alert(1)>" in result["text"]
    assert "x = '<b>'" in result["text"]
    assert result["code"] == [] and result["pre"] == 0
    # A record keeps the shorter id list; both expand to the same kind of answer.
    assert result["excluded"] == {"prompt": "q", "sent": ["a", "c", "d"], "total": 4}
    assert result["included"] == {"prompt": "q", "sent": ["c"], "total": 4}
    assert result["full"] == {"prompt": "q", "sent": ["a", "b", "c", "d"], "total": 4}
