"""static/panel/js/layout.js on its own in Chromium: the bubble cloud's pure geometry and colours.

The file is loaded by itself, wrapped in a function as render_panel() wraps it, with no DOM
around it: numbers and labels in, circles, hues and font sizes out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import pytest

from smart_context.resources import static_dir

sync_api = pytest.importorskip("playwright.sync_api")

EXPORTS = "{ bubbleLayout, assignHues, labelFit, GAP_PX, PAD_PX, HUES }"


@pytest.fixture(scope="module")
def layout(chromium: Any) -> Iterator[Any]:
    """A blank page whose ``window.layout`` holds layout.js's functions."""
    source = (static_dir() / "panel" / "js" / "layout.js").read_text(encoding="utf-8")
    context = chromium.new_context()
    page = context.new_page()
    page.set_content("<!doctype html><title>layout.js</title>")
    page.add_script_tag(content=f"window.layout = (() => {{\n{source}\nreturn {EXPORTS};\n}})();")
    yield page
    context.close()


def cloud(page: Any, counts: list[float], width: int) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(
        "([counts, width]) => window.layout.bubbleLayout(counts, width)", [counts, width]
    )
    return result


def test_no_topics_no_cloud(layout: Any) -> None:
    assert cloud(layout, [], 300) == {"circles": [], "height": 0}


@pytest.mark.parametrize(
    ("counts", "width"),
    [
        ([9, 6, 4, 2, 1], 300),
        ([7], 320),
        ([50, 1], 200),
        ([5] * 10, 280),
        ([40, 30, 22, 12, 9, 7, 5, 3, 2, 1], 640),
        ([3, 2, 1], 60),  # narrower than the smallest cloud: laid out at 120px
    ],
)
def test_circles_are_proportional_apart_and_inside(
    layout: Any, counts: list[float], width: int
) -> None:
    plan = cloud(layout, counts, width)
    circles = plan["circles"]
    assert len(circles) == len(counts)
    per_message = [math.pi * c["r"] ** 2 / n for c, n in zip(circles, counts, strict=True)]
    assert max(per_message) / min(per_message) == pytest.approx(1.0, rel=1e-9)
    gap, pad = layout.evaluate("() => [window.layout.GAP_PX, window.layout.PAD_PX]")
    for a, b in itertools.combinations(circles, 2):
        assert math.hypot(a["x"] - b["x"], a["y"] - b["y"]) - a["r"] - b["r"] >= 0.9 * gap
    right = max(width, 120 + 2 * pad) - pad
    for c in circles:
        assert pad - 1e-6 <= c["x"] - c["r"] and c["x"] + c["r"] <= right + 1e-6
        assert pad - 1e-6 <= c["y"] - c["r"] and c["y"] + c["r"] <= plan["height"] - pad + 1e-6
    assert cloud(layout, counts, width) == plan  # deterministic


def test_hues_are_distinct_and_do_not_depend_on_order(layout: Any) -> None:
    labels = [f"Topic {n}" for n in range(10)]
    hues = layout.evaluate("(ls) => [...window.layout.assignHues(ls)]", labels)
    again = layout.evaluate("(ls) => [...window.layout.assignHues(ls)]", labels[::-1])
    assert dict(hues) == dict(again)
    assert len(set(dict(hues).values())) == 10
    assert set(dict(hues).values()) == set(layout.evaluate("() => window.layout.HUES"))


def test_labels_shrink_to_fit_then_clip(layout: Any) -> None:
    fit = "([label, r]) => window.layout.labelFit(label, r, (word) => word.length * 60)"
    big = layout.evaluate(fit, ["Sourdough", 60])
    assert big == {"size": 15, "clip": False}  # capped at the largest font
    small = layout.evaluate(fit, ["Sourdough", 35])
    assert small == {"size": pytest.approx(1.6 * 35 * 100 / 540), "clip": False}  # fits the word
    tiny = layout.evaluate(fit, ["Supercalifragilistic", 12])
    assert tiny == {"size": 9, "clip": True}
