"""``smart_context.call_tool`` refuses what it cannot run, before any server is started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smart_context.commands.items import MAX_ARGUMENTS_CHARS


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A plain vault folder (the plugin's fixtures want a path, not the items' helper)."""
    (tmp_path / ".memory").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"server_name": "", "name": "x"}, "server_name is required"),
        ({"server_name": 3, "name": "x"}, "server_name is required"),
        ({"server_name": "s", "name": None}, "name is required"),
        ({"server_name": "s", "name": "x", "arguments": "yen=5"}, "must be an object"),
        (
            {"server_name": "s", "name": "x", "arguments": {"t": "x" * MAX_ARGUMENTS_CHARS}},
            "longer than",
        ),
        ({"server_name": "../etc", "name": "x", "arguments": {}}, "No MCP server named"),
    ],
)
async def test_bad_calls_are_refused_with_a_reason(
    start: Any, arguments: dict[str, Any], says: str
) -> None:
    running = await start()
    result = await running.commands.handlers["smart_context.call_tool"](**arguments)
    assert result["status"] == "error" and result["reason"] == "bad_arguments"
    assert says in result["error"] and len(result["error"]) < 300
