"""``PluginBase``: what a Tailor plugin inherits (lifecycle, events, UI helpers)."""

import logging
from abc import ABC, abstractmethod

from sidecar import constants


class PluginBase(ABC):
    def __init__(self, plugin_dir, vault_path, config=None):
        self.plugin_dir = plugin_dir
        self.vault_path = vault_path
        self.config = config or {}
        self.name = plugin_dir.name
        self.logger = _Logger(logging.getLogger(f"tailor.plugin.{self.name}"))
        self._loaded = False

    @property
    def brain(self):
        from sidecar.vault_brain import VaultBrain

        return VaultBrain.get()

    @abstractmethod
    def register_commands(self):
        """Register commands with the brain (phase 1)."""

    async def on_load(self):
        self._loaded = True

    async def on_tick(self):  # noqa: B027 (optional hook, as in Tailor)
        pass

    async def on_client_connected(self):  # noqa: B027 (optional hook, as in Tailor)
        pass

    async def on_unload(self):
        self._loaded = False

    def notify(self, message, severity="info"):
        self.brain.emit_to_frontend(constants.NOTIFY, {"message": message, "severity": severity})

    def emit(self, event_type, data, scope=constants.SCOPE_WINDOW):
        self.brain.emit_to_frontend(event_type, data, scope)

    async def publish(self, event_name, **kwargs):
        await self.brain.publish(event_name, **kwargs)

    def subscribe(self, event_name, handler, priority=0):
        self.brain.subscribe(event_name, handler, priority)

    def _ui(self, action, data):
        self.brain.emit_to_frontend(constants.UI_COMMAND, {"action": action, **data})

    async def register_panel(self, panel_id, title, icon=None, position="right"):
        self._ui(
            "register_panel", {"id": panel_id, "title": title, "icon": icon, "position": position}
        )

    async def set_panel_content(self, panel_id, html_content):
        self._ui("set_panel", {"id": panel_id, "html": html_content})

    async def remove_panel(self, panel_id):
        self._ui("remove_panel", {"id": panel_id})

    @property
    def is_loaded(self):
        return self._loaded


class _Logger:
    """Tailor logs with loguru; this keeps the calls plugins make (``error``, ``log``)."""

    def __init__(self, logger):
        self._logger = logger
        self.lines = []

    def log(self, level, message):
        self.lines.append((level, message))
        self._logger.log(logging.getLevelName(level), message)

    def debug(self, message):
        self.log("DEBUG", message)

    def info(self, message):
        self.log("INFO", message)

    def warning(self, message):
        self.log("WARNING", message)

    def error(self, message):
        self.log("ERROR", message)
