"""The real SDK client against real servers: the example server over stdio and streamable HTTP,
servers that are missing, hang, quit or never finish a call; and the saved tool lists."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

import smart_context
from smart_context.errors import ToolServerError
from smart_context.mcp.client import (
    SUMMARY_CHARS,
    ToolInfo,
    _tool_result,
    call_tool,
    connect,
    list_tools,
    load_tool_list,
    save_tool_list,
    tool_list_file,
)
from smart_context.mcp.config import McpServer

ROOT = str(Path(smart_context.__file__).resolve().parents[1])
HERE = Path(__file__).parent
# The child finds this checkout's package whatever the venv has installed.
CHILD_ENV = {"PYTHONPATH": ROOT}
HANG = "import sys, time; print('warming up', file=sys.stderr, flush=True); time.sleep(60)"
# The SDK stops a stdio server by closing its stdin, waiting 2 s, then SIGTERM (SIGKILL 2 s later).
SDK_SHUTDOWN = 4.5

TOOLS = ["convert_units", "hydration", "yen_to_euro", "time_in", "word_count"]
CALLS: list[tuple[str, dict[str, Any], str]] = [
    (
        "convert_units",
        {"value": 500, "from_unit": "g", "to_unit": "cup", "ingredient": "flour"},
        "500 g of flour = 4 cup",
    ),
    ("hydration", {"flour_g": 500, "water_g": 350}, "Hydration 70.0% (350 g water / 500 g flour)"),
    ("yen_to_euro", {"yen": 50_000}, "¥50,000 ≈ €312.50 (at 160 yen per euro)"),
    (
        "time_in",
        {"timezone": "Asia/Tokyo", "at": "2025-04-03T09:00:00+02:00"},
        "Thursday 03 April 2025, 16:00 in Asia/Tokyo (UTC+09:00)",
    ),
    (
        "word_count",
        {"text": "Hello world. How are you?"},
        "5 words, 2 sentences, about 0.1 min to read",
    ),
]


HAS_PROC = Path("/proc/self/stat").exists()


def child_pids() -> set[int]:
    """This process's children, running or zombie, from /proc (empty where there is none)."""
    me = os.getpid()
    children = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            children.add(int(entry.name))
    return children


@pytest.fixture
def stdio_server() -> McpServer:
    return McpServer(
        "example",
        command=sys.executable,
        args=("-m", "smart_context_hosts.example_mcp"),
        env=CHILD_ENV,
        timeout=20,
    )


@pytest.fixture(scope="module")
def http_server() -> Iterator[McpServer]:
    """The example server on a free loopback port, for the whole module."""
    process = subprocess.Popen(
        [sys.executable, "-m", "smart_context_hosts.example_mcp", "--http", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **CHILD_ENV},
    )
    assert process.stderr is not None
    drain = threading.Thread(target=process.stderr.read, daemon=True)
    try:
        line = process.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/mcp", line)
        assert found, f"the example server did not start: {line!r}"
        drain.start()  # its later output must never fill the pipe
        yield McpServer("example_http", url=found.group(0), timeout=10)
    finally:
        process.terminate()
        process.wait(10)
        if drain.is_alive():
            drain.join(5)
        process.stderr.close()


async def test_lists_and_calls_each_tool_over_one_stdio_connection(
    stdio_server: McpServer,
) -> None:
    before = child_pids()
    async with connect(stdio_server) as session:
        assert len(child_pids() - before) == 1 or not HAS_PROC  # the server runs meanwhile
        tools = await session.list_tools()
        results = [await session.call_tool(name, arguments) for name, arguments, _ in CALLS]
        bad = await session.call_tool("hydration", {"flour_g": -1, "water_g": 1})
        unknown = await session.call_tool("bake_bread", {})
    assert child_pids() - before == set()

    assert [t.name for t in tools] == TOOLS
    assert all(t.description and t.input_schema["type"] == "object" for t in tools)
    convert = tools[0].input_schema
    assert convert["required"] == ["value", "from_unit", "to_unit"]
    assert "cup" in convert["properties"]["from_unit"]["enum"]
    for (name, _, text), result in zip(CALLS, results, strict=True):
        assert (result.ok, result.text, result.summary) == (True, text, f"{name}: {text}")
        assert result.structured is not None and result.structured["text"] == text
    assert not bad.ok and "greater than 0" in bad.text and bad.structured is None
    assert bad.summary.startswith("hydration failed: ") and len(bad.summary) <= SUMMARY_CHARS
    assert not unknown.ok and "Unknown tool" in unknown.text


async def test_lists_tools_over_http(http_server: McpServer) -> None:
    assert [t.name for t in await list_tools(http_server)] == TOOLS


@pytest.mark.parametrize(("name", "arguments", "text"), CALLS, ids=[c[0] for c in CALLS])
async def test_calls_each_tool_over_http(
    http_server: McpServer, name: str, arguments: dict[str, Any], text: str
) -> None:
    result = await call_tool(http_server, name, arguments)
    assert (result.ok, result.text) == (True, text)


async def test_a_bad_argument_is_a_tool_error_not_an_exception(http_server: McpServer) -> None:
    wrong_type = await call_tool(http_server, "yen_to_euro", {"yen": "lots"})
    no_sense = await call_tool(http_server, "time_in", {"timezone": "Mars/Olympus_Mons"})
    not_an_object = await call_tool(http_server, "word_count", ["text"])  # type: ignore[arg-type]

    assert (wrong_type.ok, wrong_type.text) == (False, "“yen” must be a number.")
    assert not no_sense.ok and "Unknown time zone 'Mars/Olympus_Mons'" in no_sense.text
    assert not not_an_object.ok and "arguments must be a JSON object" in not_an_object.text


async def test_a_missing_argument_is_named_in_words(http_server: McpServer) -> None:
    result = await call_tool(http_server, "time_in", {"zone": "Asia/Tokyo"})
    assert not result.ok
    assert result.text == "time_in needs the argument “timezone” (it was given “zone”)."
    assert result.summary.startswith("time_in failed: time_in needs the argument “timezone”")


async def test_the_callers_own_error_passes_through_unchanged(http_server: McpServer) -> None:
    with pytest.raises(KeyError, match="mine"):
        async with connect(http_server) as session:
            await session.list_tools()
            raise KeyError("mine")


async def test_a_missing_command_is_reported_at_once() -> None:
    server = McpServer("ghost", command="smart-context-no-such-server")
    start = time.monotonic()
    with pytest.raises(ToolServerError, match="'smart-context-no-such-server' was not found"):
        await list_tools(server, timeout=10)
    assert time.monotonic() - start < 3  # the first call also imports the SDK


async def test_a_server_that_quits_at_start_is_reported_with_its_last_output() -> None:
    script = "import sys; print('no config file', file=sys.stderr); sys.exit(2)"
    server = McpServer("quitter", command=sys.executable, args=("-c", script))
    with pytest.raises(ToolServerError, match=r"closed the connection.*last output: no config"):
        await call_tool(server, "anything", {}, timeout=10)


async def test_an_unreachable_url_is_reported() -> None:
    with socket.socket() as sock:  # a port nobody listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    with pytest.raises(ToolServerError, match=f"could not be reached at {url}"):
        await list_tools(McpServer("gone", url=url), timeout=5)


async def test_a_server_that_hangs_times_out_and_is_stopped(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="smart_context.mcp.servers")
    server = McpServer("sleepy", command=sys.executable, args=("-c", HANG))
    before = child_pids()
    start = time.monotonic()

    with pytest.raises(ToolServerError, match=r"did not start and answer within 0.5 s.*warming"):
        await list_tools(server, timeout=0.5)

    assert time.monotonic() - start < 0.5 + SDK_SHUTDOWN
    assert child_pids() - before == set()
    assert "sleepy: warming up" in caplog.text  # its stderr went to the log...
    assert "warming up" not in capfd.readouterr().err  # ...and not to the terminal


async def test_a_cancelled_caller_leaves_no_server_behind() -> None:
    # Cancelled while it starts; this one leaves when its stdin closes, sparing the SDK's 2 s.
    waits = "import sys; sys.stdin.read()"
    server = McpServer("starting", command=sys.executable, args=("-c", waits))
    before = child_pids()
    with anyio.move_on_after(0.3) as scope:
        await list_tools(server, timeout=30)
    assert scope.cancelled_caught
    assert child_pids() - before == set()


async def test_a_tool_that_never_finishes_times_out() -> None:
    server = McpServer(
        "slow",
        command=sys.executable,
        args=(str(HERE / "slow_mcp_server.py"),),
        env=CHILD_ENV,
        timeout=20,
    )
    before = child_pids()
    async with connect(server) as session:
        assert (await session.call_tool("wait", {"seconds": 0})).text == "waited 0.0 s"
        start = time.monotonic()
        with pytest.raises(
            ToolServerError, match=r"did not answer within 0\.5 s while calling 'wait'"
        ):
            await session.call_tool("wait", {"seconds": 60}, timeout=0.5)
        assert time.monotonic() - start < 2
    assert child_pids() - before == set()


def test_content_other_than_text_is_named_for_the_model() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="Here:"),
            ImageContent(type="image", data="AAAA", mime_type="image/png"),
            ResourceLink(type="resource_link", name="notes", uri="file:///notes.md"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///a.txt", text="inline text"),
            ),
        ]
    )
    assert _tool_result("show", result).text == (
        "Here:\n[image: image/png, 3 bytes]\n[resource: notes file:///notes.md]\ninline text"
    )


def test_importing_the_client_does_not_load_the_sdk() -> None:
    code = (
        "import sys, smart_context.mcp.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


async def test_a_listed_tool_list_survives_the_server(
    tmp_path: Path, http_server: McpServer
) -> None:
    tools = await list_tools(http_server)
    save_tool_list(tmp_path, "example_http", tools)

    path = tmp_path / ".memory" / "smart_context" / "tools" / "example_http.json"
    assert tool_list_file(tmp_path, "example_http") == path
    assert load_tool_list(tmp_path, "example_http") == tools
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert (saved["format"], saved["server"], len(saved["tools"])) == (1, "example_http", 5)
    assert [p.name for p in path.parent.iterdir()] == ["example_http.json"]  # no temp files


def test_no_saved_tool_list_is_none(tmp_path: Path) -> None:
    assert load_tool_list(tmp_path, "never") is None


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"format": 2, "tools": []}',
        b'{"format": 1, "tools": {}}',
        b'{"format": 1, "tools": [{"description": "no name"}]}',
        b'{"format": 1, "tools": [{"name": "t", "input_schema": "nope"}]}',
    ],
)
def test_a_damaged_tool_list_is_ignored_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    path = tool_list_file(tmp_path, "files")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)

    assert load_tool_list(tmp_path, "files") is None
    assert "Ignoring the damaged tool list" in caplog.text


def test_an_empty_tool_list_round_trips(tmp_path: Path) -> None:
    save_tool_list(tmp_path, "quiet", [])
    assert load_tool_list(tmp_path, "quiet") == []
    only = [ToolInfo("t")]
    save_tool_list(tmp_path, "quiet", only)
    assert load_tool_list(tmp_path, "quiet") == only


@pytest.mark.parametrize("name", ["../escape", "a/b", "", "a__b"])
def test_a_server_name_that_is_not_valid_never_names_a_file(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not a valid MCP server name"):
        save_tool_list(tmp_path, name, [])
