"""Agent selection as a user sees it on the command line: a greeting brings no rule, reference
or tool, a real question still brings its own. Runs ``python -m smart_context_hosts.cli`` in a
subprocess with the local model and the example MCP server, on a small vault."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smart_context.items.select import DOCUMENT_FLOOR, TOOL_FLOOR
from tests.conftest import write_chat
from tests.fakes import make_messages

REPO = Path(__file__).resolve().parents[2]
FILES = {
    "rules/travel.md": "Travel Advice",
    "rules/python.md": "Python Code Style",
    "references/starter.md": "Sourdough Starter",
}
TEXTS = {
    "Travel Advice": "Prefer trains; give journey times door to door and budgets per day.",
    "Python Code Style": "Every Python example is complete and fully annotated; asyncio first.",
    "Sourdough Starter": "Feed the starter 1:5:5 the evening before; it smells of acetone "
    "when it is hungry.",
}


@pytest.fixture
def small_vault(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    for path, name in FILES.items():
        file = vault / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(
            f"---\nname: {name}\ninclude: agent\n---\n{TEXTS[name]}\n", encoding="utf-8"
        )
    (vault / ".vault.toml").write_text(
        "[mcp.servers.example]\n"
        f"command = {json.dumps(sys.executable)}\n"
        'args = ["-m", "smart_context_hosts.example_mcp"]\n'
        'include = "agent"\n',
        encoding="utf-8",
    )
    write_chat(vault, "c1", make_messages(["We bake on Saturday.", "Noted."]))
    return vault


def agent_items(vault: Path, message: str) -> list[dict[str, Any]]:
    """The items agent selection adds for ``message``, as ``context --json`` records them."""
    command = ["context", str(vault), "c1", "--message", message, "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "smart_context_hosts.cli", *command],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["request_context"]["items"]
    return [i for i in items if i["include_mode"] == "agent"]


def test_hello_adds_nothing_and_a_question_still_gets_its_items(small_vault: Path) -> None:
    assert agent_items(small_vault, "hello") == []
    found = agent_items(
        small_vault, "My sourdough starter smells like acetone. How much is 12000 yen in euros?"
    )
    assert {i["name"] for i in found} >= {"Sourdough Starter", "yen_to_euro"}
    floor = {"rule": DOCUMENT_FLOOR, "reference": DOCUMENT_FLOOR, "tool": TOOL_FLOOR}
    assert all(i["similarity_score"] >= floor[i["type"]] for i in found)
