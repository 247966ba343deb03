"""Smart Context as a Tailor plugin: ``Plugin = make_plugin_class(PluginBase)``.

Tailor loads ``VAULT/plugins/smart_context/main.py`` and takes its ``Plugin`` class; the main.py
that ``smart-context install-tailor`` writes is three lines around :func:`make_plugin_class`, so
everything else lives here, in the installed package, and an upgrade of the package is an
upgrade of the plugin. Tailor's lifecycle maps onto our pluggy hooks:

- ``__init__`` imports our plugin (a failure, e.g. the package installed without a dependency
  in Tailor's Python, is reported with that Python's path; the plugin is then off);
- ``register_commands`` registers every command name with Tailor (they answer once started);
- ``on_load`` builds the host (:mod:`smart_context_hosts.tailor.host`) and runs ``sidecar_startup``,
  subscribes the pipeline phases (:mod:`smart_context_hosts.tailor.pipeline`) and adds the memory
  tools to Tailor's tool registry (:mod:`smart_context_hosts.tailor.tools`);
- ``on_client_connected`` registers and fills the panel; ``on_unload`` undoes all of it.

Nothing here raises into Tailor: a failure is logged (in Tailor's log too) and shown in the
window, and chat messages go through untouched. This module imports only the standard library
at import time, so that a broken install is still reported rather than failing the import.
"""

from __future__ import annotations

import html
import inspect
import logging
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("smart_context")

# what Tailor's own Smart Context panel calls: answered (with the reason) even when we cannot run
TAILOR_COMMANDS = (
    "smart_context.set_filter",
    "smart_context.get_topics",
    "smart_context.set_similarity_mode",
)


def make_plugin_class(base: Any) -> type:
    """Tailor's ``Plugin`` class for Smart Context, derived from ``base`` (Tailor's ``PluginBase``:
    typed ``Any``, as nothing of Tailor is known when our package is checked)."""

    def __init__(
        self: Any, plugin_dir: Path, vault_path: Path, config: dict[str, Any] | None = None
    ) -> None:
        base.__init__(self, plugin_dir, vault_path, config)
        self.smart_context = TailorBridge(self)

    def register_commands(self: Any) -> None:
        self.smart_context.register_commands()

    async def on_load(self: Any) -> None:
        await base.on_load(self)
        await self.smart_context.load()

    async def on_client_connected(self: Any) -> None:
        await base.on_client_connected(self)
        await self.smart_context.client_connected()

    async def on_unload(self: Any) -> None:
        await self.smart_context.unload()
        await base.on_unload(self)

    namespace = {
        "__module__": __name__,  # Tailor's logs name the class by it (type() would say "abc")
        "__qualname__": "Plugin",
        "__doc__": "Smart Context: what goes into the model's context window, and why.",
        "__init__": __init__,
        "register_commands": register_commands,
        "on_load": on_load,
        "on_client_connected": on_client_connected,
        "on_unload": on_unload,
    }
    return type("Plugin", (base,), namespace)


def import_failure(exc: BaseException) -> str:
    """What to tell the user when our package cannot be imported in Tailor's Python: the same
    ``pip install`` line as the installer gives (it needs only the standard library)."""
    try:
        from smart_context_hosts.install.tailor_files import pip_target

        target = shlex.quote(pip_target())
    except Exception:  # as broken as the rest: the published name  # noqa: BLE001
        target = "'smart-context[local]'"
    return (
        f"Smart Context cannot run in the Python that runs Tailor's sidecar ({sys.executable}): "
        f"{type(exc).__name__}: {exc}. Install the smart-context package into that Python "
        f"({sys.executable} -m pip install {target}) and restart the vault."
    )


class TailorBridge:
    """Our plugin inside one Tailor ``Plugin`` instance (``plugin``)."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin
        self.error: str | None = None  # set: we cannot run at all; every answer says why
        self.core: Any = None  # our SmartContextPlugin, once imported
        self.handlers: dict[str, Any] = {}
        self.names: tuple[str, ...] = TAILOR_COMMANDS
        self._subscribed: list[tuple[str, Any]] = []
        self._forward: logging.Handler | None = None
        self._tools: Any = None  # ToolRegistration, StreamingContext: set by ``load``
        self._streaming: Any = None
        try:
            from smart_context.commands import COMMANDS
            from smart_context.plugin import SmartContextPlugin

            self.core = SmartContextPlugin()
            self.names = tuple(COMMANDS)
        except Exception as exc:  # an incomplete install must not take Tailor down  # noqa: BLE001
            self._fail(import_failure(exc))

    # -- Tailor's lifecycle ----------------------------------------------------------------

    def register_commands(self) -> None:
        """Every command name with Tailor; each answers once ``load`` has started us."""
        for name in self.names:
            try:
                self.plugin.brain.register_command(name, self._command(name), self.plugin.name)
            except Exception as exc:  # e.g. another plugin holds the name  # noqa: BLE001
                self._report(f"Smart Context: command {name} not registered: {exc}")

    async def load(self) -> None:
        """Start our plugin on Tailor's services."""
        if self.error is not None:
            return
        self._forward_logs()
        try:
            await self._start()
        except Exception as exc:  # Tailor goes on without us; the window says why
            log.exception("Smart Context could not start inside Tailor")
            self._fail(f"Smart Context could not start: {exc}")

    async def client_connected(self) -> None:
        """Register and fill the panel; say what is wrong, if anything is."""
        try:
            if self.error is not None:
                await self._error_panel(self.error)
                self.plugin.notify(self.error, "error")
                return
            from smart_context_hosts.tailor.host import TailorUI

            await self.core.sidecar_client_connected(TailorUI(self.plugin))
            if self.config_error:
                self.plugin.notify(f"Smart Context is off: {self.config_error}", "error")
        except Exception:  # the window must open even if our panel cannot
            log.exception("Smart Context: the panel could not be shown")

    async def unload(self) -> None:
        """Undo ``load``: tools, subscriptions, the streaming wrapper, the panel; flush."""
        # each step on its own: one that fails must not leave the others undone (our wrapper
        # on Tailor's stream_run, or the context phase running after unload)
        for event, handler in self._subscribed:
            await _undo(f"unsubscribing {event}", self.plugin.brain.unsubscribe, event, handler)
        self._subscribed.clear()
        if self._tools is not None:
            await _undo("removing the memory tools", self._tools.unregister)
        if self._streaming is not None:
            await _undo("unwrapping the streaming path", self._streaming.uninstall)
        if self.core is not None and self.core.services is not None:
            await _undo("finishing background work", self.core.sidecar_shutdown)
        from smart_context.panel import PANEL_ID

        await _undo("removing the panel", self.plugin.remove_panel, PANEL_ID)
        if self._forward is not None:
            logging.getLogger("smart_context").removeHandler(self._forward)
            self._forward = None

    # -- inside ------------------------------------------------------------------------------

    @property
    def config_error(self) -> str | None:
        """The bad setting that keeps the pipeline phases off, if any."""
        services = self.core.services if self.core is not None else None
        return services.config_error if services is not None else None

    def is_on(self) -> bool:
        """Whether the pipeline phases may act: started, with valid settings."""
        return self.error is None and self.core.services is not None and not self.config_error

    async def _start(self) -> None:
        from smart_context_hosts.tailor.host import CommandCollector, TailorHost
        from smart_context_hosts.tailor.memory import TailorMemory
        from smart_context_hosts.tailor.pipeline import PipelineHooks, StreamingContext
        from smart_context_hosts.tailor.tools import ToolRegistration

        brain = self.plugin.brain
        await self.core.sidecar_startup(TailorHost(self.plugin, TailorMemory(lambda: brain)))
        collector = CommandCollector()
        self.core.sidecar_register_commands(collector)
        self.handlers = collector.handlers
        if self.config_error:
            self._report(f"Smart Context is off until the setting is fixed: {self.config_error}")
        hooks = PipelineHooks(self.core, self.is_on)
        for event, handler, priority in hooks.subscriptions():
            self.plugin.subscribe(event, handler, priority)
            self._subscribed.append((event, handler))
        self._streaming = StreamingContext(hooks.on_streamed_context)
        self._streaming.install(getattr(brain, "pipeline", None))
        self._tools = ToolRegistration()
        self._tools.register(getattr(brain, "tool_registry", None), self.core.services)

    def _command(self, name: str) -> Any:
        async def handler(**kwargs: Any) -> Any:
            # Tailor's own panel may wrap the arguments in ``p`` or ``params``
            wrapped = kwargs.get("p") or kwargs.get("params")
            if set(kwargs) <= {"p", "params"} and isinstance(wrapped, dict):
                kwargs = dict(wrapped)
            target = self.handlers.get(name)
            if self.error is not None or target is None:
                reason = self.error or "Smart Context has not started yet (see Tailor's log)."
                return {"status": "error", "error": reason}
            return await target(**kwargs)

        handler.__name__ = name.rpartition(".")[2]
        return handler

    async def _error_panel(self, message: str) -> None:
        panel_id, title = "smart-context-panel", "Smart Context"  # as smart_context.panel says
        await self.plugin.register_panel(panel_id, title, "brain", "right")
        body = f"<div id='sc-status' role='alert'>{html.escape(message)}</div>"
        await self.plugin.set_panel_content(panel_id, body)

    def _fail(self, message: str) -> None:
        self.error = message
        self._report(message)

    def _report(self, message: str) -> None:
        logger = getattr(self.plugin, "logger", None)
        if logger is not None and callable(getattr(logger, "error", None)):
            logger.error(message)
        else:
            log.error(message)

    def _forward_logs(self) -> None:
        """Our warnings and errors in Tailor's log (it logs with loguru, not ``logging``)."""
        logger = getattr(self.plugin, "logger", None)
        if logger is None or not callable(getattr(logger, "log", None)):
            return
        self._forward = _Forward(logger)
        logging.getLogger("smart_context").addHandler(self._forward)


class _Forward(logging.Handler):
    """Hands ``logging`` records of ours to Tailor's logger."""

    def __init__(self, logger: Any) -> None:
        super().__init__(logging.WARNING)
        self.logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.logger.log(record.levelname, self.format(record))
        except Exception:  # logging must never fail the caller  # noqa: BLE001
            self.handleError(record)


async def _undo(what: str, step: Callable[..., Any], *args: Any) -> None:
    """Run one step of unloading (a function or a coroutine function); a failure is logged,
    never raised: unloading must finish for Tailor's other plugins."""
    try:
        result = step(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("Smart Context: unloading: %s failed", what)
