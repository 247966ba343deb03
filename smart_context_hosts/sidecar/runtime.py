"""The running sidecar: settings, services, plugins, commands and message runs, in one object.

The HTTP layer (:mod:`.app`) only translates requests into calls on :class:`Sidecar`, so the
same host can be driven from tests or another front end.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pluggy

from smart_context_hosts.sidecar.config import VaultConfig
from smart_context_hosts.sidecar.events import EventHub
from smart_context_hosts.sidecar.host import (
    CommandError,
    CommandRegistry,
    PanelCollector,
    SidecarHost,
)
from smart_context_hosts.sidecar.pipeline import Pipeline, PipelineEvent
from smart_context_hosts.sidecar.plugins import PluginReport, call_hook, get_plugin_manager
from smart_context_hosts.sidecar.tool_approvals import ToolApprovals
from smart_context_hosts.sidecar.tools import ToolLoop, auto_approved

SHUTDOWN_GRACE_SECONDS = 30.0

log = logging.getLogger(__name__)


class MessageRun:
    """One message going through the pipeline in its own task.

    The task does not belong to the HTTP request: a browser that goes away mid-reply does not
    cancel it, so the reply is still stored. The request reads the run's events as they come.
    """

    def __init__(self, pipeline: Pipeline, chat_id: str, content: str) -> None:
        self.chat_id = chat_id
        self._queue: asyncio.Queue[PipelineEvent] = asyncio.Queue()
        self.task = asyncio.create_task(self._run(pipeline, content), name=f"message:{chat_id}")

    async def _run(self, pipeline: Pipeline, content: str) -> None:
        try:
            async for event in pipeline.run(self.chat_id, content):
                self._queue.put_nowait(event)
        except Exception as exc:  # e.g. the disk is full: say so instead of hanging the client
            log.exception("The message to chat %s could not be processed.", self.chat_id)
            self._queue.put_nowait(
                PipelineEvent("error", {"error": f"The message could not be processed: {exc}"})
            )

    async def events(self) -> AsyncIterator[PipelineEvent]:
        """Every event of the run, ending with ``done`` or ``error``."""
        while True:
            event = await self._queue.get()
            yield event
            if event.name in ("done", "error"):
                return

    async def result(self) -> PipelineEvent:
        """The final ``done`` or ``error`` event."""
        final = PipelineEvent("error", {"error": "The message produced no result."})
        async for event in self.events():
            final = event
        return final


class Sidecar:
    """A vault's host: ``start``, ``client_connected``, ``send_message``, ``run_command``,
    ``stop``."""

    def __init__(
        self,
        vault: Path,
        *,
        plugin_manager: pluggy.PluginManager | None = None,
        events: EventHub | None = None,
    ) -> None:
        self.config = VaultConfig(vault)
        self.host = SidecarHost(self.config, events)
        self.plugin_report = PluginReport()
        if plugin_manager is None:
            self.pm = get_plugin_manager(self.config, report=self.plugin_report)
        else:
            self.pm = plugin_manager
            self.plugin_report.loaded = [n for n, _ in plugin_manager.list_name_plugin() if n]
        self.commands = CommandRegistry()
        self.tool_approvals = ToolApprovals()
        turns = ToolLoop(
            self.host.llm,
            call_command=self.run_command,
            emit=self.host.emit,
            approvals=self.tool_approvals,
            auto_approve=lambda server: auto_approved(self.config, server),
        )
        self.pipeline = Pipeline(self.pm, self.host.memory, self.host.llm, turns)
        self._runs: set[asyncio.Task[None]] = set()

    @property
    def vault(self) -> Path:
        """The vault folder."""
        return self.host.vault_path

    async def start(self) -> None:
        """Tidy what a crash left, then ``sidecar_startup(host)`` and
        ``sidecar_register_commands(commands)``."""
        await self.host.memory.tidy()
        await call_hook(self.pm, "sidecar_startup", host=self.host)
        await call_hook(self.pm, "sidecar_register_commands", commands=self.commands)
        log.info(
            "Vault %s; plugins: %s; chat model: %s.",
            self.vault,
            ", ".join(self.plugin_report.loaded) or "none",
            self.host.llm.model_name("chat") or "none configured",
        )

    async def stop(self) -> None:
        """Let replies in flight finish (briefly), then ``sidecar_shutdown()``; tool calls
        still waiting for the user are declined so those replies can end."""
        self.host.events.close()
        self.tool_approvals.decline_all()
        if self._runs:
            _, pending = await asyncio.wait(set(self._runs), timeout=SHUTDOWN_GRACE_SECONDS)
            for task in pending:
                task.cancel()
        await call_hook(self.pm, "sidecar_shutdown")
        await self.host.llm.aclose()

    async def client_connected(self) -> list[dict[str, Any]]:
        """``sidecar_client_connected(ui)``; the panels the plugins registered for this client."""
        ui = PanelCollector()
        await call_hook(self.pm, "sidecar_client_connected", ui=ui)
        return ui.as_list()

    def send_message(self, chat_id: str, content: str) -> MessageRun:
        """Start running ``content`` through the pipeline for ``chat_id``."""
        run = MessageRun(self.pipeline, chat_id, content)
        self._runs.add(run.task)
        run.task.add_done_callback(self._runs.discard)
        return run

    async def run_command(self, name: str, kwargs: Mapping[str, Any]) -> Any:
        """The result of command ``name`` called with ``kwargs``; failures as
        :class:`CommandError`."""
        handler = self.commands.check_call(name, kwargs)
        try:
            result = handler(**kwargs)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # a plugin's bug: reported to the caller, logged with trace
            log.exception("Command %r failed.", name)
            raise CommandError(
                500, f"Command {name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        return result
