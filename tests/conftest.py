"""Shared fixtures: a real vault in tmp_path, a real PluginManager, hooks called as a host does."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pluggy
import pytest

import smart_context.hookspecs
from smart_context.plugin import SmartContextPlugin
from tests.fakes import FakeCommands, FakeEmbedder, FakeHost, FakeLLM

# The loopback OpenAI-compatible server: any test can ask for the ``openai_server`` fixture.
pytest_plugins = ["tests.openai_server"]


_OWN_CACHE: list[str] = []  # the cache directory this run made, removed when it ends


def pytest_configure(config: pytest.Config) -> None:
    # The derived local model is built into a cache; tests keep theirs out of the user's home.
    if "SMART_CONTEXT_CACHE" not in os.environ:
        os.environ["SMART_CONTEXT_CACHE"] = tempfile.mkdtemp(prefix="smart-context-cache-")
        _OWN_CACHE.append(os.environ["SMART_CONTEXT_CACHE"])


def pytest_unconfigure(config: pytest.Config) -> None:
    # 22 MB a run: left behind, a few hundred runs filled gigabytes of the temp dir
    for path in _OWN_CACHE:
        shutil.rmtree(path, ignore_errors=True)


class Ctx:
    """The pipeline context with exactly the fields of docs/contract.md §1."""

    def __init__(
        self, chat_id: str, history: list[dict[str, Any]], message: str = "next question"
    ) -> None:
        self.message = message
        self.original_message = message
        self.history = history
        self.metadata: dict[str, Any] = {"chat_id": chat_id}
        self.response: str | None = None
        self.should_abort = False


async def call(hook: Any, **kwargs: Any) -> list[Any]:
    """Call a hook like a host: keyword arguments, every awaitable result awaited in order."""
    results = []
    for result in hook(**kwargs):
        results.append(await result if inspect.isawaitable(result) else result)
    return results


def write_chat(vault: Path, chat_id: str, messages: Sequence[dict[str, Any]], **extra: Any) -> Path:
    path = vault / ".memory" / f"{chat_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"messages": list(messages), **extra}), encoding="utf-8")
    return path


def read_chat(vault: Path, chat_id: str) -> dict[str, Any]:
    return dict(json.loads((vault / ".memory" / f"{chat_id}.json").read_text(encoding="utf-8")))


class Running:
    """A started plugin inside a real PluginManager, with its fake host and command registry."""

    def __init__(
        self,
        pm: pluggy.PluginManager,
        plugin: SmartContextPlugin,
        host: FakeHost,
        commands: FakeCommands,
    ) -> None:
        self.pm, self.plugin, self.host, self.commands = pm, plugin, host, commands

    async def command(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return dict(await self.commands.handlers[f"smart_context.{name}"](**kwargs))

    async def context(self, chat_id: str, history: list[dict[str, Any]]) -> Ctx:
        ctx = Ctx(chat_id, history)
        await call(self.pm.hook.pipeline_context, ctx=ctx)
        return ctx

    async def settle(self) -> None:
        assert self.plugin.services is not None
        await self.plugin.services.settle(timeout=30)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    (tmp_path / ".memory").mkdir()
    return tmp_path


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def start(vault: Path, embedder: FakeEmbedder) -> Any:
    """``await start(settings=..., llm=...)`` -> a :class:`Running` plugin on the fake embedder."""

    async def _start(
        settings: dict[str, Any] | None = None,
        llm: FakeLLM | None = None,
        use_embedder: bool = True,
    ) -> Running:
        pm = pluggy.PluginManager(smart_context.hookspecs.PROJECT)
        pm.add_hookspecs(smart_context.hookspecs)
        plugin = SmartContextPlugin(embedder if use_embedder else None)
        pm.register(plugin)
        pm.check_pending()
        host = FakeHost(vault, settings, llm)
        await call(pm.hook.sidecar_startup, host=host)
        commands = FakeCommands()
        await call(pm.hook.sidecar_register_commands, commands=commands)
        return Running(pm, plugin, host, commands)

    return _start
