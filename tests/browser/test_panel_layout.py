"""The bubble cloud's layout in Chromium: layout.js on its own (pure geometry and colours), and
the rendered panel, whose bubbles must never cover the status line below the cloud.

layout.js is loaded by itself, wrapped in a function as render_panel() wraps it, with no DOM
around it: numbers and labels in, circles, hues and font sizes out. The panel tests render the
whole panel in a harness page with a fake sidecar (``tests/browser/harness.py``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import pytest

from smart_context.panel import render_panel
from smart_context.resources import static_dir
from tests.browser.harness import chat_fixture, harness_page, running_server

expect = pytest.importorskip("playwright.sync_api").expect

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


# ---- the rendered cloud --------------------------------------------------------------------------

LONG_LABELS = [
    "Sourdough starter acetone smell and feeding schedule",
    "Hydration percentages for an open crumb",
    "Dutch oven baking temperature and steam",
    "Cold retard overnight fermentation in the fridge",
    "Flour types and protein",
    "Wholemeal versus white bread flour",
    "Scoring the loaf with a lame",
    "Shaping boules and batards by hand",
    "Salt and autolyse timing in the mix",
    "Oven spring and an ear on the crust",
]
MANY = list(zip(LONG_LABELS, [40, 30, 22, 12, 9, 7, 5, 3, 2, 1], strict=True))
FEW = [("Bulk fermentation", 6), ("Starter in the fridge", 2)]

# Emit the chat's new topics, then walk every transition this starts through its timeline,
# paused at each step: the most any bubble (or its label) reaches below the top of the status
# line, in px (negative while they stay clear of it). A paused timeline is the same on a busy
# machine as on an idle one.
UPDATE_AND_WORST_OVERLAP = """(topics) => {
  window.__fake.emit("smart_context.topics_updated", {chat_id: "c", topics, total_messages: 12});
  const footer = document.querySelector("#smart-context-panel .sc-footer");
  const animations = document.getAnimations();
  let worst = -Infinity;
  for (let t = 0; t <= 600; t += 50) {
    for (const a of animations) {
      a.pause();
      a.currentTime = Math.min(t, a.effect.getComputedTiming().endTime);
    }
    const top = footer.getBoundingClientRect().top;
    for (const el of document.querySelectorAll(
        "#sc-cloud [data-topic]:not(.sc-leaving), #sc-cloud [data-topic]:not(.sc-leaving) > *")) {
      const box = el.getBoundingClientRect();
      if (box.height > 0) worst = Math.max(worst, box.bottom - top);
    }
  }
  for (const a of animations) a.finish();
  return worst;
}"""


@pytest.fixture(scope="module")
def harness() -> Iterator[Any]:
    with running_server() as server:
        yield server


def panel_page(chromium: Any, harness: Any, topics: list[tuple[str, int]], width: int) -> Any:
    """A page with the panel (``width`` px wide) over a chat of ``topics``, animations on."""
    chats = {"c": chat_fixture(topics, total=12)}
    html = harness_page(render_panel(None), chat_id="c", fake={"chats": chats, "current": "c"})
    html = html.replace("#panel-host { width: 320px;", f"#panel-host {{ width: {width}px;")
    context = chromium.new_context(viewport={"width": 1000, "height": 800})
    page = context.new_page()
    page.goto(harness.add_page(f"/cloud-{width}-{len(topics)}", html))
    return page


def worst_overlap_after(page: Any, topics: list[tuple[str, int]]) -> float:
    payload = [{"label": label, "count": count} for label, count in topics]
    worst: float = page.evaluate(UPDATE_AND_WORST_OVERLAP, payload)
    return worst


@pytest.mark.parametrize("width", [240, 320, 420])
def test_bubbles_never_cover_the_status_line_below_the_cloud(
    chromium: Any, harness: Any, width: int
) -> None:
    page = panel_page(chromium, harness, [], width)  # no topics until the first reply
    try:
        expect(page.locator("#sc-empty")).to_be_visible()
        assert worst_overlap_after(page, MANY) <= 0  # the first topics come in
        status = page.locator("#sc-status")
        expect(status).to_have_text("All messages in context")
        assert worst_overlap_after(page, FEW) <= 0  # fewer: the cloud shrinks
        assert worst_overlap_after(page, MANY) <= 0  # and grows again
        page.wait_for_timeout(600)  # the shrink's wait, were one left
        status_box = status.bounding_box()
        assert status_box is not None
        for bubble in page.locator("#sc-cloud [data-topic]").all():
            box = bubble.bounding_box()
            assert box is not None
            assert box["y"] + box["height"] <= status_box["y"], bubble.get_attribute("data-topic")
    finally:
        page.context.close()
