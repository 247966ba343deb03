"""What plugins receive from this sidecar: the ``host`` services, ``commands`` and ``ui``.

Each satisfies the matching Protocol in :mod:`smart_context.host` (docs/contract.md §1).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smart_context_hosts.sidecar.config import VaultConfig
from smart_context_hosts.sidecar.events import EventHub
from smart_context_hosts.sidecar.llm import LLMService
from smart_context_hosts.sidecar.memory import ChatMemory

log = logging.getLogger(__name__)

CHAT_DAMAGED_EVENT = "sidecar.chat_damaged"
CHAT_UPDATED_EVENT = "chat.updated"  # docs/contract.md §7: every open page stays current


class SidecarHost:
    """``host``: ``vault_path``, ``settings(name)``, ``memory``, ``llm`` and ``emit``."""

    def __init__(self, config: VaultConfig, events: EventHub | None = None) -> None:
        self.vault_path: Path = config.vault
        self.config = config
        self.events = events or EventHub()
        self.memory = ChatMemory(
            self.vault_path, on_damaged=self._report_damaged_chat, on_changed=self._chat_changed
        )
        self.llm = LLMService(config.llm)

    def settings(self, plugin_name: str) -> dict[str, Any]:
        """``[plugins.NAME]`` from ``.vault.toml`` as a plain dict (``{}`` when absent)."""
        return self.config.plugin_settings(plugin_name)

    def emit(self, event: str, data: Mapping[str, Any] | None = None) -> None:
        """Send ``event`` to every connected UI client; returns at once."""
        self.events.emit(event, data)

    def _chat_changed(self, chat_id: str, message_count: int) -> None:
        self.emit(CHAT_UPDATED_EVENT, {"chat_id": chat_id, "message_count": message_count})

    def _report_damaged_chat(self, chat_id: str, set_aside: Path) -> None:
        self.emit(
            CHAT_DAMAGED_EVENT,
            {
                "chat_id": chat_id,
                "set_aside": set_aside.name,
                "message": (
                    f"The file of chat {chat_id} was damaged. It was kept as "
                    f".memory/{set_aside.name} and the chat starts empty."
                ),
            },
        )


class CommandError(Exception):
    """A command call that cannot be made; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class CommandRegistry:
    """``commands``: ``register(name, handler)``; the HTTP API calls them by name."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[..., Any]] = {}

    def register(self, name: str, handler: Callable[..., Any]) -> None:
        """Make ``handler`` callable as ``name``; a second registration replaces the first."""
        if not callable(handler):
            raise TypeError(f"command {name!r}: handler is not callable")
        if name in self.handlers:
            log.warning("Command %r registered twice; the last handler wins.", name)
        self.handlers[name] = handler

    def check_call(self, name: str, kwargs: Mapping[str, Any]) -> Callable[..., Any]:
        """The handler for ``name`` if it accepts ``kwargs``, else a :class:`CommandError`."""
        handler = self.handlers.get(name)
        if handler is None:
            raise CommandError(404, f"Unknown command {name!r}.")
        try:
            inspect.signature(handler).bind(**kwargs)
        except TypeError as exc:
            raise CommandError(400, f"Bad arguments for command {name!r}: {exc}.") from exc
        except ValueError:  # no signature to check (a builtin); the call itself will tell
            pass
        return handler


@dataclass
class Panel:
    """A panel a plugin registered for a client."""

    id: str
    title: str
    icon: str | None = None
    position: str = "right"
    html: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The template's view of the panel."""
        return {
            "id": self.id,
            "title": self.title,
            "icon": self.icon,
            "position": self.position,
            "html": self.html,
        }


@dataclass
class PanelCollector:
    """``ui`` for one client connection: collects the panels plugins register and fill."""

    panels: dict[str, Panel] = field(default_factory=dict)

    def register_panel(
        self, panel_id: str, title: str, icon: str | None = None, position: str = "right"
    ) -> None:
        """Add a panel (re-registering keeps its content)."""
        old = self.panels.get(panel_id)
        self.panels[panel_id] = Panel(panel_id, title, icon, position, old.html if old else "")

    def set_panel_content(self, panel_id: str, html: str) -> None:
        """Fill a registered panel; content for an unknown panel is ignored with a warning."""
        panel = self.panels.get(panel_id)
        if panel is None:
            log.warning("set_panel_content for unregistered panel %r ignored.", panel_id)
            return
        panel.html = str(html)

    def remove_panel(self, panel_id: str) -> None:
        """Remove a panel; harmless if absent."""
        self.panels.pop(panel_id, None)

    def as_list(self) -> list[dict[str, Any]]:
        """The panels, in registration order, as the page template expects them."""
        return [panel.as_dict() for panel in self.panels.values()]
