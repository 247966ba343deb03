"""Small deterministic stand-ins for the host's services, used through the real hook calls."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from smart_context.errors import EmbeddingError
from smart_context.hookspecs import hookimpl
from smart_context.paths import chat_file, check_chat_id
from smart_context.vectors.ops import Matrix, normalize_rows

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "is",
        "are",
        "be",
        "it",
        "this",
        "that",
        "with",
        "how",
        "what",
        "i",
        "you",
    ]
)


def word_vector(text: str, dim: int = 64) -> np.ndarray:
    """A bag-of-words vector: texts sharing words point the same way. Deterministic."""
    v = np.zeros(dim, dtype=np.float32)
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        stem = word[:5]  # "python"/"pythonic", "async"/"asyncio" share a direction
        h = int.from_bytes(hashlib.blake2b(stem.encode(), digest_size=4).digest(), "little")
        v[h % dim] += 1.0
    return v


class LookedAt(dict[str, Any]):
    """A message that counts, for all such messages together, how often each key is read with
    ``get``: a test of "only the new messages are read" counts them (clear ``reads`` first)."""

    reads: ClassVar[Counter[str]] = Counter()

    def get(self, key: str, default: Any = None) -> Any:
        LookedAt.reads[key] += 1
        return super().get(key, default)


class FakeEmbedder:
    """Deterministic bag-of-words embedder that records every batch it was asked for."""

    def __init__(self, dim: int = 512, model_id: str = "fake-bow-512") -> None:
        self.dim = dim
        self.model_id = model_id
        self.calls: list[list[str]] = []
        self.fail_with: str | None = None

    async def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(list(texts))
        if self.fail_with:
            raise EmbeddingError(self.fail_with)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize_rows(np.stack([word_vector(t, self.dim) for t in texts]))

    @property
    def embedded(self) -> list[str]:
        return [t for batch in self.calls for t in batch]


class FakeLLM:
    """``host.llm`` with queued replies for ``complete`` and bag-of-words ``embed``."""

    def __init__(self, replies: Sequence[str | Exception] = (), dim: int = 64) -> None:
        self.replies: list[str | Exception] = list(replies)
        self.prompts: list[list[dict[str, str]]] = []
        self.embed_calls: list[list[str]] = []
        self.dim = dim
        self.gate: asyncio.Event | None = None  # set by a test to hold ``complete`` open

    async def complete(
        self, messages: list[dict[str, str]], category: str = "fast", **params: Any
    ) -> str:
        self.prompts.append(messages)
        if self.gate is not None:
            await self.gate.wait()
        if not self.replies:
            raise RuntimeError("FakeLLM: no reply queued")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def embed(self, texts: list[str], category: str = "embedding") -> list[list[float]]:
        self.embed_calls.append(list(texts))
        return [word_vector(t, self.dim).tolist() for t in texts]


class FileMemory:
    """``host.memory`` over real files in ``.memory/``, with a per-chat lock for ``update_chat``."""

    def __init__(self, vault: Path) -> None:
        self.vault = Path(vault)
        self._locks: dict[str, asyncio.Lock] = {}

    def _path(self, chat_id: str) -> Path:
        return chat_file(self.vault, check_chat_id(chat_id))

    async def load_chat(self, chat_id: str) -> dict[str, Any]:
        path = self._path(chat_id)
        if not path.exists():
            return {"messages": []}
        return dict(json.loads(path.read_text(encoding="utf-8")))

    async def save_chat(self, chat_id: str, data: dict[str, Any]) -> None:
        path = self._path(chat_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)

    async def update_chat(
        self, chat_id: str, fn: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any]:
        lock = self._locks.setdefault(chat_id, asyncio.Lock())
        async with lock:
            data = fn(await self.load_chat(chat_id))
            await self.save_chat(chat_id, data)
            return data

    async def append_message(self, chat_id: str, message: dict[str, Any]) -> None:
        def add(data: dict[str, Any]) -> dict[str, Any]:
            data.setdefault("messages", []).append(message)
            return data

        await self.update_chat(chat_id, add)


class FakeHost:
    """A whole host: real files in ``vault``, fake models, a record of emitted events."""

    def __init__(
        self, vault: Path, settings: dict[str, Any] | None = None, llm: FakeLLM | None = None
    ) -> None:
        self.vault_path = Path(vault)
        self.memory = FileMemory(self.vault_path)
        self.llm = llm or FakeLLM()
        self._settings = settings or {}
        self.events: list[tuple[str, dict[str, Any]]] = []

    def settings(self, plugin_name: str) -> dict[str, Any]:
        return dict(self._settings) if plugin_name == "smart_context" else {}

    def emit(self, event: str, data: dict[str, Any]) -> None:
        self.events.append((event, data))


class FakeCommands:
    def __init__(self) -> None:
        self.handlers: dict[str, Callable[..., Any]] = {}

    def register(self, name: str, handler: Callable[..., Any]) -> None:
        self.handlers[name] = handler


class FakeUI:
    def __init__(self) -> None:
        self.panels: dict[str, dict[str, Any]] = {}

    def register_panel(
        self, panel_id: str, title: str, icon: str | None = None, position: str = "right"
    ) -> None:
        self.panels[panel_id] = {"title": title, "icon": icon, "position": position, "html": ""}

    def set_panel_content(self, panel_id: str, html: str) -> None:
        self.panels[panel_id]["html"] = html

    def remove_panel(self, panel_id: str) -> None:
        self.panels.pop(panel_id, None)


def make_messages(texts: Sequence[str], prefix: str = "m") -> list[dict[str, Any]]:
    """Chat messages alternating user/assistant, ids ``m0, m1, ...``."""
    return [
        {"id": f"{prefix}{i}", "role": "user" if i % 2 == 0 else "assistant", "content": t}
        for i, t in enumerate(texts)
    ]


def function_definition(name: str) -> dict[str, Any]:
    """An OpenAI function definition, as the plugin puts it in ``ctx.metadata["tools"]``."""
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {
        "type": "function",
        "function": {"name": name, "description": f"{name} for tests", "parameters": schema},
    }


class ToolPlugin:
    """The tool side of the Smart Context plugin (docs/contract.md §8), in small: offers ``tools``
    in ``pipeline_context``, answers ``smart_context.call_tool`` and records each call."""

    def __init__(self, tools: Any = ("files__read", "web__fetch"), register: bool = True) -> None:
        self.tools = tools
        self.register = register
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.chat_ids: list[str | None] = []
        self.text = "contents of {path}"
        self.answer: Any = None  # when set: call_tool's answer, or raised if an exception

    @hookimpl
    def sidecar_register_commands(self, commands: Any) -> None:
        if self.register:
            commands.register("smart_context.call_tool", self.call_tool)

    @hookimpl
    def pipeline_context(self, ctx: Any) -> None:
        tools = self.tools
        ctx.metadata["tools"] = (
            [function_definition(n) for n in tools] if isinstance(tools, tuple) else tools
        )

    async def call_tool(
        self, server_name: str, name: str, arguments: dict[str, Any], chat_id: str | None = None
    ) -> dict[str, Any]:
        """Like the plugin's command (docs/contract.md §8): ``{"status", "result": {"ok", "text",
        "structured", "summary"}}``; ``chat_id`` is the chat the reply is for."""
        self.calls.append((server_name, name, arguments))
        self.chat_ids.append(chat_id)
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer is not None:
            return dict(self.answer)
        text = self.text.format(path=arguments.get("path", "?"))
        result = {"ok": True, "text": text, "structured": None, "summary": f"read {len(text)}"}
        return {"status": "success", "result": result}
