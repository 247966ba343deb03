"""Commands that only show leave the vault byte for byte as it was; writing takes ``--save``.

Each command runs as a user runs it, ``python -m smart_context_hosts.cli`` in a subprocess, on a
copy of the example vault whose every file (name and bytes) is compared before and after.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smart_context.memory.db import MemoryDB

REPO = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``smart-context ARGS`` as a shell runs it; fails the test on a non-zero exit."""
    done = subprocess.run(
        [sys.executable, "-m", "smart_context_hosts.cli", *args],
        cwd=REPO,  # this checkout's package, not another one installed
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def snapshot(vault: Path) -> dict[str, bytes]:
    """Every file of ``vault`` by its path in the vault, with its bytes."""
    return {
        path.relative_to(vault).as_posix(): path.read_bytes()
        for path in sorted(vault.rglob("*"))
        if path.is_file()
    }


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The paths added, removed or changed between two snapshots."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


@pytest.fixture
def example_vault(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    shutil.copytree(REPO / "example-vault", vault)
    (vault / "notes" / "photo.jpg").write_bytes(b"\xff\xd8 not a note")  # never read or copied
    return vault


def store_a_memory(vault: Path) -> None:
    """A memory database as a sidecar leaves it when it stops: closed, no -wal or -shm."""
    db = MemoryDB(vault)
    db.add_memory("Rye needs more water than wheat.")
    db.close()
    assert not list((vault / ".memory").glob("*-wal"))


def test_showing_commands_leave_the_vault_byte_identical(example_vault: Path) -> None:
    vault = str(example_vault)
    store_a_memory(example_vault)
    before = snapshot(example_vault)
    topics = run("topics", vault, "sourdough").stdout
    assert "chat sourdough:" in topics and "messages" in topics
    assert "not saved: --save writes them" in topics
    assert changed(before, snapshot(example_vault)) == []
    context = run("context", vault, "sourdough", "--message", "How long should it rise?").stdout
    assert "messages in context" in context and "notes:" in context
    assert (
        "agent selection for"
        in run("items", vault, "--chat", "sourdough", "--query", "bread").stdout
    )
    assert "Rye needs more water" in run("memories", vault, "--json").stdout
    for report in (["stats", vault], ["doctor", vault]):
        run(*report)
    assert changed(before, snapshot(example_vault)) == []


def test_topics_save_writes_the_topics_to_the_chat(example_vault: Path) -> None:
    chat = example_vault / ".memory" / "sourdough.json"
    assert json.loads(chat.read_text(encoding="utf-8"))["topics"] == []
    out = run("topics", str(example_vault), "sourdough", "--save").stdout
    assert "not saved" not in out
    assert json.loads(chat.read_text(encoding="utf-8"))["topics"]


def test_items_for_a_chat_prints_its_selection_settings(example_vault: Path) -> None:
    vault = str(example_vault)
    chat = example_vault / ".memory" / "japan-trip.json"
    data = json.loads(chat.read_text(encoding="utf-8"))
    data["context_settings"] = {"context_top_n": 2}
    chat.write_text(json.dumps(data), encoding="utf-8")
    out = run("items", vault, "--chat", "japan-trip").stdout
    assert "selection settings of chat japan-trip: preset custom" in out
    assert "rules and references: top K 20, top N 2, include score 0.7" in out
    assert "tools: top K 20, top N 5, include score 0.7" in out
    assert "expansion: depth 0, threshold 0.75, top N 3" in out
    assert "set by the chat: context_top_n 2 (vault: 5)" in out
