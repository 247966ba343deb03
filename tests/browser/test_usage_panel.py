"""The panel's budget and usage section in a real headless Chromium (Debian's ``chromium``).

Against a harness host (the panel's HTTP fallback answered from Python): the budget bar by
section with its text, the totals, the chart over replies, a chat with no replies, hostile
figures, and the update after a reply. Against the real sidecar with the stub model: a message
sent from the page shows up in the section once its reply is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from smart_context.panel import render_panel
from tests.browser.conftest import CHATS, llm_table, running_sidecar
from tests.browser.harness import HarnessServer, harness_page, running_server
from tests.openai_server import OpenAIStub

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:  # pragma: no cover - playwright is a test-only dependency
    pytest.skip("playwright is not installed", allow_module_level=True)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
HOSTILE = "<img src=x onerror=alert(1)>"
SECTIONS = {"system": 300, "memory": 120, "history": 2400, "summaries": 500, "message": 40}


def reply(i: int, sent: Any, full: Any, reported: Any = None) -> dict[str, Any]:
    return {
        "id": f"a{i}",
        "sent_tokens": sent,
        "full_tokens": full,
        "ratio": 1.0,
        "reported_prompt_tokens": reported,
    }


def stats(series: list[dict[str, Any]], budget: Any = None, **extra: Any) -> dict[str, Any]:
    sent = sum(r["sent_tokens"] for r in series)
    full = sum(r["full_tokens"] for r in series)
    last = None
    if series:
        usage = series[-1] | {"counted_with": "o200k_base", "exact": True}
        last = {"usage": usage, "budget": budget}
    return {
        "status": "success",
        "replies": len(series),
        "measured": len(series),
        "sent_tokens": sent,
        "full_tokens": full,
        "reported_replies": 1,
        "reported_prompt_tokens": 3400,
        "last": last,
        "series": series,
        "series_omitted": 0,
    } | extra


BUDGET = {
    "limit": 4000,
    "used": 3360,
    "by_section": SECTIONS,
    "counted_with": "o200k_base",
    "exact": True,
}
HOSTILE_ANSWER = {
    "status": "success",
    "replies": "</script><script>alert(3)</script>",
    "measured": 2,
    "sent_tokens": {"valueOf": 5},
    "full_tokens": -7,
    "reported_prompt_tokens": [1],
    "last": {
        "usage": reply(1, "12", None),
        "budget": {
            "limit": 1000,
            "used": 900,
            "by_section": {HOSTILE: 500, "history": "NaN", "message": -3, "memory": 400},
            "counted_with": {"x": 1},
        },
    },
    "series": [reply(0, 100, 900), reply(1, "many", 5), None, "x", reply(2, 200, 1800)],
}


class Host:
    """The harness's answers: topics (none), no context items, and usage per chat."""

    def __init__(self) -> None:
        self.usage: dict[str, dict[str, Any]] = {}

    def __call__(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        chat = args.get("chat_id") or "long"
        if name == "smart_context.get_topics":
            return {"status": "success", "chat_id": chat, "topics": [], "total_messages": 0}
        if name == "smart_context.usage_stats" and chat in self.usage:
            return self.usage[chat]
        return {"status": "error", "error": f"Unknown command: {name}"}


@pytest.fixture(scope="module")
def harness() -> Iterator[tuple[HarnessServer, Host]]:
    host = Host()
    with running_server() as server:
        server.command_handler = host
        yield server, host


@pytest.fixture
def open_harness(
    chromium: Browser, harness: tuple[HarnessServer, Host]
) -> Iterator[Callable[[str], Page]]:
    server, _ = harness
    problems: list[str] = []
    contexts = []

    def _open(chat_id: str) -> Page:
        context = chromium.new_context(viewport={"width": 420, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.on("dialog", lambda d: (problems.append(d.message), d.dismiss()))
        url = server.add_page(f"/{chat_id}", harness_page(render_panel({}), chat_id=chat_id))
        page.goto(url)
        page.wait_for_function("() => window.SmartContextPanel")
        return page

    yield _open
    for context in contexts:
        context.close()
    assert not problems, problems


def loaded(page: Page) -> dict[str, Any]:
    page.wait_for_function(
        "() => { const u = window.SmartContextPanel.usage(); return u.stats && !u.pending; }"
    )
    snapshot: dict[str, Any] = page.evaluate("() => window.SmartContextPanel.usage()")
    return snapshot


def test_the_budget_totals_and_chart_of_a_chat(
    open_harness: Callable[[str], Page], harness: tuple[HarnessServer, Host]
) -> None:
    _, host = harness
    series = [reply(0, 900, 900), reply(1, 2100, 6000), reply(2, 3360, 14000, 3400)]
    host.usage["long"] = stats(series, BUDGET)
    page = open_harness("long")
    loaded(page)
    section = page.locator("#sc-usage")
    expect(section).to_be_visible()
    expect(page.locator("#sc-budget-line")).to_have_text(
        "Last request: 3,360 of 4,000 tokens (84%), counted with the o200k_base tokenizer."
    )
    label = page.locator("#sc-budget-bar").get_attribute("aria-label") or ""
    assert label.startswith("Budget used: 3,360 of 4,000 tokens: Rules 300, Memory 120")
    legend = page.locator("#sc-budget-legend li").all_inner_texts()
    assert legend == ["Rules 300", "Memory 120", "History 2,400", "Summaries 500", "Message 40"]
    assert page.locator("#sc-budget-bar rect.sc-seg").count() == 5
    totals = page.locator("#sc-usage-totals").inner_text()
    assert "6,360" in totals and "20,900" in totals and "3.3\u00d7" in totals
    assert "ours 3,360, server 3,400" in totals and "3,400 (1 reply)" in totals
    assert page.locator("#sc-usage-chart g.sc-usage-reply").count() == 3
    chart = page.locator("#sc-usage-chart svg").get_attribute("aria-label") or ""
    assert "over 3 replies" in chart and "900 to 14,000" in chart
    ARTIFACTS.mkdir(exist_ok=True)
    section.screenshot(path=str(ARTIFACTS / "usage-panel.png"))


def test_the_cached_tokens_and_the_bill_beside_the_plain_clients(
    open_harness: Callable[[str], Page], harness: tuple[HarnessServer, Host]
) -> None:
    _, host = harness
    bill = {"cache_kind": "openai", "billed": 1348.0, "plain_billed": 2757.0, "saved": 1409.0}
    last = reply(1, 8458, 18957, 8458) | bill | {"cached_tokens": 7900, "cached_reported": True}
    series = [reply(0, 900, 900) | {"billed": 900.0, "plain_billed": 900.0}, last]
    totals = {"cached_tokens": 7900, "cached_reported_replies": 1, "billed": 2248.0}
    host.usage["cached"] = stats(series, BUDGET, **totals, plain_billed=3657.0)
    host.usage["costly"] = stats(
        [reply(0, 900, 900)], BUDGET, cached_tokens=0, billed=900.0, plain_billed=600.0
    )
    host.usage["hostile"] = stats(
        [reply(0, 900, 900) | {"billed": "</b><img src=x>", "plain_billed": -1}],
        BUDGET,
        cached_tokens="</script>",
        billed="NaN",
        plain_billed={"x": 1},
    )
    page = open_harness("cached")
    loaded(page)
    rows = dict(
        zip(
            page.locator("#sc-usage-totals dt").all_inner_texts(),
            page.locator("#sc-usage-totals dd").all_inner_texts(),
            strict=True,
        )
    )
    assert rows["Cached"] == "7,900 (server: 1 of 2)"
    assert (rows["Bill"], rows["Saved"]) == ("2,248 (plain 3,657)", "39%")
    assert (rows["Last cached"], rows["Last bill"]) == ("7,900 (server)", "1,348 (plain 2,757)")
    title = page.locator("#sc-usage-chart g.sc-usage-reply title").last.text_content() or ""
    assert title.endswith("; bill 1,348 vs plain 2,757 (saved 51%)")
    costly = open_harness("costly")
    loaded(costly)
    assert "Lost\n50%" in costly.locator("#sc-usage-totals").inner_text()
    hostile = open_harness("hostile")
    loaded(hostile)
    text = hostile.locator("#sc-usage-totals").inner_text()
    assert "Bill" not in text and "Cached" not in text and "NaN" not in text
    assert hostile.locator("#sc-usage img").count() == 0


def test_a_request_over_its_budget_says_so_and_by_how_much(
    open_harness: Callable[[str], Page], harness: tuple[HarnessServer, Host]
) -> None:
    _, host = harness
    note = f"Over the token budget by 453: {HOSTILE} does not fit in 300."
    over = {
        "limit": 300,
        "used": 753,
        "by_section": {"system": 272, "knowledge": 146, "tools": 316, "message": 19},
        "over": 453,
        "note": note,
    }
    host.usage["tight"] = stats([reply(0, 753, 753)], over)
    host.usage["fine"] = stats([reply(0, 900, 900)], BUDGET)
    page = open_harness("tight")
    loaded(page)
    expect(page.locator("#sc-budget-line")).to_contain_text("753 of 300 tokens (251%)")
    expect(page.locator("#sc-budget-over")).to_be_visible()
    expect(page.locator("#sc-budget-over")).to_have_text(note)  # text, never markup
    assert page.locator("#sc-budget-over img").count() == 0
    other = open_harness("fine")
    loaded(other)
    expect(other.locator("#sc-budget-over")).to_be_hidden()


def test_a_chat_without_replies_says_so(
    open_harness: Callable[[str], Page], harness: tuple[HarnessServer, Host]
) -> None:
    _, host = harness
    host.usage["fresh"] = stats([])
    page = open_harness("fresh")
    loaded(page)
    expect(page.locator("#sc-usage-note")).to_have_text(
        "No replies yet: the budget and the token figures show after the first."
    )
    for hidden in ("#sc-budget", "#sc-usage-totals", "#sc-usage-chart"):
        expect(page.locator(hidden)).to_be_hidden()


def test_hostile_figures_are_dropped_and_labels_stay_text(
    open_harness: Callable[[str], Page], harness: tuple[HarnessServer, Host]
) -> None:
    _, host = harness
    host.usage["weird"] = HOSTILE_ANSWER
    page = open_harness("weird")
    snapshot = loaded(page)
    assert snapshot["stats"]["sent"] == 0 and snapshot["stats"]["full"] == 0
    assert [r["id"] for r in snapshot["stats"]["series"]] == ["a0", "a2"]
    legend = page.locator("#sc-budget-legend li").all_inner_texts()
    assert legend == ["Memory 400", f"{HOSTILE} 500"]  # an unknown section is only text
    assert page.locator("#smart-context-panel img, #smart-context-panel script[src]").count() == 0
    assert page.locator("#sc-usage-chart g.sc-usage-reply").count() == 2
    assert "NaN" not in page.locator("#sc-usage").inner_text()


def test_the_section_follows_the_chat_and_updates_after_a_reply(
    open_harness: Callable[[str], Page], harness: tuple[HarnessServer, Host]
) -> None:
    server, host = harness
    host.usage["growing"] = stats([reply(0, 500, 500)], BUDGET)
    host.usage["other"] = stats([])
    page = open_harness("growing")
    loaded(page)
    assert page.locator("#sc-usage-chart g.sc-usage-reply").count() == 1
    host.usage["growing"] = stats([reply(0, 500, 500), reply(1, 800, 1300)], BUDGET)
    server.wait_for_stream()  # the page's EventSource, an earlier page's gone
    server.publish("chat.updated", {"chat_id": "growing", "message_count": 4})
    expect(page.locator("#sc-usage-chart g.sc-usage-reply")).to_have_count(2)
    page.evaluate(
        "() => document.dispatchEvent(new CustomEvent('sidecar:chat_selected', "
        "{detail: {chat_id: 'other'}}))"
    )
    expect(page.locator("#sc-usage-note")).to_contain_text("No replies yet")
    expect(page.locator("#sc-usage-chart")).to_be_hidden()


def test_a_host_without_the_command_keeps_the_section_hidden(
    open_harness: Callable[[str], Page],
) -> None:
    page = open_harness("unknown-chat")
    page.wait_for_function("() => window.SmartContextPanel.usage().available === false")
    expect(page.locator("#sc-usage")).to_be_hidden()


def test_a_reply_from_the_real_sidecar_shows_in_the_section(
    tmp_path: Path, llm_stub: OpenAIStub, open_page: Callable[..., Page]
) -> None:
    from tests.browser.conftest import KEY_ENV, write_vault

    plugin = "budget_tokens = 3000\n"
    vault = write_vault(tmp_path / "vault", ["subjects"], plugin + llm_table(llm_stub))
    stored = CHATS["subjects"]()
    stored["messages"][-1]["smart_context"] = {"usage": {"sent_tokens": "lots", "full_tokens": 9}}
    (vault / ".memory" / "subjects.json").write_text(json.dumps(stored))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, llm_stub.api_key)
        with running_sidecar(vault) as base:
            page = open_page(f"{base}/?chat=subjects")
            note = page.locator("#sc-usage-note")
            expect(note).to_contain_text("stored before usage was recorded", timeout=20_000)
            box = page.locator("#composer-input")
            box.fill("How long should sourdough rest in the fridge?")
            box.press("Enter")
            page.wait_for_function(
                "() => (window.SmartContextPanel.usage().stats || {}).measured === 1",
                timeout=60_000,
            )
            expect(page.locator("#sc-budget-line")).to_contain_text("of 3,000 tokens")
            legend = page.locator("#sc-budget-legend li").all_inner_texts()
            assert any(text.startswith("History") for text in legend)
            expect(page.locator("#sc-usage-chart g.sc-usage-reply")).to_have_count(1)
            totals = page.locator("#sc-usage-totals").inner_text()
            assert "1 of 16 measured" in totals and "server" in totals
            page.close()  # before the sidecar stops: its event stream would fail to reconnect
