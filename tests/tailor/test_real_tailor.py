"""Against a real Tailor checkout, when ``TAILOR_SRC`` names one (skipped otherwise).

Two levels, so that a checkout is useful even without Tailor's heavy dependencies:

- Tailor's own files, loaded one by one (they need only pydantic, and loguru for the tool
  registry): our memory tools through Tailor's real schema generator and registry, our
  pipeline hooks on Tailor's real ``PipelineContext`` model, and every command and event name of
  Tailor's own Smart Context plugin and panel answered by ours;
- the whole sidecar (``import sidecar`` needs websockets, langgraph, litellm, keyring...):
  the real ``VaultBrain`` loads Tailor's memory plugin and ours from a vault, runs the context
  phase, the update race against the real memory plugin, the panel and the tools, and unloads.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from smart_context.commands import COMMANDS
from smart_context.config import Settings
from smart_context.events import FILTER_CHANGED, TOPICS_UPDATED
from smart_context.panel import PANEL_ID
from smart_context.plugin import SmartContextPlugin
from smart_context.services import Services
from smart_context_hosts.tailor.host import HIGHLIGHT_APPLIED
from smart_context_hosts.tailor.pipeline import PipelineHooks
from smart_context_hosts.tailor.tools import memory_tools
from tests.fakes import FakeEmbedder, FakeHost, make_messages
from tests.tailor.conftest import drop_standin_modules, generated_main

SRC = os.environ.get("TAILOR_SRC", "")
pytestmark = pytest.mark.skipif(
    not SRC or not (Path(SRC) / "sidecar" / "api" / "plugin_base.py").is_file(),
    reason="TAILOR_SRC does not name a Tailor checkout",
)


def tailor_file(relative: str, name: str) -> ModuleType:
    """One of Tailor's modules loaded from its file alone (its package's __init__ not run)."""
    spec = importlib.util.spec_from_file_location(name, Path(SRC) / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the model's annotations through it
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        pytest.skip(f"Tailor's {relative} needs {exc.name}, not installed here")
    return module


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    running = Services(FakeHost(tmp_path), Settings(summarizer="offline"), FakeEmbedder())
    running.current_chat_id = "c1"
    yield running
    running.memory_db.close()


async def test_our_tools_through_tailors_schema_generator_and_registry(services: Services) -> None:
    tool = tailor_file("sidecar/decorators.py", "tailor_decorators").tool
    registry = tailor_file(
        "sidecar/pipeline/tool_registry.py", "tailor_tool_registry"
    ).ToolRegistry()
    for function in memory_tools(services, tool):
        registry.register(function)
    retrieve = registry.get_schema("smart_context__retrieve_context")["function"]["parameters"]
    assert retrieve["required"] == ["query"]
    assert retrieve["properties"] == {"query": {"type": "string"}, "limit": {"type": "integer"}}
    store = registry.get_schema("smart_context__store_memory")["function"]["parameters"]
    assert store["required"] == ["content"] and store["properties"]["importance"] == {
        "type": "number"
    }
    stored = await registry.execute("smart_context__store_memory", {"content": "Tea, no sugar."})
    assert stored.startswith("Stored as memory #")
    found = await registry.execute(
        "smart_context__retrieve_context", {"query": "sugar", "limit": 3}
    )
    assert "Tea, no sugar." in found


async def test_our_hooks_on_tailors_pipeline_context(tmp_path: Path) -> None:
    PipelineContext = tailor_file("sidecar/pipeline/types.py", "tailor_types").PipelineContext
    plugin = SmartContextPlugin(FakeEmbedder())
    await plugin.sidecar_startup(
        FakeHost(tmp_path, {"summarizer": "offline", "budget_tokens": 300, "memory_tools": False})
    )
    history = make_messages(
        [f"message number {i} about the garden and its roses" for i in range(40)]
    )
    ctx = PipelineContext(
        message="roses?", original_message="roses?", history=history, metadata={"chat_id": "c1"}
    )
    hooks = PipelineHooks(plugin, lambda: True)
    await hooks.on_context(ctx)
    assert ctx.metadata["smart_context"]["budget"]["limit"] == 300
    chosen = ctx.metadata["smart_context_history"]
    assert 0 < len(chosen) < len(history)
    await hooks.on_prompt(PipelineContext(**ctx.model_dump()))  # a fresh copy, as LangGraph gives
    await plugin.sidecar_shutdown()


def test_tailors_own_smart_context_names_are_answered_by_ours() -> None:
    plugin_dir = Path(SRC) / "example-vault" / "plugins" / "smart_context"
    main = (plugin_dir / "main.py").read_text(encoding="utf-8")
    panel = (plugin_dir / "panel.html").read_text(encoding="utf-8")
    commands = set(re.findall(r"register_command\(\s*\"([\w.]+)\"", main))
    commands |= set(re.findall(r"window\.request\(\s*'([\w.]+)'", panel))
    assert commands and commands <= set(COMMANDS)
    events = set(re.findall(r"self\.emit\(\s*\"([\w.]+)\"", main))
    events |= {e for e in re.findall(r"addEventListener\('([\w.]+)'", panel) if "." in e}
    assert events and events <= {TOPICS_UPDATED, FILTER_CHANGED, HIGHLIGHT_APPLIED}


# -- the whole sidecar ---------------------------------------------------------------------------


class RecordingSocket:
    """Where Tailor's brain sends JSON-RPC messages for the window."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def is_connected(self) -> bool:
        return True

    def send_to_rust(self, message: Any) -> None:
        self.sent.append(json.loads(message) if isinstance(message, str) else message)

    def events(self, event_type: str) -> list[dict[str, Any]]:
        params = [m.get("params", {}) for m in self.sent]
        return [p.get("data", {}) for p in params if p.get("event_type") == event_type]


@pytest.fixture
def real_sidecar(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    drop_standin_modules()
    monkeypatch.syspath_prepend(SRC)
    try:
        module = importlib.import_module("sidecar.vault_brain")
    except ImportError as exc:
        drop_standin_modules()
        pytest.skip(f"Tailor's sidecar needs {exc.name}, not installed here")
    yield module
    module.VaultBrain._instance = None
    drop_standin_modules()


def real_vault(root: Path) -> Path:
    vault = root / "vault"
    shutil.copytree(
        Path(SRC) / "example-vault" / "plugins" / "memory", vault / "plugins" / "memory"
    )
    (vault / "plugins" / "smart_context").mkdir(parents=True)
    (vault / "plugins" / "smart_context" / "main.py").write_text(generated_main(), encoding="utf-8")
    (vault / ".vault.toml").write_text(
        "[plugins.memory]\nenabled = true\n\n[plugins.smart_context]\nenabled = true\n"
        'summarizer = "offline"\ntopic_extractor = "offline"\n',
        encoding="utf-8",
    )
    return vault


async def test_inside_tailors_real_vault_brain(real_sidecar: ModuleType, tmp_path: Path) -> None:
    from sidecar.pipeline.events import PipelineEvents
    from sidecar.pipeline.types import PipelineContext

    socket = RecordingSocket()
    brain = real_sidecar.VaultBrain(real_vault(tmp_path), socket)
    await brain.initialize()
    ours = brain.plugins["smart_context"].smart_context
    assert ours.error is None and "smart_context.set_filter" in brain.commands
    history = make_messages([f"line {i}" for i in range(6)])
    await brain.execute_command("memory.save_chat", chat_id="c1", data={"messages": history})
    ctx = PipelineContext(
        message="hi", original_message="hi", history=history, metadata={"chat_id": "c1"}
    )
    await brain.publish(PipelineEvents.CONTEXT, sequential=True, ctx=ctx)
    assert ctx.metadata["smart_context"]["mode"] == "full"

    async def append(i: int) -> None:
        data = (await brain.execute_command("memory.load_chat", chat_id="c1"))["data"]
        await asyncio.sleep(0.001)
        data["messages"].append({"id": f"r{i}", "role": "user", "content": f"racing {i}"})
        await brain.execute_command("memory.save_chat", chat_id="c1", data=data)

    async def appender() -> None:
        for i in range(50):
            await append(i)

    async def updater() -> None:
        for j in range(50):
            await ours.core.services.host.memory.update_chat("c1", lambda d, j=j: {**d, "n": j})
            await asyncio.sleep(0.001)

    await asyncio.gather(appender(), updater())
    stored = (await brain.execute_command("memory.load_chat", chat_id="c1"))["data"]
    assert [m["id"] for m in stored["messages"]][6:] == [f"r{i}" for i in range(50)]

    await brain.execute_command("system.client_ready")
    actions = [(d.get("action"), d.get("id")) for d in socket.events("UI_COMMAND")]
    assert ("register_panel", PANEL_ID) in actions and ("set_panel", PANEL_ID) in actions
    assert brain.tool_registry.get_schema("smart_context__store_memory") is not None
    done = await brain.execute_command("system.unload_plugin", plugin_id="smart_context")
    assert done["status"] == "success"
    assert "smart_context.set_filter" not in brain.commands
    assert brain.tool_registry.get_schema("smart_context__store_memory") is None


class ScriptedChatModel:
    """Stands in for Tailor's LLM service on its pipeline: streams a fixed reply."""

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, str]]] = []

    async def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        self.prompts.append(messages)

        async def tokens() -> Any:
            for token in ("Noted", ", ", "thanks."):
                yield token

        return tokens()


async def test_a_reply_streamed_by_real_tailor_is_stored_with_its_record(
    real_sidecar: ModuleType, tmp_path: Path
) -> None:
    socket = RecordingSocket()
    brain = real_sidecar.VaultBrain(real_vault(tmp_path), socket)
    await brain.initialize()
    model = ScriptedChatModel()
    brain.pipeline._llm_service = model  # Tailor's pipeline asks its LLM service lazily
    for n in range(2):
        result = await brain.execute_command(
            "chat.send", message=f"question {n}", chat_id="c7", stream=True, stream_id=f"s{n}"
        )
        assert result["status"] == "success"  # Tailor streams in a task of its own
        async with asyncio.timeout(30):
            while len(socket.events("CHAT_STREAM_END")) <= n:
                await asyncio.sleep(0.01)
        assert socket.events("CHAT_STREAM_END")[n]["response"] == "Noted, thanks."
    services = brain.plugins["smart_context"].smart_context.core.services
    await services.settle()
    assert model.prompts[-1][-1] == {"role": "user", "content": "question 1"}
    stored = (await brain.execute_command("memory.load_chat", chat_id="c7"))["data"]
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"] * 2
    for reply in stored["messages"][1::2]:
        assert reply["smart_context"]["mode"] == "full"
        assert reply["smart_context"]["usage"]["sent_tokens"] > 0
    assert {"chat_id": "c7", "message_count": 4} in socket.events("chat.updated")
    await brain.execute_command("system.unload_plugin", plugin_id="smart_context")
