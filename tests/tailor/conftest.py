"""Tailor, in small: the stand-in ``sidecar`` package on ``sys.path`` for these tests only, and
a running vault with Tailor's memory plugin and ours loaded as Tailor loads them."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

STANDIN = Path(__file__).parent / "standin"


def generated_main() -> str:
    """What `smart-context install-tailor` writes as plugins/smart_context/main.py, exactly
    (imported here, not at the top: a test runs this module where our package is hidden)."""
    from smart_context_hosts.install.tailor_files import main_py, pip_target

    return main_py(pip_target())


TOPICS = {
    "topics": [{"label": "Python Asyncio", "count": 3}, {"label": "Paris Trip", "count": 2}],
    "sticky_message_ids": [],
}


def responder(messages: list[dict[str, str]], category: str) -> str:
    """The stand-in models: topics for our extraction prompt, a short answer otherwise."""
    if messages and messages[0]["content"].startswith("You label the topics of a chat"):
        return json.dumps(TOPICS)
    return "Noted: " + messages[-1]["content"][:60]


def drop_standin_modules() -> None:
    for name in [n for n in sys.modules if n == "sidecar" or n.startswith("sidecar.")]:
        del sys.modules[name]


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in on ``sys.path``; its modules (and the brain singleton) gone afterwards."""
    drop_standin_modules()
    monkeypatch.syspath_prepend(str(STANDIN))
    yield STANDIN
    drop_standin_modules()


def make_vault(
    root: Path,
    settings: dict[str, Any],
    memory: dict[str, Any] | None = None,
    main: str | None = None,
) -> Path:
    """A Tailor vault: the memory plugin and ours in ``plugins/``, both enabled; ``main`` is our
    ``main.py`` (default: :func:`generated_main`)."""
    vault = root / "vault"
    shutil.copytree(STANDIN / "plugins" / "memory", vault / "plugins" / "memory")
    ours = vault / "plugins" / "smart_context"
    ours.mkdir(parents=True)
    (ours / "main.py").write_text(main or generated_main(), encoding="utf-8")
    tables = {
        "memory": {"enabled": True, **(memory or {})},
        "smart_context": {"enabled": True, **settings},
    }
    lines = []
    for name, table in tables.items():
        lines.append(f"[plugins.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    (vault / ".vault.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return vault


@dataclass
class Tailor:
    """A running stand-in Tailor with a connected window."""

    vault: Path
    brain: Any
    llm: Any

    @property
    def ours(self) -> Any:
        """The TailorBridge inside the loaded ``Plugin``."""
        return self.brain.plugins["smart_context"].smart_context

    async def settle(self) -> None:
        services = self.ours.core.services
        if services is not None:
            await services.settle()

    def chat_file(self, chat_id: str) -> dict[str, Any]:
        return json.loads((self.vault / ".memory" / f"{chat_id}.json").read_text("utf-8"))

    async def send(self, chat_id: str, text: str, stream: bool = False) -> Any:
        ctx = await self.brain.chat_send(text, chat_id, stream=stream)
        await self.settle()
        return ctx

    def last_chat_prompt(self) -> list[dict[str, str]]:
        """The messages of the last chat request the model got (not our extraction calls)."""
        chats = [m for _, m in self.llm.calls if not m[0]["content"].startswith("You label")]
        return chats[-1]


StartTailor = Callable[..., Any]


@pytest.fixture
async def start_tailor(standin: Path, tmp_path: Path) -> AsyncIterator[StartTailor]:
    started: list[Tailor] = []

    async def start(
        settings: dict[str, Any] | None = None,
        memory: dict[str, Any] | None = None,
        categories: dict[str, str] | None = None,
        connect: bool = True,
    ) -> Tailor:
        from sidecar.services.llm_service import LLMService
        from sidecar.vault_brain import VaultBrain

        base = {"similarity_threshold": 0.3, "summarizer": "offline"}
        vault = make_vault(tmp_path, {**base, **(settings or {})}, memory)
        llm = LLMService(responder, categories)
        brain = VaultBrain(vault, llm)
        await brain.initialize()
        if connect:
            await brain.client_ready()
        tailor = Tailor(vault, brain, llm)
        started.append(tailor)
        return tailor

    yield start
    for tailor in started:
        for name in list(tailor.brain.plugins):
            await tailor.brain.unload_plugin(name)
