"""View context's usage facts in a real headless Chromium against the real sidecar: the tokens a
reply's request sent, those the upstream served from its prompt cache, and the bill beside the
plain client's. The records are built by hand, as the plugin and the host store them; the
page's bill (static/app/usage-bill.js) is checked against the plugin's own
(:func:`smart_context.usage_bill.bill_of`) on the same records, hostile ones among them.

A module of its own: it starts its own sidecar (see ``test_memory_progress.py`` on why).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from smart_context.usage_bill import bill_of
from tests.browser.conftest import message, running_sidecar
from tests.browser.test_memory_ui import OpenPage, open_chat, write_memory_vault

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

HOSTILE = "<img src=x onerror=alert(1)>"
OPENAI_PART = {
    "kind": "openai",
    "read": 0.1,
    "write": 1.0,
    "cached_estimate": 7900,
    "plain_cached_estimate": 18000,
    "plain_tokens": 18957,
}
USAGE = {"sent_tokens": 8458, "full_tokens": 18957, "counted_with": "o200k_base", "exact": True}
RECORDS: list[tuple[dict[str, Any], Any]] = [
    ({"usage": USAGE}, None),
    ({"usage": USAGE, "cache": OPENAI_PART}, None),
    ({"usage": USAGE | {"reported_prompt_tokens": 9000, "reported_cached_tokens": 8192}}, None),
    (
        {
            "usage": USAGE | {"reported_prompt_tokens": 3000, "reported_cache_write_tokens": 512},
            "cache": {"kind": "anthropic", "read": 0.1, "write": 1.25, "cached_estimate": 2048},
        },
        None,
    ),
    (
        {"usage": USAGE, "cache": OPENAI_PART},
        {"prompt_tokens": 8458, "prompt_tokens_details": {"cached_tokens": 4096}},
    ),
    (
        {"usage": USAGE, "cache": {"kind": "deepseek"}},
        {"prompt_tokens": 8458, "prompt_cache_miss_tokens": 58},
    ),
    ({"usage": USAGE, "cache": {"kind": HOSTILE, "read": "</script>", "write": -1}}, None),
    ({"usage": USAGE, "cache": {"kind": "openai", "read": 1e9, "write": True}}, [1]),
    ({"usage": USAGE | {"reported_cached_tokens": 10**9}, "cache": OPENAI_PART}, "x"),
    ({"usage": USAGE | {"sent_tokens": HOSTILE}}, None),
]


def reply(mid: str, record: dict[str, Any], server: Any, minute: int) -> dict[str, Any]:
    out = message(mid, "assistant", f"Reply {mid}", minute) | {"smart_context": record}
    return out if server is None else out | {"usage": server}


def bill_chat() -> dict[str, Any]:
    """A question and a reply whose record says it read 8,192 tokens from OpenAI's cache, then
    one with a hostile cache part."""
    cached = {
        "mode": "full",
        "usage": USAGE | {"reported_prompt_tokens": 8458, "reported_cached_tokens": 8192},
        "cache": OPENAI_PART,
    }
    hostile = {
        "mode": "full",
        "usage": USAGE | {"reported_cached_tokens": "</script><script>alert(2)</script>"},
        "cache": {"kind": HOSTILE, "read": HOSTILE, "plain_tokens": HOSTILE},
    }
    messages = [
        message("q1", "user", "Plan four days in Kyoto", 0),
        reply("a1", cached, {"prompt_tokens": 8458, "completion_tokens": 90}, 1),
        message("q2", "user", "And Nara?", 2),
        reply("a2", hostile, None, 3),
    ]
    return {"title": "Kyoto", "messages": messages, "topics": []}


def view_context(page: Any, index: int) -> Any:
    page.locator("#messages .msg--assistant").nth(index).get_by_role(
        "button", name=re.compile("View context")
    ).click()
    dialog = page.locator("#context-dialog")
    expect(dialog).to_be_visible()
    return dialog


def test_view_context_shows_the_tokens_the_cache_and_the_bill(
    tmp_path: Path, open_page: OpenPage
) -> None:
    vault = write_memory_vault(tmp_path / "vault", {"kyoto": bill_chat()}, "")
    with running_sidecar(vault) as base:
        page = open_chat(open_page, base, "kyoto")
        dialog = view_context(page, 0)
        facts = dialog.locator(".ctx-facts")
        expect(facts).to_contain_text("8,458 of 18,957 (the whole conversation)")
        expect(facts).to_contain_text("8,192 (the server's count)")
        # 266 new tokens and 8,192 at a tenth; the plain client's 957 new and 18,000 at a tenth
        expect(facts).to_contain_text("1,085 vs plain 2,757 (saved 61%)")
        page.keyboard.press("Escape")
        hostile = view_context(page, 1)
        text = hostile.locator(".ctx-facts").inner_text()
        assert "8,458 vs plain 18,957 (saved 55%)" in text and "Cached" not in text
        assert hostile.locator("img").count() == 0
        # the page's bill is the plugin's, record by record
        page_bills = page.evaluate(
            """async (cases) => {
                const { billOf } = await import("/static/app/usage-bill.js");
                return cases.map(([record, server]) => billOf(record, server));
            }""",
            [list(case) for case in RECORDS],
        )
        for (record, server), seen in zip(RECORDS, page_bills, strict=True):
            ours = bill_of(record, server)
            if ours is None:
                assert seen is None
                continue
            assert seen is not None, record
            assert (seen["kind"], seen["sent"], seen["cached"]) == (
                ours["kind"],
                ours["sent"],
                ours["cached"],
            )
            assert seen["cachedReported"] == ours["cached_reported"]
            assert seen["billed"] == pytest.approx(ours["billed"], abs=0.01)
            assert seen["plainBilled"] == pytest.approx(ours["plain_billed"], abs=0.01)
        page.context.close()  # before the sidecar stops, so no page sees it go
