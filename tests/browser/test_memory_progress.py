"""The panel's long-memory progress in a real headless Chromium against the real sidecar: shown
while a long chat is first summarised, for the open chat only, gone when done.

A module of its own: it starts its own sidecar, and sidecars in one process share the installed
plugin object (its entry point is a module-level instance), so it must not run beside the
module-scoped sidecar of ``test_memory_ui.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import running_sidecar
from tests.browser.test_memory_ui import (
    OpenPage,
    command,
    memory_chat,
    open_chat,
    write_memory_vault,
)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

RECORD_PROGRESS = """() => {
  const box = document.getElementById("sc-memory-progress");
  const bar = box.querySelector("[role='progressbar']");
  window.__progress = [];
  new MutationObserver(() => window.__progress.push({
    shown: !box.hidden, label: box.textContent.trim(),
    now: Number(bar.getAttribute("aria-valuenow")), max: Number(bar.getAttribute("aria-valuemax")),
  })).observe(box, {attributes: true, subtree: true, childList: true, characterData: true});
}"""


def test_progress_shows_while_a_long_chat_is_first_summarised_and_then_clears(
    tmp_path: Path, open_page: OpenPage
) -> None:
    # the small chat has a topic, so that opening it does not map it at once
    small = memory_chat(30) | {"topics": [{"label": "Sourdough Baking", "count": 10}]}
    vault = write_memory_vault(tmp_path / "vault", {"small": small}, "")
    with running_sidecar(vault) as base:
        # written after the start, so that no pass at start has seen it yet; with a topic, so
        # that opening it does not start the pass (a chat without topics is mapped at once)
        big = memory_chat(2500) | {"topics": [{"label": "Sourdough Baking", "count": 10}]}
        (vault / ".memory" / "big.json").write_text(json.dumps(big), encoding="utf-8")
        page = open_chat(open_page, base, "big")
        elsewhere = open_chat(open_page, base, "small")
        for tab in (page, elsewhere):
            tab.evaluate(RECORD_PROGRESS)
        try:
            progress = page.locator("#sc-memory-progress")
            expect(progress).to_be_hidden()
            made = command(base, "summarize_conversation", chat_id="big")
            expect(progress).to_be_hidden()
            seen = page.evaluate("window.__progress")
            seen_elsewhere = elsewhere.evaluate("window.__progress")
        finally:
            for tab in (page, elsewhere):
                tab.context.close()  # before the sidecar stops, so no page sees it go
    assert made["status"] == "success" and made["summaries"]
    shown = [s for s in seen if s["shown"]]
    assert any(s["label"].startswith("Summarising this chat") for s in shown)
    assert not any(s["label"].startswith("Indexing this chat") for s in shown)
    assert all(0 <= s["now"] < s["max"] for s in shown)
    assert not seen[-1]["shown"]
    # its chat only: the other tab never shows the big chat's progress
    assert not any(s["shown"] and s["label"].startswith("Summarising") for s in seen_elsewhere)
