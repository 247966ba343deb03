"""Which inline elements of a panel get a CSP hash, and that the hash is the browser's."""

from __future__ import annotations

import base64
import hashlib

import pytest

from smart_context.panel import render_panel
from smart_context_hosts.sidecar.inline_hashes import hash_source, inline_hashes, runs_inline


def expected(text: str) -> str:
    """The hash a browser computes: SHA-256 of the element's UTF-8 text, base64."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_hash_is_the_csp_source_of_the_utf8_text() -> None:
    # The CSP spec's own example: <script>alert('Hello, world.');</script>
    assert hash_source("alert('Hello, world.');") == (
        "'sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng='"
    )
    assert hash_source("é") == expected("é")


def test_running_scripts_and_styles_are_hashed_in_order() -> None:
    html = (
        "<style>a { color: red }</style><p>text</p>"
        "<script>one()</script><SCRIPT TYPE='module'>two()</SCRIPT>"
        "<style media='print'>b{}</style><script type=' Text/JavaScript '>three()</script>"
    )
    found = inline_hashes(html)
    assert found.scripts == tuple(map(expected, ["one()", "two()", "three()"]))
    assert found.styles == tuple(map(expected, ["a { color: red }", "b{}"]))


@pytest.mark.parametrize(
    "element",
    [
        '<script type="application/json">{"label": "x"}</script>',
        '<script type="text/template"><b>x</b></script>',
        '<script type="text/javascript; charset=utf-8">no()</script>',  # not a JS type to HTML
        '<script src="/static/app/app.js">ignored()</script>',
        "<script language='vbscript'>no()</script>",
        "<p onclick='no()'>attribute handlers are never allowed</p>",
        "<p style='color: red'>nor style attributes</p>",
    ],
)
def test_data_blocks_external_scripts_and_attributes_get_no_hash(element: str) -> None:
    assert inline_hashes(element) == inline_hashes("")
    assert inline_hashes("").scripts == () and inline_hashes("").styles == ()


@pytest.mark.parametrize(
    ("attrs", "runs"),
    [
        ([], True),
        ([("type", "")], True),
        ([("type", None)], True),
        ([("type", "module")], True),
        ([("language", "javascript")], True),
        ([("language", "")], True),
        ([("type", "application/json")], False),
        ([("type", "module"), ("type", "application/json")], True),  # the first one counts
        ([("type", "application/json"), ("type", "module")], False),
        ([("src", None)], False),
    ],
)
def test_which_scripts_run(attrs: list[tuple[str, str | None]], runs: bool) -> None:
    assert runs_inline(attrs) is runs


def test_text_is_hashed_raw_as_the_browser_parsed_it() -> None:
    script = "if (a < b && c > d) x = '&amp;<p>';"
    found = inline_hashes(f"<script>{script}</script>\r\n<style>p{{}}\r\nq{{}}\r}}</style>")
    assert found.scripts == (expected(script),)  # no entity decoding, no markup inside
    assert found.styles == (expected("p{}\nq{}\n}"),)  # CR LF and CR are LF to a browser


def test_an_unclosed_or_empty_element() -> None:
    assert inline_hashes("<script>never ended").scripts == ()
    assert inline_hashes("<script></script>").scripts == (expected(""),)


def test_the_smart_context_panel_has_one_script_and_one_style() -> None:
    # A hostile label stays inside the JSON block: no second script to hash.
    panel = render_panel({"chat_id": "c1", "topics": [{"label": "</script><script>x()"}]})
    found = inline_hashes(panel)
    assert len(found.scripts) == 1 and len(found.styles) == 1
    start = panel.index("<script>") + len("<script>")
    assert found.scripts[0] == expected(panel[start : panel.index("</script>", start)])


def test_a_fragment_is_parsed_once() -> None:
    html = render_panel({"chat_id": "cache-test"})
    before = inline_hashes.cache_info().hits
    assert inline_hashes(html) is inline_hashes(html)
    assert inline_hashes.cache_info().hits == before + 1
