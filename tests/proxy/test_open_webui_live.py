"""Smart Context in a real Open WebUI, both ways: Open WebUI's OpenAI connection pointed at
``smart-context proxy``, and our Filter function installed through Open WebUI's API. One test
drives Open WebUI's API with whole conversations (an older client's shape); the other plays
Open WebUI 0.12's own page (tests/proxy/open_webui_page.py: one request per turn, a socket
session, the history loaded from Open WebUI's database) with its context compaction on, the
users' identity forwarded, and the filter made global, with no per-chat switch.

Opt-in: Open WebUI is a large install (``pip install open-webui`` in a venv of its own). Set
``SMART_CONTEXT_OPEN_WEBUI`` to its ``open-webui`` executable, or have one on the PATH; without
it the test is skipped. It runs Open WebUI offline (about 15 s to start, 1.2 GB of memory), the
proxy and ``serve`` as the commands users run, and a scripted upstream on loopback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.openai_server import OpenAIStub, _Server
from tests.sidecar.conftest import chat_on_disk

OPEN_WEBUI = os.environ.get("SMART_CONTEXT_OPEN_WEBUI") or shutil.which("open-webui")
FILTER = Path(__file__).resolve().parents[2] / "smart_context_hosts" / "open_webui_filter.py"
SETTINGS = '[plugins.smart_context]\ntopic_extractor = "offline"\n'

pytestmark = pytest.mark.skipif(
    not OPEN_WEBUI, reason="Open WebUI is not installed (set SMART_CONTEXT_OPEN_WEBUI)"
)


@contextmanager
def running(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def address_of(process: subprocess.Popen[str], pattern: str) -> str:
    assert process.stdout is not None
    for _ in range(10):
        found = re.search(pattern, process.stdout.readline())
        if found:
            return found.group(1)
    raise AssertionError("the command did not say where it listens")


def call(base: str, path: str, body: Any = None, token: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def wait_until_up(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class Stack(NamedTuple):
    """What a live test runs against: the scripted upstream, the proxy's vault and the filter's
    (served by ``serve``), and Open WebUI with a signed-in token."""

    stub: OpenAIStub
    proxied: Path
    filtered: Path
    serve_url: str
    webui: str
    token: str


@contextmanager
def open_webui_stack(tmp_path: Path, port: int, **env: str) -> Iterator[Stack]:
    """The scripted upstream, ``smart-context proxy`` in front of it, ``smart-context serve``,
    and Open WebUI on ``port`` (offline, no login, its OpenAI connection at the proxy, the
    users' identity forwarded; ``env``: more of its settings), as the commands users run."""
    assert OPEN_WEBUI
    stub_server = _Server()
    threading.Thread(target=stub_server.serve_forever, daemon=True).start()
    stub = stub_server.stub
    proxied, filtered = tmp_path / "proxied", tmp_path / "filtered"
    for vault in (proxied, filtered):
        vault.mkdir()
        (vault / ".vault.toml").write_text(SETTINGS, encoding="utf-8")
    cli = [sys.executable, "-m", "smart_context_hosts.cli"]
    proxying = [*cli, "proxy", str(proxied), "--upstream", stub.base_url, "--port", "0"]
    try:
        with (
            running(proxying) as proxy,
            running([*cli, "serve", str(filtered), "--port", "0"]) as serve,
        ):
            proxy_url = address_of(proxy, r"client at (http://127\.0\.0\.1:\d+)/v1")
            serve_url = address_of(serve, r"Open (http://127\.0\.0\.1:\d+)/").rstrip("/")
            settings = {
                **os.environ,
                "OFFLINE_MODE": "true",
                "HF_HUB_OFFLINE": "1",
                "WEBUI_AUTH": "False",
                "RAG_EMBEDDING_ENGINE": "openai",
                "ENABLE_OLLAMA_API": "false",
                "OPENAI_API_BASE_URL": f"{proxy_url}/v1",
                "OPENAI_API_KEY": stub.api_key,
                "ENABLE_FORWARD_USER_INFO_HEADERS": "true",
                "DATA_DIR": str(tmp_path / "open-webui"),
                # else it writes a signing key of its own into the folder it starts in
                "WEBUI_SECRET_KEY": uuid.uuid4().hex,
                **env,
            }
            serve_webui = [OPEN_WEBUI, "serve", "--host", "127.0.0.1", "--port", str(port)]
            with running(serve_webui, settings, cwd=tmp_path):
                webui = f"http://127.0.0.1:{port}"
                wait_until_up(f"{webui}/health", 180)
                token = call(webui, "/api/v1/auths/signin", {"email": "", "password": ""})["token"]
                yield Stack(stub, proxied, filtered, serve_url, webui, token)
    finally:
        stub_server.shutdown()


def install_filter(webui: str, token: str, serve_url: str) -> None:
    """Our Filter function through Open WebUI's API: created, enabled, made global, its valve
    ``url`` at ``serve``."""
    made = call(
        webui,
        "/api/v1/functions/create",
        {
            "id": "smart_context",
            "name": "Smart Context",
            "content": FILTER.read_text(encoding="utf-8"),
            "meta": {"description": "x"},
        },
        token,
    )
    assert made["type"] == "filter"
    assert call(webui, "/api/v1/functions/id/smart_context/toggle", None, token)["is_active"]
    toggled = call(webui, "/api/v1/functions/id/smart_context/toggle/global", None, token)
    assert toggled["is_global"]
    call(
        webui,
        "/api/v1/functions/id/smart_context/valves/update",
        {"url": serve_url, "timeout": 10, "priority": 0},
        token,
    )


def test_open_webui_through_the_proxy_and_with_the_filter(tmp_path: Path) -> None:
    with open_webui_stack(tmp_path, 18000 + os.getpid() % 1000) as stack:
        stub, proxied, filtered, serve_url, webui, token = stack

        # 1. the proxy: Open WebUI's connection goes through it, its chat id in a header
        chat = call(webui, "/api/v1/chats/new", {"chat": {"title": "t", "messages": []}}, token)[
            "id"
        ]
        first = [{"role": "user", "content": "Plan four days in Kyoto"}]
        answer = call(
            webui,
            "/api/chat/completions",
            {
                "model": "stub-chat",
                "stream": False,
                "chat_id": chat,
                "id": str(uuid.uuid4()),
                "messages": first,
            },
            token,
        )
        assert answer["choices"][0]["message"]["content"] == "echo: Plan four days in Kyoto"
        second = [*first, {"role": "assistant", "content": "echo: Plan four days in Kyoto"}]
        second.append({"role": "user", "content": "Which temples first?"})
        call(
            webui,
            "/api/chat/completions",
            {
                "model": "stub-chat",
                "stream": True,
                "chat_id": chat,
                "id": str(uuid.uuid4()),
                "messages": second,
                "background_tasks": {"title_generation": True, "tags_generation": True},
            },
            token,
        )
        deadline = time.monotonic() + 60
        while sum("### Task:" in json.dumps(b) for _, b in stub.requests) < 2:
            assert time.monotonic() < deadline, "Open WebUI's background tasks never came"
            time.sleep(0.5)
        time.sleep(2)
        stored = chat_on_disk(proxied, chat)["messages"]
        assert [(m["role"], m["content"]) for m in stored] == [
            ("user", "Plan four days in Kyoto"),
            ("assistant", "echo: Plan four days in Kyoto"),
            ("user", "Which temples first?"),
            ("assistant", "echo: Which temples first?"),
        ]  # the title and tag tasks passed through, never stored
        assert all(m["smart_context"]["usage"]["sent_tokens"] > 0 for m in stored[1::2])

        # 2. the filter, installed through Open WebUI's API, talking to serve
        install_filter(webui, token, serve_url)
        other = call(webui, "/api/v1/chats/new", {"chat": {"title": "f", "messages": []}}, token)[
            "id"
        ]
        asked = [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "How do I feed a sourdough starter?"},
        ]
        turn = {"model": "stub-chat", "chat_id": other, "id": str(uuid.uuid4())}
        call(
            webui,
            "/api/chat/completions",
            {**turn, "stream": False, "messages": asked, "filter_ids": ["smart_context"]},
            token,
        )
        replied = [
            *asked,
            {"role": "assistant", "content": "echo: How do I feed a sourdough starter?"},
        ]
        call(
            webui,
            "/api/chat/completed",
            {**turn, "session_id": "s", "messages": replied, "filter_ids": ["smart_context"]},
            token,
        )
        kept = chat_on_disk(filtered, other)
        assert kept["proxy"]["system"] == [asked[0]]
        assert [m["content"] for m in kept["messages"]] == [
            asked[1]["content"],
            replied[-1]["content"],
        ]
        assert kept["messages"][-1]["smart_context"]["usage"]["sent_tokens"] > 0


PAGE = Path(__file__).resolve().parent / "open_webui_page.py"


def open_webui_python() -> str:
    """The Python Open WebUI runs in (its script's ``#!`` line): the page driver needs its
    ``socketio``."""
    assert OPEN_WEBUI
    first = Path(OPEN_WEBUI).read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def play_page(webui: str, texts: list[str]) -> dict[str, Any]:
    """Send ``texts`` as Open WebUI 0.12's page does (tests/proxy/open_webui_page.py)."""
    done = subprocess.run(
        [open_webui_python(), str(PAGE), webui, "stub-chat", *texts],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    played: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return played


def test_the_012_page_through_the_proxy_with_compaction_and_the_filter_without_a_switch(
    tmp_path: Path,
) -> None:
    """Open WebUI 0.12 as people run it: its page's requests (one per turn, a socket session,
    the history loaded from its database), its context compaction on, the user's identity
    forwarded to the proxy; then the filter made global, with no per-chat switch."""
    # compaction after a few turns: the request then holds its last messages only
    compaction = {"ENABLE_CONTEXT_COMPACTION": "true", "CONTEXT_COMPACTION_TOKEN_THRESHOLD": "60"}
    with open_webui_stack(tmp_path, 19000 + os.getpid() % 1000, **compaction) as stack:
        stub, proxied, filtered, serve_url, webui, token = stack
        texts = [
            "My locker code at the climbing gym is 4417.",
            *(f"Question {k}: which grade should I try next on the slab wall?" for k in range(5)),
        ]
        played = play_page(webui, texts)
        assert [m["content"] for m in played["messages"][::2]] == texts
        summaries = [
            b for _, b in stub.requests if "Summarize the conversation history" in json.dumps(b)
        ]
        assert summaries, "Open WebUI never compacted the chat"
        # the vault chat holds every message, in Open WebUI's order: nothing erased
        stored = chat_on_disk(proxied, played["chat_id"])["messages"]
        assert [(m["role"], m["content"]) for m in stored] == [
            (m["role"], m["content"]) for m in played["messages"]
        ]
        turns = [b for p, b in stub.requests if p.endswith("/chat/completions") and b.get("stream")]
        assert len(turns) == len(texts)
        # after compaction the client sent a summary and its last messages; the proxy gave
        # the first turn back, as a message of the chat (not only inside the summary)
        last = turns[-1]["messages"]
        assert any("[CONVERSATION SUMMARY]" in str(m["content"]) for m in last[:1])
        assert any(m["role"] != "system" and "4417" in str(m["content"]) for m in last)
        # the model's provider never learns who asked, nor Open WebUI's ids
        assert not [h for seen in stub.headers for h in seen if h.startswith("x-openwebui-")]

        # the filter, made global: it runs on a new chat with no switch turned on
        install_filter(webui, token, serve_url)
        other = play_page(webui, ["How do I feed a sourdough starter?"])
        kept = chat_on_disk(filtered, other["chat_id"])
        assert [m["content"] for m in kept["messages"]] == [m["content"] for m in other["messages"]]
        assert kept["messages"][-1]["smart_context"]["usage"]["sent_tokens"] > 0
