"""In the browser: a chat that came through ``smart-context proxy`` is in ``serve``'s page with
its bubbles, and a bubble clicked there shapes the next request the proxy sends upstream.

The proxy and the sidecar run as the two commands would, each with its own Sidecar on one vault
(uvicorn in threads), with the real plugin on the offline default; the client is the ``openai``
package; the page is Debian's headless Chromium.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.browser.conftest import SUBJECTS, running_asgi, running_sidecar, write_vault
from tests.browser.test_e2e import COLD, OpenPage, api, bubble, wait_messages, wait_settled
from tests.openai_server import OpenAIStub

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

CHAT = "owui-3f2b9c1e"


def conversation() -> list[dict[str, Any]]:
    """The three subjects in turn, user and assistant by turns, as a client holds them."""
    out = []
    for texts in SUBJECTS.values():
        for k, text in enumerate(texts):
            out.append({"role": "user" if k % 2 == 0 else "assistant", "content": text})
    return out


def test_a_proxied_chat_is_in_the_page_and_its_bubble_shapes_the_next_request(
    tmp_path: Path, open_page: OpenPage, llm_stub: OpenAIStub
) -> None:
    from smart_context.plugin import SmartContextPlugin
    from smart_context_hosts.proxy.app import ProxyOptions, create_app
    from smart_context_hosts.sidecar.runtime import Sidecar
    from tests.sidecar.conftest import manager_with

    vault = write_vault(tmp_path / "vault", [])
    history = conversation()
    if history[-1]["role"] == "user":
        history.pop()

    def make() -> Any:
        # a plugin of its own: the entry point's is one per process, and here are two hosts
        own = manager_with(SmartContextPlugin())
        return create_app(Sidecar(vault, plugin_manager=own), ProxyOptions(llm_stub.base_url))

    with (
        running_asgi(make, "proxy") as proxy,
        running_sidecar(vault, plugins=[SmartContextPlugin()]) as base,
    ):
        client = openai.OpenAI(base_url=f"{proxy}/v1", api_key=llm_stub.api_key, max_retries=0)
        headers = {"X-Smart-Context-Chat": CHAT}

        def ask(text: str) -> str | None:
            history.append({"role": "user", "content": text})
            raw = client.chat.completions.with_raw_response.create(
                model="stub-chat",
                messages=history,
                extra_headers=headers,  # type: ignore[arg-type]
            )
            history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
            return raw.headers.get("x-smart-context")

        note = ask("Thanks, that is all for now.")
        assert note and note.startswith("sent ")
        page = open_page(f"{base}/?chat={CHAT}")
        wait_messages(page, len(history))
        bubbles = page.locator("#smart-context-panel [data-topic]")
        expect(bubbles.first).to_be_visible(timeout=COLD)  # mapped in the background
        wait_settled(page)
        chat = api(base, f"/api/chats/{CHAT}")
        text_of = {m["id"]: m["content"] for m in chat["messages"]}
        baking = SUBJECTS["Sourdough Baking"][0]
        topic = next(
            t
            for t in chat["topics"]
            if not t.get("sticky") and baking in [text_of.get(i) for i in t.get("message_ids", [])]
        )
        others = {
            text_of[i]
            for t in chat["topics"]
            if t is not topic and not t.get("sticky")
            for i in t.get("message_ids", [])
            if i not in topic["message_ids"]
        }
        bubble(page, topic["label"]).click()
        expect(bubble(page, topic["label"])).to_have_attribute("aria-pressed", "true")
        wait_settled(page)
        last_turn = {m["content"] for m in history[-2:]}  # goes whatever its topic
        note = ask("How often should I feed it?")
        assert note and note.endswith(f"filter: {topic['label']}")
        sent = {m.get("content") for m in llm_stub.requests[-1][1]["messages"]}
        assert baking in sent and last_turn <= sent
        # the other subjects' own messages stayed home
        assert others - last_turn and not (sent & others) - last_turn
        client.close()
        page.close()  # before the servers stop: its event stream would be cut
