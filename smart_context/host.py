"""The services a host gives the plugin (docs/contract.md §1), as Protocols any host can satisfy.

Every method may be a plain function or a coroutine function; :func:`resolve` awaits what is
awaitable so the plugin never cares which.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

ChatData = dict[str, Any]
# ``host.emit(event, data)``: a plain function or a coroutine function, as every host method
Emit = Callable[[str, dict[str, Any]], Any]


async def resolve(value: T | Any) -> Any:
    """Await ``value`` if it is awaitable, else return it: host methods may be either."""
    if inspect.isawaitable(value):
        return await value
    return value


@runtime_checkable
class Memory(Protocol):
    """Chat persistence on ``.memory/{chat_id}.json``."""

    def load_chat(self, chat_id: str) -> Any:
        """The stored chat (``{"messages": [...], "topics": [...], ...}``)."""

    def save_chat(self, chat_id: str, data: ChatData) -> Any:
        """Replace the stored chat with ``data``."""

    def update_chat(self, chat_id: str, fn: Callable[[ChatData], ChatData]) -> Any:
        """Apply ``fn`` to the latest stored copy atomically; messages added meanwhile survive."""


@runtime_checkable
class LLM(Protocol):
    """The host's model service; ``category`` picks a configured model (``fast``, ``embedding``)."""

    def complete(
        self, messages: list[dict[str, str]], category: str = "fast", **params: Any
    ) -> Any:
        """The model's reply to ``messages`` as a string."""

    def embed(self, texts: list[str], category: str = "embedding") -> Any:
        """One vector (a list of floats) per text."""


@runtime_checkable
class Host(Protocol):
    """What ``sidecar_startup(host)`` receives."""

    vault_path: Path
    memory: Memory
    llm: LLM

    def settings(self, plugin_name: str) -> Any:
        """The plugin's table from ``.vault.toml`` as a dict."""

    def emit(self, event: str, data: dict[str, Any]) -> Any:
        """Send an event to the UI clients."""


@runtime_checkable
class PipelineContext(Protocol):
    """What every ``pipeline_*`` hook receives: the fields of Tailor's ``PipelineContext``."""

    message: str
    original_message: str
    history: list[dict[str, Any]]
    metadata: dict[str, Any]  # metadata["chat_id"] names the chat
    response: str | None
    should_abort: bool


@runtime_checkable
class Commands(Protocol):
    """What ``sidecar_register_commands(commands)`` receives."""

    def register(self, name: str, handler: Callable[..., Any]) -> Any:
        """Make ``handler`` callable by the UI as ``name``."""


@runtime_checkable
class UI(Protocol):
    """What ``sidecar_client_connected(ui)`` receives."""

    def register_panel(
        self, panel_id: str, title: str, icon: str | None = None, position: str = "right"
    ) -> Any:
        """Add a panel to the client's window."""

    def set_panel_content(self, panel_id: str, html: str) -> Any:
        """Fill a registered panel with HTML."""

    def remove_panel(self, panel_id: str) -> Any:
        """Remove a panel."""
