"""What running the product against the example vault leaves behind is ignored by git: the
embedding caches, the memory database (with its WAL files), the locks and the plugin's own
folder, so a user who serves the example vault in a clone sees no stray files; and commands
that only show change nothing at all."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from smart_context_hosts.cli import main

ROOT = Path(__file__).resolve().parents[1]


def changes(repo: Path) -> list[str]:
    """``git status`` of the clone: untracked files (``??``) and changed tracked ones."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(out.splitlines())


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A git repository holding the example vault and the project's .gitignore, committed."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "clone"
    shutil.copytree(ROOT / "example-vault", repo / "example-vault")
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    who = [
        "-c",
        "user.name=Test",
        "-c",
        "user.email=test@example.invalid",
        "-c",
        "commit.gpgsign=false",
    ]
    for command in (["init", "-q"], ["add", "-A"], [*who, "commit", "-q", "-m", "clone"]):
        subprocess.run(["git", *command], cwd=repo, check=True)
    return repo


def test_commands_that_only_show_leave_the_clone_as_it_was(clone: Path) -> None:
    vault = str(clone / "example-vault")
    assert main(["context", vault, "sourdough", "--message", "How long should it rise?"]) == 0
    assert main(["memories", vault, "--json"]) == 0
    assert changes(clone) == [], "commands that only show leave the clone as it was"


def test_serving_the_example_vault_leaves_no_untracked_file(clone: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "smart_context_hosts.cli", "serve", "example-vault", "--port", "0"],
        cwd=clone,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = [proc.stdout.readline(), proc.stdout.readline()][1].split()[1]
        for _ in range(200):
            try:
                httpx.get(url + "api/chats", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        reply = httpx.post(
            url + "api/chats/sourdough/messages", json={"content": "Rye?"}, timeout=120
        )
        assert reply.status_code == 200, reply.text
        time.sleep(2)  # the background passes after the reply
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    made = {p.name for p in (clone / "example-vault" / ".memory").iterdir()}
    assert "smart_context.sqlite" in made, "the memory database was made"
    assert changes(clone) == [" M example-vault/.memory/sourdough.json"], "only the chat changed"
