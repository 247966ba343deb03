"""Walk the README's first five steps in the real page, and take its screenshot.

    .venv/bin/python docs/screenshot.py [--out docs/screenshot.png]

Starts ``smart-context serve`` exactly as the README does (the example vault, the offline
default), with ``SMART_CONTEXT_HOME`` in a temporary folder so your own copy of the example
vault is left alone, and drives Debian's ``chromium`` through Playwright (it never downloads a
browser). Each step checks that the page does what the README says; the screenshot is taken
after the bubble click, with the messages in context highlighted. Exits non-zero, naming the
step, when one does not work.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
SLOW = 120_000  # ms: the first open maps the chat with the local model
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run"]


def readme_walk(readme: Path = ROOT / "README.md") -> tuple[str, str, int, int]:
    """What the README's first walk names: the chat of step 1, the bubble of step 2 and the
    count it says ("16 of 68"). tests/browser/test_topic_click.py checks them on the page."""
    text = readme.read_text(encoding="utf-8")
    chat = re.search(r"\*\*Open a chat\.\*\* Click \*([^*]+)\*", text)
    step = re.search(
        r"\*\*Click a bubble\*\*, for example \*([^*]+)\*.*?\(\"(\d+) of (\d+) ", text, re.S
    )
    if not chat or not step:
        raise ValueError("the README's walk no longer names a chat, a bubble and a count")
    return chat.group(1), step.group(1), int(step.group(2)), int(step.group(3))


@contextmanager
def serving(home: Path) -> Iterator[str]:
    """``smart-context serve --port 0`` with ``home`` as SMART_CONTEXT_HOME; yields its URL."""
    env = {**os.environ, "SMART_CONTEXT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "smart_context_hosts.cli", "serve", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first, second = proc.stdout.readline(), proc.stdout.readline()
        assert first.endswith(f"vault {home / 'example-vault'}\n"), first
        yield second.split()[1]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def walk(page: Page, url: str, out: Path) -> None:
    """The README's five steps, each checked on the page."""
    chat, label, kept, total = readme_walk()
    page.goto(url)
    # 1. Open a chat: its bubbles appear in the Smart Context panel.
    page.get_by_role("link", name=re.compile(re.escape(chat))).click()
    bubble = page.locator(f'#smart-context-panel [data-topic="{label}"]')
    expect(bubble).to_be_visible(timeout=SLOW)
    # 2. Click the bubble the README names: the status line says the count it says, and the
    # messages are highlighted.
    bubble.click()
    expect(bubble).to_have_attribute("aria-pressed", "true")
    status = page.locator("#sc-status")
    expect(status).to_have_text(f"{kept} of {total} messages in context", timeout=SLOW)
    expect(page.locator("#messages [data-in-context]").first).to_be_visible(timeout=SLOW)
    page.wait_for_timeout(500)  # let the bubble cloud finish its transition
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out))
    # 3. Send a message: with no model the reply says so, and is stored with what it was sent.
    page.locator("#composer-input").fill("What did we decide about the database?")
    page.locator("#composer-send").click()
    view = page.get_by_role("button", name="View context that would be sent").last
    expect(view).to_be_visible(timeout=SLOW)
    # 4. View context: the dialog lists what the reply was sent with.
    view.click()
    dialog = page.locator("#context-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("messages")
    dialog.locator("[data-close]").first.click()
    expect(dialog).to_be_hidden()
    # 5. Pin a message: the pin of the message just sent stays pressed.
    pin = page.locator("#messages .msg__pin").last
    pin.hover()
    pin.click()
    expect(pin).to_have_attribute("aria-pressed", "true", timeout=SLOW)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot.png")
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as home, serving(Path(home)) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 760})
        try:
            walk(page, url, args.out)
        finally:
            browser.close()
    print(f"all five steps work; screenshot: {args.out} ({args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
