"""render_panel: the page hooks, JSON-only data, hostile labels, and cheap repeated renders."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from typing import Any

import jinja2
import pytest

from smart_context import panel
from smart_context.panel import PANEL_ID, checked_raw_text, render_panel
from smart_context.resources import static_dir

HOSTILE_LABELS = [
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(2)</script>",
    "</SCRIPT ><!--",
    "\"' onmouseover=alert(3) x='",
    "Ünïcödé & <b>bold</b>",
]


class Collected(HTMLParser):
    """Every start tag with its attributes, and the text of each script element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def with_attr(self, name: str, value: str | None = None) -> list[dict[str, str | None]]:
        return [a for _, a in self.tags if name in a and (value is None or a[name] == value)]


def parse(html: str) -> Collected:
    collected = Collected()
    collected.feed(html)
    collected.close()
    return collected


def initial_json(collected: Collected) -> Any:
    (text,) = [t for a, t in collected.scripts if a.get("id") == "sc-initial"]
    return json.loads(text)


def test_the_page_hooks_are_in_the_markup() -> None:
    page = parse(render_panel())
    (root,) = page.with_attr("id", PANEL_ID)
    assert root["aria-label"] == "Smart Context"
    assert page.with_attr("id", "sc-status")
    (toggle,) = page.with_attr("id", "sc-similarity-toggle")
    assert toggle["type"] == "checkbox"
    assert page.with_attr("for", "sc-similarity-toggle")  # a visible label names the switch
    (sticky,) = page.with_attr("data-sticky-count")
    assert sticky["data-sticky-count"] == "0"
    assert page.with_attr("id", "sc-cloud")
    assert page.with_attr("role", "alert")


def test_the_assets_are_inlined_not_linked() -> None:
    html = render_panel()
    page = parse(html)
    assert not [a for tag, a in page.tags if tag == "link" or (tag == "script" and "src" in a)]
    assert "#smart-context-panel" in html  # the stylesheet
    assert "window.SmartContextPanel" in html  # the script
    scripts = [a.get("type") for a, _ in page.scripts]
    assert scripts == ["application/json", None]


def test_initial_data_is_json_in_an_application_json_script() -> None:
    initial = {
        "chat_id": "chat-1",
        "topics": [{"label": "Python Async", "count": 12}],
        "total_messages": 14,
        "active_topics": [],
        "included_ids": ["a", "b"],
        "embedding_search": True,
    }
    assert initial_json(parse(render_panel(initial))) == initial
    assert initial_json(parse(render_panel())) == {}
    assert initial_json(parse(render_panel(None))) == {}


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_hostile_labels_stay_data(label: str) -> None:
    initial = {"chat_id": label, "topics": [{"label": label, "count": 3}]}
    html = render_panel(initial)
    page = parse(html)
    assert initial_json(page) == initial  # the label survives intact, as data
    assert [tag for tag, _ in page.tags].count("script") == 2  # nothing was smuggled in
    assert not [tag for tag, _ in page.tags if tag in ("img", "b")]
    assert "<img" not in html
    assert "<b>" not in html
    json_start = html.index('id="sc-initial">')
    json_end = html.index("</script>", json_start)
    assert "<" not in html[json_start + len('id="sc-initial">') : json_end]


def test_the_script_never_writes_markup() -> None:
    script = "".join(
        (static_dir() / name).read_text(encoding="utf-8") for name in panel.PANEL_SCRIPTS
    )
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script


def test_an_asset_that_would_end_its_element_is_refused() -> None:
    assert str(checked_raw_text("a { color: red }", "style", "x.css")) == "a { color: red }"
    with pytest.raises(ValueError, match=r"x\.js cannot be inlined"):
        checked_raw_text("var s = '</SCRIPT>';", "script", "x.js")
    with pytest.raises(ValueError, match=r"x\.js"):
        checked_raw_text("var s = '<!--';", "script", "x.js")
    with pytest.raises(ValueError, match=r"x\.css"):
        checked_raw_text("/* </style> */", "style", "x.css")


def test_the_environment_escapes_and_is_strict() -> None:
    env = panel._environment()
    assert env.autoescape is True
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("panel.html.j2").render()
    assert "Instructions &amp; Preferences" in render_panel()


def test_rendering_again_reuses_the_environment_and_the_assets() -> None:
    render_panel()
    env = panel._environment()
    reads = panel.inline_asset.cache_info().misses
    for _ in range(20):
        render_panel({"chat_id": "c"})
    assert panel._environment() is env
    assert panel.inline_asset.cache_info().misses == reads
    assert panel._environment.cache_info().misses <= 1


def test_importing_the_module_does_no_work() -> None:
    code = (
        "import smart_context.panel as p; "
        "assert p._environment.cache_info().currsize == 0; "
        "assert p.inline_asset.cache_info().currsize == 0"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
