"""The sidecar's Content-Security-Policy in Debian's headless Chromium: the page and its panel
work under it without a single violation, it does block code the sidecar did not put there, and
a page on another origin cannot frame the sidecar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tests.browser.harness import running_server
from tests.browser.test_e2e import (
    ARTIFACTS,
    COLD,
    SLOW,
    bubble,
    highlighted,
    in_context_status,
    wait_messages,
    wait_settled,
)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
Browser = sync_api.Browser
Page = sync_api.Page
ServeVault = Callable[[list[str]], AbstractContextManager[str]]

# Runs before any script of the page: every violation the browser reports is kept on window.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push({
    directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample,
    source: `${e.sourceFile}:${e.lineNumber}`,
  });
}, true);
"""


class Watched:
    """A page whose CSP violations, console errors and script errors are recorded."""

    def __init__(self, browser: Browser) -> None:
        self.context = browser.new_context(viewport={"width": 1440, "height": 900})
        self.context.add_init_script(RECORD_VIOLATIONS)
        self.page = self.context.new_page()
        self.console: list[str] = []
        self.page.on(
            "console", lambda m: self.console.append(m.text) if m.type == "error" else None
        )
        self.page.on("pageerror", lambda exc: self.console.append(str(exc)))

    def violations(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.page.evaluate("() => window.__cspViolations")
        return found


@pytest.fixture
def watched(chromium: Browser) -> Iterator[Callable[[], Watched]]:
    """``watched()``: a fresh recorded page in its own browser context."""
    made: list[Watched] = []

    def _watched() -> Watched:
        made.append(Watched(chromium))
        return made[-1]

    yield _watched
    for one in made:
        one.context.close()


def test_the_page_and_panel_work_under_the_policy_without_a_violation(
    serve_vault: ServeVault, watched: Callable[[], Watched]
) -> None:
    with serve_vault(["subjects"]) as base:
        tab = watched()
        page = tab.page
        response = page.goto(f"{base}/?chat=subjects")
        assert response is not None
        policy = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "'sha256-" in policy
        assert "unsafe" not in policy
        page.wait_for_function("() => window.SmartContextPanel")
        wait_messages(page, 31)

        # The panel's inline style applies, and its inline script drew the bubbles.
        cloud = page.locator("#sc-cloud")
        assert cloud.evaluate("el => getComputedStyle(el).position") == "relative"
        expect(page.locator("#smart-context-panel [data-topic]").first).to_be_visible(timeout=COLD)
        wait_settled(page)

        bubble(page, "Sourdough Baking").click()
        expect(bubble(page, "Sourdough Baking")).to_have_attribute("aria-pressed", "true")
        kept, total = in_context_status(page)
        assert total == 31 and 0 < kept < total
        page.wait_for_function(
            f"() => document.querySelectorAll('#messages [data-in-context]').length === {kept}",
            timeout=SLOW,
        )
        assert "m00" in highlighted(page)  # the page's own modules answered the panel's event

        page.keyboard.press("Control+k")
        expect(page.locator("#palette")).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.locator("#palette")).to_be_hidden()

        page.locator("#composer-input").fill("Which flour for a first loaf?")
        page.locator("#composer-input").press("Enter")
        notice = page.locator("#messages .msg--notice")
        try:
            expect(notice).to_have_count(1, timeout=SLOW)
        except AssertionError as exc:  # seen twice in CI, never locally: say what the page shows
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "csp-no-reply.png"))
            shown = page.locator("#messages").inner_text()[-600:]
            composer = page.locator("#composer-input").evaluate(
                "el => ({value: el.value, disabled: el.disabled, busy: document.body.className})"
            )
            raise AssertionError(
                f"no reply within {SLOW} ms; the chat ends with {shown!r}; the composer: "
                f"{composer}; console: {tab.console}"
            ) from exc
        notice.get_by_role("button").click()
        expect(page.locator("#context-dialog")).to_contain_text("Sourdough Baking")
        page.keyboard.press("Escape")
        wait_settled(page)

        assert tab.violations() == []
        assert tab.console == []

        # The policy is in force: code the sidecar did not put in the page is refused.
        page.evaluate(
            """() => {
              const s = document.createElement("script");
              s.textContent = "window.__injected = true";
              document.body.append(s);
              document.body.insertAdjacentHTML("beforeend", '<p id="styled" style="color: red">');
            }"""
        )
        page.wait_for_function("() => window.__cspViolations.length >= 2")
        assert page.evaluate("() => window.__injected") is None
        assert {v["directive"] for v in tab.violations()} == {"script-src-elem", "style-src-attr"}
        # Chromium also logs each one as a console error, which every e2e test (open_page) fails on.
        assert tab.console and all("Content Security Policy" in m for m in tab.console)
        assert page.locator("#styled").evaluate("el => getComputedStyle(el).color") != (
            "rgb(255, 0, 0)"
        )
        page.close()  # before the server stops, so its event stream is not cut under it


def test_a_page_on_another_origin_cannot_frame_the_sidecar(
    serve_vault: ServeVault, watched: Callable[[], Watched]
) -> None:
    with serve_vault(["subjects"]) as base, running_server() as other:
        # Another origin (another port): a page of its own frames fine, the sidecar must not.
        other.add_page("/own.html", '<!doctype html><p id="marker">framed</p>')
        url = other.add_page(
            "/attack.html",
            '<!doctype html><iframe id="own" src="/own.html"></iframe>'
            f'<iframe id="sidecar" src="{base}/?chat=subjects"></iframe>',
        )
        tab = watched()
        page = tab.page
        with page.expect_response(lambda r: r.url.startswith(base)) as framed:
            page.goto(url)
        assert framed.value.status == 200  # the sidecar answered, and the browser kept it out
        page.wait_for_load_state("load")

        own = page.locator("#own").element_handle().content_frame()
        assert own is not None and own.locator("#marker").inner_text() == "framed"
        frame = page.locator("#sidecar").element_handle().content_frame()
        assert frame is not None
        assert frame.evaluate("() => document.getElementById('composer')") is None
        assert frame.evaluate("() => typeof window.SmartContextPanel") == "undefined"
        assert any("frame-ancestors" in message for message in tab.console), tab.console
