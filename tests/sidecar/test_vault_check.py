"""Leftovers of a crash are tidied at start, damaged files are listed, a person's files are kept."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from smart_context_hosts import cli
from smart_context_hosts.sidecar import chatfile
from smart_context_hosts.sidecar.memory import ChatMemory
from smart_context_hosts.sidecar.vault_check import check_vault, tidy_leftovers
from tests.sidecar.test_chatfile import crash_while_applying


def chat(*ids: str) -> bytes:
    return chatfile.render({"messages": [{"id": i, "role": "user", "content": i} for i in ids]})[0]


def old(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    past = time.time() - 3600
    os.utime(path, (past, past))
    return path


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    folder = tmp_path / ".memory"
    folder.mkdir()
    (folder / "c1.json").write_bytes(chat("a"))
    return folder


def test_leftovers_are_removed_and_lost_messages_kept(memory: Path) -> None:
    stale_copy = old(memory / ".c1.json.k2j4h5g6.tmp", chat("a"))  # nothing the chat lacks
    holds_more = old(memory / ".c1.json.zz9x8c7v.tmp", chat("a", "b"))
    cache = old(memory / ".c1.embeddings.json.abcdefgh.tmp", b"{")
    in_progress = memory / ".c1.json.q1w2e3r4.tmp"  # young: another process may be writing it
    in_progress.write_bytes(b"{")
    settings = old(memory.parent / "..vault.toml.a1b2c3d4.tmp", b"x")
    theirs = [
        old(memory / "notes.tmp", b"x"),
        old(memory / ".c1.json.mine", b"x"),
        old(memory.parent / ".todo.md.a1b2c3d4.tmp", b"x"),  # a person's file in the vault
    ]
    done = tidy_leftovers(memory.parent)
    assert not stale_copy.exists() and not cache.exists() and not holds_more.exists()
    assert not settings.exists()
    (recovered,) = memory.glob("c1.json.recovered-*")
    assert chatfile.parse(recovered.read_bytes()).data["messages"][-1]["id"] == "b"
    assert in_progress.exists() and all(p.exists() for p in theirs)
    assert len(done) == 4 and any("recovered" in line for line in done)


async def test_start_finishes_an_interrupted_write(
    memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = memory / "c1.json"
    _, wanted = crash_while_applying(monkeypatch, path)  # a kill -9 after the journal
    assert "c1.json" in " ".join(await ChatMemory(memory.parent).tidy())
    assert path.read_bytes() == wanted and not chatfile.journal_path(path).exists()


def test_doctor_lists_damaged_files_and_leftovers_and_changes_nothing(
    memory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = memory.parent
    assert cli.main(["doctor", str(vault)]) == 0
    assert "no damaged files" in capsys.readouterr().out
    (memory / "c2.json").write_text("{broken")
    (memory / "c3.json.corrupt-20261123T101010123456Z").write_text("{old")
    old(memory / ".c1.json.abcd1234.tmp", b"{")
    before = sorted(p.name for p in memory.iterdir())
    assert cli.main(["doctor", str(vault)]) == 1
    out = capsys.readouterr().out
    assert ".memory/c2.json: not valid JSON" in out
    assert ".memory/c3.json.corrupt-20261123T101010123456Z" in out
    assert ".memory/.c1.json.abcd1234.tmp" in out
    assert sorted(p.name for p in memory.iterdir()) == before
    report = check_vault(vault)
    assert [p for p, _ in report.damaged] == [".memory/c2.json"]
    assert json.loads((memory / "c1.json").read_bytes())["messages"][0]["id"] == "a"
