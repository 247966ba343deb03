"""The vault's MCP servers as items: config on disk, last known tools, background listing,
failures reported by name, calls (the example server, over stdio, for real)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from smart_context.items.catalog import ItemCatalog
from smart_context.items.servers import (
    MAX_TOOLS_PER_SERVER,
    ToolServers,
    read_mcp_config,
    tool_items,
)
from smart_context.mcp.client import ToolInfo, resolve_command, save_tool_list
from smart_context.mcp.config import McpServer

EXAMPLE = (
    "[mcp.servers.example]\n"
    f'command = "{sys.executable}"\n'
    'args = ["-m", "smart_context_hosts.example_mcp"]\n'
    'include = "agent"\n'
    "[mcp.servers.example.tools]\n"
    'word_count = "manual"\n'
)
GHOST = '[mcp.servers.ghost]\ncommand = "smart-context-no-such-server"\ntimeout = 5\n'


def write_config(vault: Path, text: str) -> None:
    (vault / ".vault.toml").write_text(text, encoding="utf-8")


def test_a_vault_without_a_config_or_servers_has_no_tools(tmp_path: Path) -> None:
    assert read_mcp_config(tmp_path).servers == ()
    write_config(tmp_path, "[plugins.smart_context]\nenabled = true\n")
    assert ToolServers(tmp_path).items() == ([], [])


def test_a_config_that_is_not_toml_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    write_config(tmp_path, "[mcp.servers.x\ncommand = ")
    items, problems = ToolServers(tmp_path).items()
    assert items == [] and len(problems) == 1
    assert problems[0].source == ".vault.toml" and "cannot read" in problems[0].message


def test_tools_take_their_mode_tool_then_server_then_always() -> None:
    servers = (
        McpServer("files", command="x", include="agent", tools={"read": "manual"}),
        McpServer("plain", command="y"),
    )
    lists = {
        "files": [ToolInfo("read", "Read a file"), ToolInfo("write", "Write a file")],
        "plain": [ToolInfo("ping", "", {"type": "object", "properties": {}})],
    }
    items, problems = tool_items(servers, lists)
    assert problems == []
    assert [(i.server_name, i.name, i.include) for i in items] == [
        ("files", "read", "manual"),
        ("files", "write", "agent"),
        ("plain", "ping", "always"),
    ]
    assert items[2].input_schema == {"type": "object", "properties": {}}


def test_tools_the_model_could_not_be_offered_are_left_out_by_name() -> None:
    long_name = "t" * 70
    lists = {
        "s": [
            ToolInfo("ok"),
            ToolInfo("ok"),
            ToolInfo(long_name),
            ToolInfo("has space"),
            *[ToolInfo(f"n{i}") for i in range(MAX_TOOLS_PER_SERVER)],
        ]
    }
    items, problems = tool_items((McpServer("s", command="x"),), lists)
    messages = " | ".join(p.message for p in problems)
    assert "offers" in messages and "twice" in messages and "has space" in messages
    assert long_name[:40] in messages and all(p.source == "MCP server s" for p in problems)
    assert len(items) < MAX_TOOLS_PER_SERVER and "ok" in {i.name for i in items}


async def test_the_example_server_is_listed_in_the_background_and_its_tools_kept(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, EXAMPLE)
    catalog = ItemCatalog(tmp_path)
    first = await catalog.current()  # nothing known yet: the listing starts now
    assert [i for i in first.items if i.type == "tool"] == []
    await catalog.servers.settle()
    tools = {i.name: i for i in (await catalog.current()).items if i.type == "tool"}
    assert {"convert_units", "hydration", "yen_to_euro", "time_in", "word_count"} <= set(tools)
    assert tools["word_count"].include == "manual" and tools["hydration"].include == "agent"
    assert (tmp_path / ".memory/smart_context/tools/example.json").is_file()
    # the server going away costs nothing: a new process knows the tools from the file
    write_config(tmp_path, EXAMPLE.replace(sys.executable, "smart-context-no-such-server"))
    again = ItemCatalog(tmp_path)
    assert {i.name for i in (await again.current()).items if i.type == "tool"} == set(tools)
    await again.servers.settle()  # the changed command is tried, fails, and is reported
    current = await again.current()
    assert {i.name for i in current.items if i.type == "tool"} == set(tools)
    [problem] = current.problems
    assert problem.source == "MCP server example" and "not found" in problem.message
    assert "5 last known tools" in problem.message


async def test_a_server_that_fails_is_reported_by_name_and_the_others_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_tool_list(tmp_path, "example", [ToolInfo("kept", "from last time")])
    write_config(tmp_path, EXAMPLE + GHOST)
    servers = ToolServers(tmp_path)
    await servers.refresh()
    assert set(servers.failures()) == {"ghost"}
    items, problems = servers.items()
    assert "kept" not in {i.name for i in items}  # the fresh list replaced the old one
    assert [p.source for p in problems] == ["MCP server ghost"]
    assert "none of its tools are known yet" in problems[0].message
    assert any("ghost" in r.getMessage() for r in caplog.records)


async def test_a_tool_call_runs_on_the_declared_server(tmp_path: Path) -> None:
    write_config(tmp_path, EXAMPLE)
    servers = ToolServers(tmp_path)
    result = await servers.call("example", "yen_to_euro", {"yen": 16000})
    assert result.ok and "100" in result.text
    bad = await servers.call("example", "yen_to_euro", {"yen": "lots"})
    assert not bad.ok  # the tool's own error, for the model to read
    with pytest.raises(LookupError, match="No MCP server named 'nope'"):
        await servers.call("nope", "x", {})


async def test_closing_stops_a_listing_under_way(tmp_path: Path) -> None:
    write_config(tmp_path, EXAMPLE)
    catalog = ItemCatalog(tmp_path)
    await catalog.current()
    await catalog.servers.close()
    await catalog.servers.close()  # twice is fine


def test_a_server_installed_beside_python_starts_without_activating_its_venv() -> None:
    here = Path(sys.executable).parent
    assert resolve_command("smart-context-example-mcp") == str(here / "smart-context-example-mcp")
    assert resolve_command("no-such-command-anywhere") == "no-such-command-anywhere"
    assert resolve_command("/bin/sh") == "/bin/sh"


async def test_calls_and_the_listing_share_one_running_server(tmp_path: Path) -> None:
    script = Path(__file__).with_name("slow_mcp_server.py")
    write_config(
        tmp_path, f'[mcp.servers.slow]\ncommand = "{sys.executable}"\nargs = ["{script}"]\n'
    )
    servers = ToolServers(tmp_path)
    try:
        await servers.refresh()
        first = (await servers.call("slow", "pid", {})).text
        assert (await servers.call("slow", "pid", {})).text == first
    finally:
        await servers.close()
