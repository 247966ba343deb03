"""``smart-context serve``: the example vault copy, loopback by default, clear start-up errors."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from smart_context.resources import example_vault_dir
from smart_context_hosts.sidecar.serve import (
    LOOP_ENV,
    ServeError,
    add_serve_arguments,
    bind_socket,
    check_bind_host,
    prepare_example_vault,
    run_serve,
    run_server,
)

REPO = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return parser.parse_args(list(argv))


def test_arguments_and_defaults() -> None:
    args = parse()
    assert (args.vault, args.host, args.port, args.allow_remote, args.open_browser) == (
        None,
        "127.0.0.1",
        8765,
        False,
        False,
    )
    args = parse("some/vault", "--host", "0.0.0.0", "--port", "9000", "--allow-remote", "--open")
    assert args.vault == Path("some/vault") and args.allow_remote and args.open_browser


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "http"])
def test_a_port_out_of_range_is_refused_not_taken_modulo(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--port 99999`` listened on 34463 (the socket keeps 16 bits) without a word."""
    with pytest.raises(SystemExit) as exit_:
        parse("--port", port)
    assert exit_.value.code == 2
    assert "port" in capsys.readouterr().err
    assert parse("--port", "65535").port == 65535 and parse("--port", "0").port == 0


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_flag(host: str) -> None:
    check_bind_host(host, allow_remote=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com"])
def test_remote_needs_the_flag(host: str) -> None:
    with pytest.raises(ServeError, match="--allow-remote"):
        check_bind_host(host, allow_remote=False)
    check_bind_host(host, allow_remote=True)


def test_busy_port_is_said_plainly(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    taken = bind_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ServeError, match=f"Port {port} .* already in use"):
            bind_socket("127.0.0.1", port)
        assert run_serve(parse(str(tmp_path), "--port", str(port))) == 2
    finally:
        taken.close()
    assert "already in use" in capsys.readouterr().err


def test_start_up_errors_are_messages(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run_serve(parse(str(tmp_path / "missing"))) == 2
    assert "does not exist" in capsys.readouterr().err
    assert run_serve(parse(str(tmp_path), "--host", "0.0.0.0")) == 2
    assert "--allow-remote" in capsys.readouterr().err
    (tmp_path / ".vault.toml").write_text("[llm]\nbase_url = 5\n", encoding="utf-8")
    assert run_serve(parse(str(tmp_path), "--port", "0")) == 2
    assert "[llm] base_url" in capsys.readouterr().err


def test_example_vault_is_copied_once(tmp_path: Path) -> None:
    source = tmp_path / "packaged"
    (source / ".memory").mkdir(parents=True)
    (source / ".vault.toml").write_text("[plugins.smart_context]\n", encoding="utf-8")
    (source / ".memory" / "demo.json").write_text('{"messages": []}', encoding="utf-8")
    home = tmp_path / "home"
    copy = prepare_example_vault(home, source)
    assert copy == home / "example-vault"
    assert (copy / ".vault.toml").exists() and (copy / ".memory" / "demo.json").exists()
    (copy / ".memory" / "demo.json").write_text('{"messages": [{"id": "mine"}]}', encoding="utf-8")
    assert prepare_example_vault(home, source) == copy
    assert "mine" in (copy / ".memory" / "demo.json").read_text(encoding="utf-8")
    assert (source / ".memory" / "demo.json").read_text(encoding="utf-8") == '{"messages": []}'
    assert [p.name for p in home.iterdir()] == ["example-vault"]
    with pytest.raises(ServeError, match="example vault is missing"):
        prepare_example_vault(tmp_path / "other", tmp_path / "nowhere")


def test_the_copy_leaves_out_what_running_the_plugin_left(tmp_path: Path) -> None:
    """In a source checkout the packaged example vault is the repository's: a run on it there
    leaves caches, the memory database and locks, which a first copy must not take."""
    source = tmp_path / "packaged"
    memory = source / ".memory"
    (memory / "smart_context" / "tools").mkdir(parents=True)
    (source / ".vault.toml").write_text("[plugins.smart_context]\n", encoding="utf-8")
    (memory / "demo.json").write_text('{"messages": []}', encoding="utf-8")
    for left in (
        "smart_context.sqlite",
        "smart_context.sqlite-wal",
        "demo.embeddings.json",
        "demo.lock",
        "demo.json.corrupt-20260101T000000Z",
        "demo.json.recovered-20260101T000000Z",
        "smart_context/tools/example.json",
    ):
        (memory / left).write_text("left by a run", encoding="utf-8")
    copy = prepare_example_vault(tmp_path / "home", source)
    made = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*"))
    assert made == [".memory", ".memory/demo.json", ".vault.toml"]


def test_serve_runs_the_example_vault_until_interrupted(tmp_path: Path) -> None:
    if not (example_vault_dir() / ".vault.toml").exists():
        pytest.skip("the example vault is not written yet")
    before = sorted(str(p) for p in example_vault_dir().rglob("*"))
    env = {**os.environ, "SMART_CONTEXT_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    code = (
        "import sys; from tests.sidecar.test_serve import parse; "
        "from smart_context_hosts.sidecar.serve import run_serve; "
        "sys.exit(run_serve(parse('--port', '0')))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        url = lines[1].split()[1]
        assert url.startswith("http://127.0.0.1:")
        for _ in range(100):
            try:
                chats = httpx.get(url + "api/chats", timeout=5).json()["chats"]
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert chats, "the example vault's chats are listed"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert (tmp_path / "example-vault" / ".vault.toml").exists()
    assert sorted(str(p) for p in example_vault_dir().rglob("*")) == before


def test_the_servers_run_on_uvloop_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop's event loop where the serve extra installed it (not on Windows), asyncio's own
    when ``SMART_CONTEXT_LOOP=asyncio`` says so."""
    pytest.importorskip("uvloop")
    loops: list[str] = []

    async def main() -> None:
        loops.append(type(asyncio.get_running_loop()).__module__.split(".")[0])

    monkeypatch.delenv(LOOP_ENV, raising=False)
    run_server(main())
    monkeypatch.setenv(LOOP_ENV, "asyncio")
    run_server(main())
    assert loops == ["uvloop", "asyncio"]


def test_the_servers_make_the_collector_s_passes_between_requests() -> None:
    """A server command's loop runs ``allocator.collect_between`` while it serves, and
    stops it when the server ends."""
    running: list[str] = []
    collectors: list[asyncio.Task[Any]] = []

    async def main() -> None:
        await asyncio.sleep(0)
        for task in asyncio.all_tasks():
            running.append(getattr(task.get_coro(), "__qualname__", ""))
            if running[-1] == "collect_between":
                collectors.append(task)

    run_server(main())
    assert "collect_between" in running and all(task.cancelled() for task in collectors)


def test_a_loop_it_does_not_know_is_said_and_the_default_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A mistyped ``SMART_CONTEXT_LOOP`` never stops a server: a log line names it and the
    servers' default loop runs (uvloop where installed, else asyncio's)."""
    default = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    loops: list[str] = []

    async def main() -> None:
        loops.append(type(asyncio.get_running_loop()).__module__.split(".")[0])

    monkeypatch.setenv(LOOP_ENV, "uv-loop")
    with caplog.at_level(logging.WARNING):
        run_server(main())
    assert loops == [default]
    assert "SMART_CONTEXT_LOOP='uv-loop' is not one of uvloop, asyncio" in caplog.text
