"""``smart-context proxy`` as a user runs it: a process of its own, found by the real ``openai``
client through the address it prints."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from smart_context_hosts.proxy.serve import check_upstream
from smart_context_hosts.sidecar.serve import ServeError
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import chat_on_disk, llm_table, write_settings

CLI = [sys.executable, "-m", "smart_context_hosts.cli"]


def test_the_upstream_must_be_an_http_base_url() -> None:
    assert check_upstream(" https://api.openai.com/v1/ ") == "https://api.openai.com/v1"
    for bad in ("api.openai.com/v1", "ftp://host/v1", "http:///v1", "http://h/v1?key=sk-1"):
        with pytest.raises(ServeError):
            check_upstream(bad)


def test_a_bad_upstream_or_address_is_refused_with_a_message(tmp_path: Path) -> None:
    bad = subprocess.run(
        [*CLI, "proxy", str(tmp_path), "--upstream", "localhost:11434"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "is not an http(s) URL" in bad.stderr
    remote = subprocess.run(
        [*CLI, "proxy", str(tmp_path), "--upstream", "http://h/v1", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert remote.returncode == 2 and "--allow-remote" in remote.stderr


@pytest.mark.parametrize("seconds", ["0", "-1", "soon", "inf"])
def test_a_shape_timeout_must_be_some_seconds(tmp_path: Path, seconds: str) -> None:
    bad = subprocess.run(
        [*CLI, "proxy", str(tmp_path), "--upstream", "http://h/v1", "--shape-timeout", seconds],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "seconds" in bad.stderr


def test_a_team_needs_to_say_who_is_asking(tmp_path: Path) -> None:
    up = ["--upstream", "http://h/v1"]
    nobody = subprocess.run(
        [*CLI, "proxy", "--vaults", str(tmp_path), *up], capture_output=True, text=True, timeout=60
    )
    assert nobody.returncode == 2 and "--user-header NAME or --key-owners FILE" in nobody.stderr
    both = subprocess.run(
        [*CLI, "proxy", str(tmp_path), "--vaults", str(tmp_path), "--user-header", "X-U", *up],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert both.returncode == 2 and "not both" in both.stderr
    (tmp_path / "owners.json").write_text("[]", encoding="utf-8")
    bad = subprocess.run(
        [
            *CLI,
            "proxy",
            "--vaults",
            str(tmp_path),
            "--key-owners",
            str(tmp_path / "owners.json"),
            *up,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "SHA-256" in bad.stderr


def test_the_command_serves_a_chat_end_to_end(tmp_path: Path, openai_server: OpenAIStub) -> None:
    write_settings(
        tmp_path,
        '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
        + llm_table(openai_server.base_url, "STUB_KEY", embedding="stub-embedding"),
    )
    env = {**os.environ, "STUB_KEY": openai_server.api_key}
    process = subprocess.Popen(
        [*CLI, "proxy", str(tmp_path), "--upstream", openai_server.base_url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        found = None
        for _ in range(5):
            found = re.search(r"client at (http://127\.0\.0\.1:\d+/v1)", process.stdout.readline())
            if found:
                break
        assert found, "the proxy did not say where it listens"
        client = openai.OpenAI(base_url=found.group(1), api_key=openai_server.api_key)
        for attempt in range(100):  # the address is printed just before uvicorn listens
            try:
                reply = client.chat.completions.create(
                    model="stub-chat",
                    messages=[{"role": "user", "content": "Plan a trip"}],
                    extra_headers={"X-Smart-Context-Chat": "from-cli"},
                )
                break
            except openai.APIConnectionError:
                if attempt == 99:
                    raise
                time.sleep(0.1)
        assert reply.choices[0].message.content == "echo: Plan a trip"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    stored = chat_on_disk(tmp_path, "from-cli")["messages"]
    assert [m["content"] for m in stored] == ["Plan a trip", "echo: Plan a trip"]
