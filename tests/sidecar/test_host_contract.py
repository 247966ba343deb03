"""The sidecar's host objects against what the plugin expects of any host (docs/contract.md §1)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from smart_context.host import LLM, UI, Commands, Host, Memory, resolve
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.config import VaultConfig
from smart_context_hosts.sidecar.host import CommandRegistry, PanelCollector, SidecarHost
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.sidecar.conftest import Recorder, live_server, manager_with, read_events, write_settings


def test_objects_satisfy_the_protocols(vault: Path) -> None:
    host = SidecarHost(VaultConfig(vault))
    assert isinstance(host, Host)
    assert isinstance(host.memory, Memory)
    assert isinstance(host.llm, LLM)
    assert isinstance(CommandRegistry(), Commands)
    assert isinstance(PanelCollector(), UI)
    assert host.vault_path == vault


async def test_services_as_the_plugin_uses_them(vault: Path) -> None:
    write_settings(
        vault, "[plugins.smart_context]\nsimilarity_threshold = 0.55\nembedding_search = false\n"
    )
    host = SidecarHost(VaultConfig(vault))
    assert await resolve(host.settings("smart_context")) == {
        "similarity_threshold": 0.55,
        "embedding_search": False,
    }
    assert await resolve(host.settings("not_there")) == {}

    await resolve(
        host.memory.save_chat("c1", {"messages": [{"id": "a", "role": "user", "content": "x"}]})
    )
    topics = [{"label": "Cats", "count": 1}]
    await resolve(host.memory.update_chat("c1", lambda data: {**data, "topics": topics}))
    chat = await resolve(host.memory.load_chat("c1"))
    assert chat["topics"] == topics and chat["messages"][0]["id"] == "a"
    host.emit("smart_context.topics_updated", {"chat_id": "c1"})  # no client: nothing to block


async def test_commands_and_panels_collect_what_plugins_register() -> None:
    commands, ui = CommandRegistry(), PanelCollector()
    commands.register("x.y", lambda **kw: {"status": "success"})
    assert commands.check_call("x.y", {"a": 1})(a=1) == {"status": "success"}
    ui.register_panel("p", "Panel", icon="brain", position="right")
    ui.set_panel_content("p", "<div>hi</div>")
    ui.set_panel_content("unknown", "<b>ignored</b>")
    assert ui.as_list() == [
        {"id": "p", "title": "Panel", "icon": "brain", "position": "right", "html": "<div>hi</div>"}
    ]
    ui.remove_panel("p")
    assert ui.as_list() == []


async def test_emit_reaches_a_connected_browser(vault: Path) -> None:
    recorder = Recorder()
    app = create_app(Sidecar(vault, plugin_manager=manager_with(recorder)))
    async with (
        live_server(app) as url,
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/api/events") as response,
    ):
        events = read_events(response)
        await anext(events)
        recorder.host.emit(
            "smart_context.topics_updated", {"chat_id": "c1", "topics": [{"label": "</script><b>"}]}
        )
        name, data = await anext(events)
    assert name == "smart_context.topics_updated"
    assert data["topics"] == [{"label": "</script><b>"}]
    assert json.dumps(data)
