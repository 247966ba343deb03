"""Message text as HTML: markdown-it-py renders, nh3 cleans, the API serves both."""

from __future__ import annotations

import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from smart_context.resources import static_dir
from smart_context_hosts.sidecar.llm import NO_MODEL_MESSAGE
from smart_context_hosts.sidecar.markdown import (
    HtmlCache,
    chat_with_html,
    event_with_html,
    is_safe_link,
    render_markdown,
    with_html,
)
from tests.sidecar.conftest import ClientFactory, Recorder, chat_on_disk, hookimpl, read_events

Element = tuple[str, dict[str, str]]


class Elements(HTMLParser):
    """Every start tag of a fragment with its attributes, in order, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[Element] = []
        self.text = ""
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {name: value or "" for name, value in attrs}))

    def handle_data(self, data: str) -> None:
        self.text += data

    def tags(self) -> list[str]:
        return [tag for tag, _ in self.found]

    def attrs(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.found if name == tag]


def parsed(markdown: str) -> Elements:
    return Elements(render_markdown(markdown))


def test_a_list_with_bold_labels() -> None:
    html = render_markdown("- **Hotels:** ¥18,000\n- **Trains:** ¥29,650")
    assert html.startswith("<ul>")
    assert "<li><strong>Hotels:</strong> ¥18,000</li>" in html
    assert "**" not in html
    assert Elements(html).tags() == ["ul", "li", "strong", "li", "strong"]


def test_ordered_lists_keep_their_start_and_nest() -> None:
    found = parsed("3. three\n4. four\n   - inner *em*\n")
    assert found.tags() == ["ol", "li", "li", "ul", "li", "em"]
    assert found.attrs("ol") == [{"start": "3"}]


def test_headings_emphasis_strikethrough_quote_and_rule() -> None:
    found = parsed("# One\n\n### Three\n\n*a* **b** ~~c~~\n\n> quoted\n\n---\n")
    assert found.tags() == ["h1", "h3", "p", "em", "strong", "s", "blockquote", "p", "hr"]


def test_a_line_break_in_the_text_stays_one() -> None:
    assert render_markdown("first\nsecond") == "<p>first<br>\nsecond</p>\n"


def test_code_blocks_keep_their_text_and_name_their_language() -> None:
    html = render_markdown("Use `x < y` here.\n\n```py title\nx = '<b>'\n```\n\n    indented\n")
    found = Elements(html)
    assert found.tags() == ["p", "code", "pre", "code", "pre", "code"]
    assert found.attrs("pre") == [
        {"class": "code", "data-lang": "py", "tabindex": "0"},
        {"class": "code", "tabindex": "0"},
    ]
    assert "x = '<b>'" in found.text and "x < y" in found.text
    assert "<b>" not in html


def test_tables_align_by_class_never_by_style() -> None:
    found = parsed("| Item | Cost |\n|:-----|-----:|\n| Hotel | ¥18,000 |\n")
    assert found.tags() == ["table", "thead", "tr", "th", "th", "tbody", "tr", "td", "td"]
    assert found.attrs("th") == [{"class": "align-left"}, {"class": "align-right"}]
    assert found.attrs("td") == [{"class": "align-left"}, {"class": "align-right"}]
    assert "style" not in render_markdown("|a|\n|:-:|\n|b|\n")


LINK = {"target": "_blank", "rel": "noopener noreferrer nofollow"}


@pytest.mark.parametrize(
    ("markdown", "href"),
    [
        ("[site](https://example.com/a?b=1&c=2)", "https://example.com/a?b=1&c=2"),
        ("[site](http://example.com)", "http://example.com"),
        ("<https://example.com>", "https://example.com"),
        ("[mail](mailto:someone@example.com)", "mailto:someone@example.com"),
        ("<mailto:someone@example.com>", "mailto:someone@example.com"),
    ],
)
def test_web_and_mail_links_open_apart_and_tell_nothing(markdown: str, href: str) -> None:
    (attrs,) = parsed(markdown).attrs("a")
    assert attrs == {"href": href, **LINK}


@pytest.mark.parametrize(
    "markdown",
    [
        "[x](javascript:alert(1))",
        "[x](JavaScript:alert(1))",
        "[x](  javascript:alert(1) )",
        "[x](java&#x09;script:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "<javascript:alert(1)>",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "[x](file:///etc/passwd)",
        "[x](/api/commands/smart_context.set_filter)",
        "[x](//evil.example/)",
        "[x]: javascript:alert(1)\n\n[x]",
    ],
)
def test_any_other_address_is_no_link(markdown: str) -> None:
    assert "<a" not in render_markdown(markdown)


@pytest.mark.parametrize(
    "markdown",
    [
        "<img src=x onerror=alert(1)>",
        "<script>alert(1)</script>",
        "<a href='javascript:alert(1)'>x</a>",
        "<svg onload=alert(1)>",
        "<iframe src='https://evil.example'></iframe>",
        '<p style="background:url(https://evil.example)">x</p>',
        "<!-- <script>alert(1)</script> -->",
        "**<b onmouseover=alert(1)>x</b>**",
        '[t](https://example.com "x\\" onmouseover=\\"alert(1)")',
        "```<img src=x onerror=alert(1)>\ncode\n```",
        "<details open ontoggle=alert(1)>",
    ],
)
def test_hostile_html_is_text_and_nothing_runs(markdown: str) -> None:
    found = parsed(markdown)
    assert not {"img", "script", "svg", "iframe", "details", "b", "style"} & set(found.tags())
    for _, attrs in found.found:
        assert not [name for name in attrs if name.startswith("on") or name == "style"]
        assert not attrs.get("href", "").lower().startswith("javascript")


def test_an_image_is_a_link_to_it_and_never_loads() -> None:
    found = parsed("![a cat](https://example.com/cat.png) ![](https://example.com/b.png)")
    assert "img" not in found.tags()
    assert [a["href"] for a in found.attrs("a")] == [
        "https://example.com/cat.png",
        "https://example.com/b.png",
    ]
    assert found.text.split() == ["a", "cat", "https://example.com/b.png"]
    assert parsed("![x](javascript:alert(1))").attrs("a") == []


def test_the_no_model_notice_shows_its_settings_as_code() -> None:
    found = parsed(NO_MODEL_MESSAGE)
    assert found.tags() == ["p", "pre", "code"]
    assert '[llm]\nbase_url = "http://127.0.0.1:11434/v1"' in found.text
    assert '[llm.models]\nfast = "llama3.2"\nchat = "llama3.2"' in found.text


def test_is_safe_link() -> None:
    assert is_safe_link("https://example.com") and is_safe_link(" MAILTO:a@b.c")
    assert not is_safe_link("javascript:alert(1)") and not is_safe_link("/relative")


@pytest.mark.parametrize(
    "markdown",
    [
        "Plain prose with **bold**, `code` and [a link](https://example.com). " * 1500,
        "- item **bold**\n  - nested `code`\n" * 3000,
        "| a | b |\n|---|---|\n" + "| 1 | **2** |\n" * 6000,
        "```\n" + "x = 1\n" * 15000 + "```\n",
    ],
    ids=["prose", "lists", "table", "code"],
)
def test_a_long_ordinary_message_renders_at_once(markdown: str) -> None:
    assert len(markdown) > 80_000
    start = time.perf_counter()
    render_markdown(markdown)
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("unit", ["[", "![", "*a **b ", "<", "`a``b", ">", "_a", "[a](<"])
def test_pathological_input_stays_linear(unit: str) -> None:
    # 20,000 characters: quadratic work here would take minutes, linear takes well under a second
    text = unit * (20_000 // len(unit))
    start = time.perf_counter()
    render_markdown(text)
    assert time.perf_counter() - start < 5.0


def test_the_cache_renders_each_text_once_and_holds_a_bounded_amount() -> None:
    rendered: list[str] = []

    def render(text: str) -> str:
        rendered.append(text)
        return text.upper()

    cache = HtmlCache(max_chars=2_000)
    assert [cache.get(t, render) for t in ("ab", "cd", "ab")] == ["AB", "CD", "AB"]
    assert rendered == ["ab", "cd"]
    for n in range(200):  # 200 texts of 2 x 8 characters: only the last 125 fit
        cache.get(f"text{n:04d}", render)
    assert len(cache) == 125
    cache.get("text0199", render)
    cache.get("text0000", render)  # pushed out long ago: rendered again
    assert rendered.count("text0199") == 1 and rendered.count("text0000") == 2
    huge = "x" * 11  # over a hundredth of the bound: rendered, never held
    cache.get(huge, render)
    cache.get(huge, render)
    assert rendered.count(huge) == 2


def test_with_html_adds_html_beside_the_text_and_leaves_the_message_alone() -> None:
    message = {"id": "a1", "role": "assistant", "content": "**x**", "partial_content": "*y*"}
    view = with_html(message)
    assert view["content_html"] == "<p><strong>x</strong></p>\n"
    assert view["partial_content_html"] == "<p><em>y</em></p>\n"
    assert message == {
        "id": "a1",
        "role": "assistant",
        "content": "**x**",
        "partial_content": "*y*",
    }
    assert with_html({"id": "b", "content": None}) == {"id": "b", "content": None}


def test_chat_and_event_views_tolerate_odd_shapes() -> None:
    chat: dict[str, Any] = {"title": "t", "messages": [{"content": "`c`"}, "not a message"]}
    shown = chat_with_html(chat)
    assert shown["messages"][0]["content_html"] == "<p><code>c</code></p>\n"
    assert shown["messages"][1] == "not a message"
    assert chat_with_html({"messages": None}) == {"messages": None}
    event = event_with_html({"user_message": {"content": "u"}, "error": "e"})
    assert event == {"user_message": {"content": "u", "content_html": "<p>u</p>\n"}, "error": "e"}


class MarkdownReply:
    """A plugin that answers every message itself (``pipeline_llm``), in Markdown."""

    reply = "Costs:\n\n- **Hotels:** ¥18,000\n- [x](javascript:alert(1))"

    @hookimpl
    def pipeline_llm(self, ctx: Any) -> None:
        ctx.response = self.reply


async def test_the_api_serves_html_beside_the_text_and_stores_only_the_text(
    api: ClientFactory, vault: Path
) -> None:
    client, _ = await api(Recorder(), MarkdownReply())
    chat_id = (await client.post("/api/chats", json={})).json()["id"]
    path = f"/api/chats/{chat_id}/messages"
    done = (await client.post(path, json={"content": "How **much**?"})).json()
    assert done["user_message"]["content_html"] == "<p>How <strong>much</strong>?</p>\n"
    reply_html = done["assistant_message"]["content_html"]
    assert "<li><strong>Hotels:</strong> ¥18,000</li>" in reply_html
    assert "href" not in reply_html

    async with client.stream(
        "POST", path, json={"content": "Again"}, headers={"Accept": "text/event-stream"}
    ) as response:
        events = [event async for event in read_events(response) if event[0] == "done"]
    assert events[0][1]["assistant_message"]["content_html"] == reply_html

    chat = (await client.get(f"/api/chats/{chat_id}")).json()
    assert [m["content_html"] for m in chat["messages"]][1::2] == [reply_html, reply_html]
    stored = chat_on_disk(vault, chat_id)["messages"]
    assert len(stored) == 4
    assert not [m for m in stored if "content_html" in m]


SINKS = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(")
SINKS += ("createContextualFragment", "DOMParser", "new Function", "setHTMLUnsafe")


def test_the_page_inserts_markup_in_one_place_only() -> None:
    """The sidecar's cleaned HTML of a message is the only markup the page's scripts insert."""
    found = []
    for script in sorted((static_dir() / "app").glob("*.js")):
        for number, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1):
            code = line.strip()
            if code.startswith(("//", "*", "/*")):
                continue
            found += [(script.name, number, code) for sink in SINKS if sink in code]
    assert [(name, code) for name, _, code in found] == [
        ("messages.js", "template.innerHTML = html;")
    ]
