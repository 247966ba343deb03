"""Every response of the sidecar says: do not frame me, do not sniff me, run only my own code.

The page's policy also allows, by hash, exactly the inline scripts and styles of the panels it
embeds; the hashes here are computed independently, from the page's text.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from smart_context.hookspecs import hookimpl
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.sidecar.app import create_app, page_environment
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.sidecar.conftest import (
    BASE_URL,
    ClientFactory,
    Recorder,
    live_server,
    manager_with,
    running_app,
)

STRICT = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; object-src 'none'; "
    "frame-ancestors 'none'"
)
ALWAYS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
PANEL_SCRIPT = "document.body.dataset.inline = 'ran';"
PANEL_STYLE = ".inline-panel { color: rebeccapurple; }"


class InlinePanelPlugin:
    """A panel with an inline style, an inline script, a JSON block and an external script."""

    @hookimpl
    def sidecar_client_connected(self, ui: Any) -> None:
        ui.register_panel("inline-panel", "Inline")
        ui.set_panel_content(
            "inline-panel",
            f'<style>{PANEL_STYLE}</style><p class="inline-panel">hi</p>'
            '<script type="application/json" id="inline-data">{"a": "</b>"}</script>'
            '<script src="/static/app/bridge.js"></script>'
            f"<script>{PANEL_SCRIPT}</script>",
        )


def sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for part in policy.split(";"):
        name, *sources = part.split()
        parsed[name] = sources
    return parsed


def assert_secured(response: httpx.Response, policy: str = STRICT) -> None:
    for name, value in ALWAYS.items():
        assert response.headers.get_list(name) == [value], name
    assert response.headers.get_list("content-security-policy") == [policy]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/chats", 200),
        ("POST", "/api/commands/test.echo", 200),
        ("POST", "/api/commands/test.boom", 500),
        ("GET", "/static/app/app.css", 200),
        ("GET", "/static/app/app.js", 200),
        ("GET", "/static/nope.js", 404),
        ("GET", "/api/nothing-here", 404),
        ("GET", "/api/chats/.hidden", 400),
        ("DELETE", "/api/chats", 405),
    ],
)
async def test_every_response_is_secured(
    api: ClientFactory, method: str, path: str, status: int
) -> None:
    client, _ = await api(Recorder())
    response = await client.request(method, path)
    assert response.status_code == status
    assert_secured(response)


async def test_the_guards_refusal_is_secured(api: ClientFactory) -> None:
    client, _ = await api()
    rebound = await client.get("/", headers={"Host": "127.0.0.1.attacker.example"})
    assert rebound.status_code == 403 and "not this machine" in rebound.json()["error"]
    assert_secured(rebound)
    cross_site = await client.post("/api/chats", headers={"Origin": "https://evil.example"})
    assert cross_site.status_code == 403
    assert_secured(cross_site)


async def test_the_event_stream_is_secured(vault: Path) -> None:
    app = create_app(Sidecar(vault, plugin_manager=manager_with()))
    async with (
        live_server(app) as url,
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/api/events") as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        assert_secured(response)


async def test_an_unexpected_error_is_secured(vault: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    (broken / "app").mkdir(parents=True)
    (broken / "app" / "index.html.j2").write_text("{{ no_such_name }}", encoding="utf-8")
    app = create_app(Sidecar(vault, plugin_manager=manager_with()))
    async with app.router.lifespan_context(app):
        app.state.templates = page_environment(broken)  # rendering it raises UndefinedError
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            response = await client.get("/")
    assert response.status_code == 500 and "Traceback" not in response.text
    assert_secured(response)


async def test_the_page_allows_exactly_its_panels_inline_code(api: ClientFactory) -> None:
    client, _ = await api(InlinePanelPlugin())
    page = await client.get("/")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert "unsafe" not in policy
    got = directives(policy)
    assert got["script-src"] == ["'self'", sha256_source(PANEL_SCRIPT)]
    assert got["style-src"] == ["'self'", sha256_source(PANEL_STYLE)]
    assert {k: v for k, v in got.items() if not k.endswith(("script-src", "style-src"))} == {
        k: v for k, v in directives(STRICT).items() if k not in ("script-src", "style-src")
    }
    assert_secured(page, policy)
    # Only the page carries hashes; the files and the API keep the strict policy.
    assert_secured(await client.get("/static/app/bridge.js"))


async def test_the_smart_context_panel_is_allowed_by_hash(vault: Path) -> None:
    sidecar = Sidecar(vault, plugin_manager=manager_with(SmartContextPlugin()))
    async with running_app(create_app(sidecar)) as client:
        page = await client.get("/")
    policy = directives(page.headers["content-security-policy"])
    scripts = re.findall(r"<script>(.*?)</script>", page.text, flags=re.DOTALL)
    styles = re.findall(r"<style>(.*?)</style>", page.text, flags=re.DOTALL)
    assert len(scripts) == 1 and len(styles) == 1  # the panel's own; the page has none
    assert policy["script-src"] == ["'self'", sha256_source(scripts[0])]
    assert policy["style-src"] == ["'self'", sha256_source(styles[0])]
