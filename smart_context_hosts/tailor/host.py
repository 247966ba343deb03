"""What our plugin gets inside Tailor: ``host``, ``commands`` and ``ui`` over Tailor's plugin API.

Each satisfies the matching Protocol of :mod:`smart_context.host`; the Tailor side is the
``Plugin`` instance Tailor loaded (a ``PluginBase``), described here by :class:`TailorPlugin`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from smart_context.events import FILTER_CHANGED
from smart_context.host import Memory
from smart_context.panel import inline_asset
from smart_context_hosts.tailor.llm import TailorLLM

log = logging.getLogger("smart_context")

PLUGIN_NAME = "smart_context"
# Tailor's chat view highlights the messages named by this event (its chat.js listens for it)
HIGHLIGHT_APPLIED = "smart_context.highlight_applied"
BRIDGE_SCRIPT = "tailor/bridge.js"


class TailorPlugin(Protocol):
    """The parts of Tailor's ``PluginBase`` the adapter uses."""

    name: str
    vault_path: Path
    plugin_dir: Path
    config: dict[str, Any]

    @property
    def brain(self) -> Any:
        """Tailor's ``VaultBrain``: commands, events, the tool registry, the pipeline."""

    def emit(self, event_type: str, data: dict[str, Any]) -> None:
        """Send an event to the window (a ``CustomEvent`` on ``window`` there)."""

    def notify(self, message: str, severity: str = "info") -> None:
        """A toast in Tailor's window."""

    def subscribe(self, event_name: str, handler: Callable[..., Any], priority: int = 0) -> None:
        """Subscribe to an internal event (the pipeline's phases among them)."""

    async def register_panel(
        self, panel_id: str, title: str, icon: str | None = None, position: str = "right"
    ) -> None:
        """Add a panel to Tailor's layout."""

    async def set_panel_content(self, panel_id: str, html_content: str) -> None:
        """Fill a panel with HTML (Tailor runs its scripts)."""

    async def remove_panel(self, panel_id: str) -> None:
        """Remove a panel."""


class TailorHost:
    """``host``: the vault, the plugin's config as its settings, Tailor's memory, LLM and events."""

    def __init__(self, plugin: TailorPlugin, memory: Memory, llm: TailorLLM | None = None) -> None:
        self.plugin = plugin
        self.vault_path: Path = Path(plugin.vault_path)
        self.memory = memory
        self.llm = llm or TailorLLM()

    def settings(self, plugin_name: str) -> dict[str, Any]:
        """Our table as Tailor resolved it (``settings.json`` under ``[plugins.smart_context]``);
        another plugin's table from Tailor's copy of ``.vault.toml``."""
        if plugin_name == PLUGIN_NAME:
            return dict(self.plugin.config)
        tables = getattr(self.plugin.brain, "config", {}).get("plugins", {})
        table = tables.get(plugin_name) if isinstance(tables, dict) else None
        return dict(table) if isinstance(table, dict) else {}

    def emit(self, event: str, data: Mapping[str, Any] | None = None) -> None:
        """Send ``event`` to Tailor's window, and the events Tailor's own UI listens for."""
        payload = dict(data or {})
        self.plugin.emit(event, payload)
        for name, echo in tailor_echoes(event, payload):
            self.plugin.emit(name, echo)


def tailor_echoes(event: str, data: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Tailor's own names for what ``event`` says: its chat view highlights the messages in
    context on ``smart_context.highlight_applied`` (``message_ids``), only while a filter is on
    (with none, ``filter_changed``'s empty ``active_topics`` clears the highlight there)."""
    if event != FILTER_CHANGED or not data.get("active_topics"):
        return []
    ids = data.get("included_ids")
    return [(HIGHLIGHT_APPLIED, {"message_ids": list(ids) if isinstance(ids, list) else []})]


class CommandCollector:
    """``commands`` for ``sidecar_register_commands``: collects the handlers by name; the
    adapter hands them to Tailor under the same names."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[..., Any]] = {}

    def register(self, name: str, handler: Callable[..., Any]) -> None:
        """Keep ``handler`` as ``name``."""
        self.handlers[name] = handler


class TailorUI:
    """``ui`` for ``sidecar_client_connected``: panels through Tailor's panel API. The panel's
    HTML is preceded by the bridge that lets it talk to Tailor (``window.request`` for commands,
    ``window`` events for ours)."""

    def __init__(self, plugin: TailorPlugin) -> None:
        self.plugin = plugin

    async def register_panel(
        self, panel_id: str, title: str, icon: str | None = None, position: str = "right"
    ) -> None:
        """Add the panel to Tailor's layout."""
        await self.plugin.register_panel(panel_id, title, icon, position)

    async def set_panel_content(self, panel_id: str, html: str) -> None:
        """Fill the panel, the bridge first."""
        await self.plugin.set_panel_content(panel_id, bridged(html))

    async def remove_panel(self, panel_id: str) -> None:
        """Remove the panel."""
        await self.plugin.remove_panel(panel_id)


def bridged(html: str) -> str:
    """``html`` preceded by ``static/tailor/bridge.js`` in its own script element."""
    return f"<script>\n{inline_asset(BRIDGE_SCRIPT, 'script')}</script>\n{html}"
