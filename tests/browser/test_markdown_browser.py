"""Messages shown as Markdown on the sidecar's page, in a real headless Chromium.

The sidecar renders and cleans each text (``content_html``); the page inserts only that. A reply
streamed from the loopback OpenAI-compatible stub shows as a list with bold labels once it is
done, and again after a reload; hostile Markdown in it, and in a stored chat, leaves nothing
that runs, loads or navigates anywhere but the web. ``open_page`` fails the test on any dialog
(an ``alert`` that ran) or console error (a CSP refusal is one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import KEY_ENV, llm_table, message, running_sidecar, write_vault
from tests.openai_server import OpenAIStub

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Page = sync_api.Page

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SLOW = 60_000  # ms: the first request loads the local embedding model
LIST = "Budget for the trip:\n\n- **Hotels:** ¥18,000 a night\n- **Trains:** ¥29,650"
HOSTILE = [
    "[x](javascript:alert(1))",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "![pixel](https://tracker.example/p.png)",
    '<a href="javascript:alert(1)">a</a> <svg onload=alert(1)>',
    "<javascript:alert(1)>",
    '[t](https://example.com/t "x\\" onmouseover=\\"alert(1)")',
]
REPLY = "\n\n".join([LIST, *HOSTILE, "See [the guide](https://example.com/guide)."])
SHOWCASE = (
    "## Day 1\n\n1. Arrive at *Haneda*\n2. Check in\n   - ask for a ~~smoking~~ quiet room\n\n"
    "> Book early in spring.\n\n| Item | Cost |\n|:--|--:|\n| Hotel | ¥18,000 |\n"
    "| Train | ¥29,650 |\n\n```python\ntotal = 18_000 + 29_650\n```\n\n---\n\nDone: `total`."
)
LINK = ["_blank", "noopener noreferrer nofollow"]
EXPECTED_LINKS = [
    ["https://tracker.example/p.png", *LINK],  # an image is a link to it, never loaded
    ["https://example.com/t", *LINK],
    ["https://example.com/guide", *LINK],
]

# What the rendered texts under `root` hold that could run, load or restyle.
PROBE = """(root) => {
    const all = [...root.querySelectorAll(".md, .md *")];
    return {
        tags: [...new Set(all.map((e) => e.tagName.toLowerCase()))].sort(),
        attributes: all.flatMap((e) => [...e.attributes].map((a) => a.name))
            .filter((name) => name.startsWith("on") || name === "style" || name === "src"),
        links: [...root.querySelectorAll(".md a")]
            .map((a) => [a.getAttribute("href"), a.target, a.rel]),
    };
}"""
SAFE_TAGS = {"a", "br", "code", "div", "li", "p", "pre", "strong", "ul", "em"}


def stored_chat() -> dict[str, Any]:
    """A chat as a file holds it: a question, the reply, a failed reply's partial text, and a
    reply with the rest of what Markdown has (for the screenshot)."""
    failed = message("a2", "assistant", "The model failed.", 3)
    failed.update(error="The model failed.", partial_content="- **partial** item")
    messages = [
        message("u1", "user", "What will **Tokyo** cost?", 1),
        message("a1", "assistant", REPLY, 2),
        failed,
        message("a3", "assistant", SHOWCASE, 4),
    ]
    return {"title": "Markdown", "messages": messages}


@pytest.fixture(scope="module")
def markdown_site(tmp_path_factory: pytest.TempPathFactory, llm_stub: OpenAIStub) -> Iterator[str]:
    vault: Path = write_vault(tmp_path_factory.mktemp("vault"), [], llm_table(llm_stub))
    chat = json.dumps(stored_chat())
    for chat_id in ("stored", "sent"):  # "sent" gets a reply; "stored" stays as written
        (vault / ".memory" / f"{chat_id}.json").write_text(chat, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, llm_stub.api_key)
        with running_sidecar(vault) as base:
            yield base


def check_reply(page: Page, reply: Any) -> None:
    """``reply`` shows the list with bold labels, and the hostile lines as harmless text."""
    items = reply.locator(".md ul > li")
    expect(items).to_have_count(2, timeout=SLOW)
    expect(items.first.locator("strong")).to_have_text("Hotels:")
    expect(items.first).to_have_text("Hotels: ¥18,000 a night")
    text = reply.locator(".md").inner_text()
    assert "**" not in text
    assert "[x](javascript:alert(1))" in text and "<img src=x onerror=alert(1)>" in text
    found = reply.evaluate(PROBE)
    assert set(found["tags"]) <= SAFE_TAGS, found["tags"]
    assert found["attributes"] == []
    assert found["links"] == EXPECTED_LINKS


def test_a_streamed_reply_shows_its_markdown_once_done_and_after_a_reload(
    markdown_site: str, llm_stub: OpenAIStub, open_page: Any
) -> None:
    page = open_page(f"{markdown_site}/?chat=sent")
    llm_stub.chat_replies.append(REPLY)
    box = page.locator("#composer-input")
    box.fill("And **Kyoto**?")
    box.press("Enter")
    expect(page.locator("#messages [data-message-id]")).to_have_count(6, timeout=SLOW)
    expect(box).to_be_enabled(timeout=SLOW)
    check_reply(page, page.locator("#messages .msg--assistant").last)
    expect(page.locator("#messages .msg--user").last.locator(".md strong")).to_have_text("Kyoto")

    page.reload()
    expect(page.locator("#messages [data-message-id]")).to_have_count(6, timeout=SLOW)
    check_reply(page, page.locator("#messages .msg--assistant").last)


def test_a_stored_chat_shows_markdown_and_nothing_hostile_runs(
    markdown_site: str, open_page: Any
) -> None:
    page = open_page(f"{markdown_site}/?chat=stored")
    expect(page.locator("#messages [data-message-id]")).to_have_count(4, timeout=SLOW)
    expect(page.locator("[data-message-id='u1'] .md strong")).to_have_text("Tokyo")
    check_reply(page, page.locator("[data-message-id='a1']"))
    showcase = page.locator("[data-message-id='a3'] .md")
    for selector, count in [
        ("h2", 1), ("ol > li", 2), ("li s", 1), ("blockquote", 1), ("td.align-right", 2),
        ("pre.code[data-lang='python'] code", 1), ("hr", 1), ("p > code", 1),
    ]:  # fmt: skip
        expect(showcase.locator(selector)).to_have_count(count)
    ARTIFACTS.mkdir(exist_ok=True)
    for id_ in ("a1", "a3"):
        shot = ARTIFACTS / f"markdown-{id_}.png"
        page.locator(f"[data-message-id='{id_}']").screenshot(path=str(shot))
    failed = page.locator("[data-message-id='a2']")
    expect(failed.locator(".md li strong")).to_have_text("partial")
    expect(failed.locator(".msg__alert")).to_have_text("The model failed.")
    # The links open apart from the page, which stays where it was (and nothing goes out).
    page.context.route("https://example.com/**", lambda route: route.abort())
    with page.context.expect_page() as opened:
        page.locator("[data-message-id='a1'] .md a", has_text="the guide").click()
    opened.value.close()
    assert page.url.endswith("/?chat=stored")
