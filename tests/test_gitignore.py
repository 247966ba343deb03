"""What running the product against the example vault leaves behind is ignored by git: the
embedding caches, the memory database (with its WAL files) and the plugin's own folder, so a
user who tries the commands in a clone sees no stray files; and commands that only show change
no tracked file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

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


def test_what_the_commands_leave_in_the_example_vault_is_ignored(tmp_path: Path) -> None:
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
    vault = str(repo / "example-vault")
    assert main(["context", vault, "sourdough", "--message", "How long should it rise?"]) == 0
    assert main(["memories", vault, "--json"]) == 0
    made = {p.relative_to(repo).as_posix() for p in (repo / "example-vault").rglob("*")}
    assert any("sqlite" in p for p in made), "the memory database was made"
    assert changes(repo) == [], "commands that only show leave the clone as it was"
