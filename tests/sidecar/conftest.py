"""Fixtures for the reference sidecar: vaults on disk, test plugins, an API client, a live
server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pluggy
import pytest
from starlette.applications import Starlette

from smart_context.hookspecs import hookimpl
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.plugins import get_plugin_manager
from smart_context_hosts.sidecar.runtime import Sidecar
from smart_context_hosts.sidecar.serve import serving

BASE_URL = "http://127.0.0.1:8765"


def write_settings(vault: Path, text: str) -> None:
    """Write the vault's ``.vault.toml``."""
    (vault / ".vault.toml").write_text(text, encoding="utf-8")


def llm_table(base_url: str, key_env: str | None = None, **models: str) -> str:
    """An ``[llm]`` table for ``base_url``, no retries (tests want failures to be quick)."""
    lines = ["[llm]", f'base_url = "{base_url}"', "max_retries = 0", "timeout = 5"]
    if key_env:
        lines.append(f'api_key_env = "{key_env}"')
    lines.append("[llm.models]")
    lines += [f'{category} = "{name}"' for category, name in models.items()]
    return "\n".join(lines) + "\n"


def chat_on_disk(vault: Path, chat_id: str) -> dict[str, Any]:
    """The chat file as stored."""
    return dict(json.loads((vault / ".memory" / f"{chat_id}.json").read_text(encoding="utf-8")))


class Recorder:
    """A real pluggy plugin that records every hook call, mixing plain and async hooks."""

    def __init__(self, name: str = "recorder") -> None:
        self.name = name
        self.calls: list[str] = []
        self.host: Any = None
        self.seen_history: list[list[dict[str, Any]]] = []
        self.responses: list[str | None] = []

    @hookimpl
    def sidecar_startup(self, host: Any) -> None:
        self.calls.append("sidecar_startup")
        self.host = host

    @hookimpl
    def sidecar_register_commands(self, commands: Any) -> None:
        self.calls.append("sidecar_register_commands")
        commands.register("test.echo", self.echo)
        commands.register("test.boom", self.boom)

    @hookimpl
    def sidecar_client_connected(self, ui: Any) -> None:
        self.calls.append("sidecar_client_connected")
        ui.register_panel("test-panel", "Test <Panel>", icon="star")
        ui.set_panel_content("test-panel", "<p id='test-panel-body'>hello</p>")

    @hookimpl
    async def pipeline_input(self, ctx: Any) -> None:
        self.calls.append("pipeline_input")

    @hookimpl
    async def pipeline_context(self, ctx: Any) -> None:
        self.calls.append("pipeline_context")
        self.seen_history.append(list(ctx.history))
        ctx.metadata["smart_context"] = {
            "mode": "full",
            "included_ids": [m["id"] for m in ctx.history],
        }

    @hookimpl
    def pipeline_prompt(self, ctx: Any) -> None:
        self.calls.append("pipeline_prompt")

    @hookimpl
    def pipeline_llm(self, ctx: Any) -> None:
        self.calls.append("pipeline_llm")

    @hookimpl
    async def pipeline_post_process(self, ctx: Any) -> None:
        self.calls.append("pipeline_post_process")
        self.responses.append(ctx.response)

    @hookimpl
    def pipeline_output(self, ctx: Any) -> None:
        self.calls.append("pipeline_output")

    @hookimpl
    async def sidecar_shutdown(self) -> None:
        self.calls.append("sidecar_shutdown")

    async def echo(self, **kwargs: Any) -> dict[str, Any]:
        return {"status": "success", "got": kwargs}

    def boom(self, reason: str = "x") -> dict[str, Any]:
        raise RuntimeError(f"boom: {reason}")


def manager_with(*plugins: object) -> pluggy.PluginManager:
    """A plugin manager with our hookspecs and only ``plugins`` (no entry points)."""
    pm = get_plugin_manager(None, load_entrypoints=False)
    for plugin in plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm


@asynccontextmanager
async def running_app(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan run, and a client talking to it in-process."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            yield client


@asynccontextmanager
async def live_server(app: Starlette, **limits: Any) -> AsyncIterator[str]:
    """``app`` served by uvicorn on a free loopback port, configured as ``smart-context serve``
    configures it (``limits``: ``header_timeout``, ``max_connections``); yields the base URL."""
    async with serving(app, log_level="warning", timeout_graceful_shutdown=1, **limits) as url:
        yield url


Client = tuple[httpx.AsyncClient, Sidecar]
ClientFactory = Callable[..., Awaitable[Client]]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """An empty vault folder."""
    folder = tmp_path / "vault"
    folder.mkdir()
    return folder


@pytest.fixture
async def api(vault: Path) -> AsyncIterator[ClientFactory]:
    """``await api(*plugins, settings=TOML)`` -> (client, sidecar) for an app on ``vault``."""
    async with AsyncExitStack() as stack:

        async def start(*plugins: object, settings: str | None = None) -> Client:
            if settings is not None:
                write_settings(vault, settings)
            sidecar = Sidecar(vault, plugin_manager=manager_with(*plugins))
            client = await stack.enter_async_context(running_app(create_app(sidecar)))
            return client, sidecar

        yield start


async def read_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """``(event, data)`` of a ``text/event-stream`` response; comments come as ``(":", text)``."""
    name, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith(":"):
            yield ":", line[1:].strip()
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].strip())
        elif line == "" and data:
            yield name, json.loads("\n".join(data))
            name, data = "message", []
