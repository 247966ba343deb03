"""Fixtures for the end-to-end tests: test vaults, the real sidecar under uvicorn, Chromium.

The vaults are built here, in ``tmp_path``: a chat of 31 messages over three clear subjects (with
their topics already stored, so the panel has bubbles at once), a chat whose title and topic
label are HTML, and a chat of 1,000 messages. The plugin embeds with its offline model
(``embedder = "local"``); replies come from the loopback OpenAI-compatible stub, or from no
model at all. Browsers are Debian's ``chromium``, never a downloaded one.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.openai_server import OpenAIStub, serve_openai_stub

CHROMIUM = shutil.which("chromium")
try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # the browser tests skip; the rest of the suite must still run
    sync_playwright = None

HOSTILE = "<img src=x onerror=alert(1)>"
KEY_ENV = "SMART_CONTEXT_E2E_KEY"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

# Three clear subjects, ten messages each, plus one short standing instruction (sticky).
SUBJECTS: dict[str, list[str]] = {
    "Sourdough Baking": [
        "My sourdough starter smells like nail polish. Is my sourdough starter ruined?",
        "No: an acetone smell means the sourdough starter is hungry. Feed the starter more often.",
        "How much water should my sourdough bread dough have for an open crumb?",
        "For an open sourdough crumb, try 75 percent hydration in the bread dough.",
        "My sourdough loaf came out flat and dense after baking. What went wrong?",
        "A flat sourdough loaf is usually overproofed bread dough, or a weak sourdough starter.",
        "Should I bake sourdough bread in a Dutch oven?",
        "Yes, a preheated Dutch oven traps steam and gives sourdough bread a good oven spring.",
        "How long should sourdough dough rest in the fridge before baking the bread?",
        "A cold retard of 12 to 16 hours deepens the sourdough flavour before baking.",
    ],
    "Python Asyncio": [
        "How do I run two Python coroutines at the same time with asyncio?",
        "Use asyncio.gather in Python: await asyncio.gather(first(), second()).",
        "What is the difference between asyncio.create_task and awaiting a Python coroutine?",
        "asyncio.create_task schedules the Python coroutine at once; await waits for its result.",
        "My Python asyncio event loop blocks when I call time.sleep. Why?",
        "time.sleep blocks the asyncio event loop; use await asyncio.sleep in Python coroutines.",
        "How do I add a timeout to a Python asyncio call?",
        "Wrap the coroutine: async with asyncio.timeout(5) in Python 3.11 and later.",
        "Can I cancel a running asyncio task in Python?",
        "Yes: task.cancel() raises CancelledError inside the Python asyncio task.",
    ],
    "Kubernetes Deployments": [
        "How do I roll back a Kubernetes deployment to the previous version?",
        "Run kubectl rollout undo deployment/web to roll back the Kubernetes deployment.",
        "Why is my Kubernetes pod stuck in CrashLoopBackOff after the deployment?",
        "CrashLoopBackOff means the Kubernetes container keeps exiting; read the pod's logs.",
        "How many replicas should a Kubernetes deployment have for high availability?",
        "At least three Kubernetes replicas spread over nodes with pod anti-affinity.",
        "How do I expose a Kubernetes deployment to the internet?",
        "Create a Kubernetes Service of type LoadBalancer, or an Ingress for the deployment.",
        "How do I set memory limits on Kubernetes pods in a deployment?",
        "Set resources.limits.memory in the Kubernetes pod template of the deployment.",
    ],
}
STICKY_TEXT = "Please keep every answer short and concise."


# ---- vaults --------------------------------------------------------------------------------------


def message(mid: str, role: str, content: str, minute: int) -> dict[str, Any]:
    stamp = f"2026-03-01T{9 + minute // 60:02d}:{minute % 60:02d}:00.000+00:00"
    return {"id": mid, "role": role, "content": content, "created_at": stamp}


def subject_chat(title: str = "Baking, asyncio and Kubernetes") -> dict[str, Any]:
    """The 31-message chat: the sticky instruction, then the three subjects in turn."""
    messages = [message("m00", "user", STICKY_TEXT, 0)]
    for n, (k, text) in enumerate(
        ((k, t) for texts in SUBJECTS.values() for k, t in enumerate(texts)), start=1
    ):
        messages.append(message(f"m{n:02d}", "user" if k % 2 == 0 else "assistant", text, n))
    topics: list[dict[str, Any]] = [{"label": label, "count": 10} for label in SUBJECTS]
    topics.append(
        {"label": "Instructions & Preferences", "sticky": True, "message_ids": ["m00"], "count": 1}
    )
    return {
        "title": title,
        "messages": messages,
        "topics": topics,
        "created_at": messages[0]["created_at"],
        "updated_at": messages[-1]["created_at"],
    }


def subject_ids() -> dict[str, list[str]]:
    """The ids of each subject's messages in :func:`subject_chat`."""
    ids: dict[str, list[str]] = {}
    n = 0
    for label, texts in SUBJECTS.items():
        for _ in texts:
            n += 1
            ids.setdefault(label, []).append(f"m{n:02d}")
    return ids


def long_chat(n: int = 1000) -> dict[str, Any]:
    """A long chat cycling through the three subjects."""
    texts = [t for group in SUBJECTS.values() for t in group]
    messages = [
        message(
            f"b{i:04d}",
            "user" if i % 2 == 0 else "assistant",
            f"{texts[(i // 2) % len(texts)]} (note {i})",
            i % 600,
        )
        for i in range(n)
    ]
    topics = [{"label": label, "count": n // 3} for label in SUBJECTS]
    return {"title": "A very long chat", "messages": messages, "topics": topics}


def hostile_chat() -> dict[str, Any]:
    """A chat whose title and first topic label are HTML that would run script if parsed."""
    chat = subject_chat(HOSTILE)
    chat["topics"] = [{"label": HOSTILE, "count": 4}, {"label": "Plain Topic", "count": 2}]
    return chat


CHATS: dict[str, Callable[[], dict[str, Any]]] = {
    "subjects": subject_chat,
    "replies": lambda: subject_chat("Questions with replies"),
    "hostile": hostile_chat,
    "long": long_chat,
}


def write_vault(root: Path, chat_ids: list[str], llm: str = "") -> Path:
    """A vault folder: ``.vault.toml`` (local embedder; ``llm`` appended) and the chat files."""
    (root / ".memory").mkdir(parents=True)
    (root / ".vault.toml").write_text(
        "# e2e test vault\n[plugins.smart_context]\n"
        'embedder = "local"\ntopic_extractor = "offline"\nembedding_search = true\n' + llm,
        encoding="utf-8",
    )
    for chat_id in chat_ids:
        data = json.dumps(CHATS[chat_id]())
        (root / ".memory" / f"{chat_id}.json").write_text(data, encoding="utf-8")
    return root


def llm_table(stub: OpenAIStub) -> str:
    """The ``[llm]`` table that points the sidecar at the stub."""
    return (
        f'\n[llm]\nbase_url = "{stub.base_url}"\napi_key_env = "{KEY_ENV}"\n'
        '[llm.models]\nfast = "stub-chat"\nchat = "stub-chat"\nembedding = "stub-embedding"\n'
    )


# ---- the server ----------------------------------------------------------------------------------


@contextmanager
def running_sidecar(vault: Path, plugins: Sequence[object] | None = None) -> Iterator[str]:
    """``create_app(Sidecar(vault))`` under uvicorn on a free loopback port, configured as
    ``smart-context serve`` configures it; yields its URL. ``plugins``, when given, are the
    only plugins (instead of the installed ones)."""
    from smart_context_hosts.sidecar.app import create_app
    from smart_context_hosts.sidecar.runtime import Sidecar
    from tests.sidecar.conftest import manager_with

    def make() -> Any:
        pm = None if plugins is None else manager_with(*plugins)
        return create_app(Sidecar(vault, plugin_manager=pm), keepalive_seconds=2.0)

    with running_asgi(make, "sidecar") as base:
        yield base


@contextmanager
def running_asgi(make: Callable[[], Any], name: str) -> Iterator[str]:
    """The app ``make()`` builds, under uvicorn in a thread on a free loopback port, configured
    as the commands configure theirs; yields its URL."""
    import uvicorn

    from smart_context_hosts.sidecar.connections import server_config

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    holder: dict[str, Any] = {}

    def run() -> None:
        # Built inside the thread: the app's asyncio objects belong to this loop.
        config = server_config(make(), log_level="warning", timeout_graceful_shutdown=1)
        holder["server"] = server = uvicorn.Server(config)
        asyncio.run(server.serve(sockets=[sock]))

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (holder.get("server") and holder["server"].started):
        assert thread.is_alive(), f"the {name} did not start (see the log above)"
        assert time.monotonic() < deadline, f"the {name} did not start within 30 s"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        holder["server"].should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture(scope="module")
def llm_stub() -> Iterator[OpenAIStub]:
    """The loopback OpenAI-compatible server, shared by a module's tests."""
    with serve_openai_stub() as server:
        yield server


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory, llm_stub: OpenAIStub
) -> Iterator[dict[str, Any]]:
    """A sidecar with a model (the stub) over a vault holding every chat of :data:`CHATS`.

    Yields ``base`` (the URL), ``vault``, ``ids`` (subject -> message ids) and ``hostile``.
    """
    vault = write_vault(tmp_path_factory.mktemp("vault"), list(CHATS), llm_table(llm_stub))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, llm_stub.api_key)
        with running_sidecar(vault) as base:
            yield {"base": base, "vault": vault, "ids": subject_ids(), "hostile": HOSTILE}


@pytest.fixture
def serve_vault(tmp_path: Path) -> Callable[[list[str]], AbstractContextManager[str]]:
    """``with serve_vault(["subjects"]) as base:`` a sidecar with no model, for one test."""

    def _serve(chat_ids: list[str]) -> AbstractContextManager[str]:
        return running_sidecar(write_vault(tmp_path / "vault", chat_ids))

    return _serve


# ---- the browser ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    if sync_playwright is None:
        pytest.skip("Playwright's Python package is not installed (pip install playwright)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def open_page(chromium: Browser) -> Iterator[Callable[..., Page]]:
    """``open_page(url, scheme="light", width=1440, height=900)``: a fresh page, loaded.

    The test fails if the page logs a script error or a JavaScript dialog (alert) opens.
    """
    contexts = []
    errors: list[str] = []
    dialogs: list[str] = []

    def _open(url: str, scheme: str = "light", width: int = 1440, height: int = 900) -> Page:
        context = chromium.new_context(
            viewport={"width": width, "height": height},
            color_scheme=scheme,
            reduced_motion="reduce",
        )
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        page.wait_for_function(
            "() => window.SmartContextPanel && document.querySelector('#chat-list li')"
        )
        return page

    yield _open
    for context in contexts:
        context.close()
    assert not dialogs, f"a JavaScript dialog fired: {dialogs}"
    assert not errors, f"script errors on the page: {errors}"
