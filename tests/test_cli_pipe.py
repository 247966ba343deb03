"""The command line in a shell pipeline: a reader that goes away ends every command quietly.

Each test runs ``python -m smart_context_hosts.cli`` in a subprocess, as a shell would, with its
standard output a real pipe, on a copy of the example vault.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smart_context_hosts.cli import EXIT_CLOSED_PIPE
from tests.conftest import write_chat
from tests.fakes import make_messages

REPO = Path(__file__).resolve().parents[1]
# About 190 KB of output, well over what a pipe (64 KB) and a reader's buffer hold together:
# once the reader is gone, some of it is certainly still to be written.
LONG_CHAT = 2000


@pytest.fixture
def example_vault(tmp_path: Path) -> Path:
    """A copy of the repository's example vault, plus a chat long enough to overflow a pipe."""
    vault = tmp_path / "vault"
    shutil.copytree(REPO / "example-vault", vault)
    texts = [
        f"Message {i}: sourdough starters, asyncio timeouts, Kyoto in autumn."
        for i in range(LONG_CHAT)
    ]
    write_chat(vault, "long", make_messages(texts))
    trip = json.loads((vault / ".memory" / "japan-trip.json").read_text(encoding="utf-8"))
    trip["topics"] = [{"label": "Kyoto temples", "count": 0, "message_ids": []}]  # to filter by
    write_chat(vault, "japan-trip", **trip)
    return vault


def start(args: list[str], stdout: int, buffered: bool) -> subprocess.Popen[str]:
    """``smart-context ARGS`` with ``stdout`` as its output; stderr is kept to be read."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"  # each print is its own write
    return subprocess.Popen(
        [sys.executable, "-m", "smart_context_hosts.cli", *args],
        cwd=REPO,  # this checkout's package, not another one installed
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def assert_quiet_end(proc: subprocess.Popen[str]) -> None:
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert "Exception ignored" not in err, err  # the interpreter's last flush failing
    assert proc.returncode == EXIT_CLOSED_PIPE


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_context_piped_into_head_ends_quietly(example_vault: Path, buffered: bool) -> None:
    read_end, write_end = os.pipe()
    proc = start(["context", str(example_vault), "long"], write_end, buffered)
    os.close(write_end)
    with open(read_end, "rb") as reader:  # `head -1`: one line, then gone
        first = reader.readline()
    assert first.startswith(b"chat long: mode full")
    assert_quiet_end(proc)


@pytest.mark.parametrize(
    "args",
    [["context", "japan-trip", "--topics", "Kyoto temples"], ["topics", "sourdough"]],
    ids=["context", "topics"],
)
def test_every_command_ends_quietly_when_nobody_reads(example_vault: Path, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    command, *rest = args
    proc = start([command, str(example_vault), *rest], write_end, buffered=True)
    os.close(write_end)
    assert_quiet_end(proc)
