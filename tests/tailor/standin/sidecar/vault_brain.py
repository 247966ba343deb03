"""``VaultBrain``: the singleton that loads plugins and holds commands, events and the pipeline."""

import asyncio
import importlib.util
import inspect
import json
import logging
import tomllib
from collections import defaultdict

from sidecar import constants
from sidecar.pipeline.default import DefaultPipeline
from sidecar.pipeline.events import PipelineEvents
from sidecar.pipeline.tool_registry import ToolRegistry
from sidecar.pipeline.types import PipelineContext
from sidecar.services import llm_service

log = logging.getLogger("tailor.brain")


class CommandNotFoundError(Exception):
    pass


class CommandExecutionError(Exception):
    pass


class VaultBrain:
    _instance = None

    @classmethod
    def get(cls):
        if cls._instance is None:
            raise RuntimeError("VaultBrain has not been initialized yet.")
        return cls._instance

    def __init__(self, vault_path, llm):
        VaultBrain._instance = self
        self.vault_path = vault_path
        self.plugins = {}
        self.commands = {}
        self._subscribers = defaultdict(list)
        self.tool_registry = ToolRegistry()
        self.pipeline = DefaultPipeline(self)
        self.config = {}
        self.client_connected = False
        self.frontend = []  # (event_type, data) sent to the window
        self.load_errors = {}  # plugin name -> the exception that kept it out
        llm_service._llm_service = llm

    # -- lifecycle ---------------------------------------------------------------------------

    async def initialize(self):
        config_file = self.vault_path / ".vault.toml"
        self.config = tomllib.loads(config_file.read_text("utf-8")) if config_file.exists() else {}
        self._load_plugins()
        for plugin in self.plugins.values():
            await plugin.on_load()

    def _load_plugins(self):
        plugins_dir = self.vault_path / "plugins"
        folders = (
            sorted(
                p
                for p in plugins_dir.iterdir()
                if not p.name.startswith((".", "_")) and (p / "main.py").exists()
            )
            if plugins_dir.is_dir()
            else []
        )
        for folder in folders:
            settings = folder / "settings.json"
            config = json.loads(settings.read_text("utf-8")) if settings.exists() else {}
            overrides = self.config.get("plugins", {}).get(folder.name, {})
            config.update(overrides if isinstance(overrides, dict) else {})
            if not config.get("enabled", False):
                continue
            try:
                spec = importlib.util.spec_from_file_location(folder.name, folder / "main.py")
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                plugin_class = getattr(module, constants.PLUGIN_CLASS_NAME)
                plugin = plugin_class(plugin_dir=folder, vault_path=self.vault_path, config=config)
                plugin.register_commands()
                self.plugins[folder.name] = plugin
            except Exception as exc:
                log.exception("Failed to load plugin %r", folder.name)
                self.load_errors[folder.name] = exc

    async def client_ready(self):
        self.client_connected = True
        for name, plugin in self.plugins.items():
            try:
                await plugin.on_client_connected()
            except Exception:
                log.exception("Error in %s.on_client_connected", name)

    async def unload_plugin(self, name):
        plugin = self.plugins.pop(name)
        await plugin.on_unload()
        for command_id in [c for c, meta in self.commands.items() if meta["plugin"] == name]:
            del self.commands[command_id]
        for handlers in self._subscribers.values():
            handlers[:] = [
                (p, h) for p, h in handlers if getattr(h, "__self__", None) is not plugin
            ]

    # -- commands and events -------------------------------------------------------------------

    def register_command(self, command_id, handler, plugin_name=None, override=False):
        if not inspect.iscoroutinefunction(handler):
            raise ValueError(f"{command_id}: handler must be an async function")
        if command_id in self.commands and not override:
            raise ValueError(f"{command_id}: command already registered")
        self.commands[command_id] = {"handler": handler, "plugin": plugin_name}

    async def execute_command(self, command_id, **kwargs):
        if command_id not in self.commands:
            raise CommandNotFoundError(command_id)
        try:
            return await self.commands[command_id]["handler"](**kwargs)
        except Exception as exc:
            raise CommandExecutionError(f"{command_id}: {exc}") from exc

    def subscribe(self, event, handler, priority=0):
        if not inspect.iscoroutinefunction(handler):
            raise ValueError("Handler must be async")
        self._subscribers[event].append((priority, handler))
        self._subscribers[event].sort(key=lambda ph: ph[0], reverse=True)

    def unsubscribe(self, event, handler):
        handlers = self._subscribers.get(event, [])
        for i, (_, h) in enumerate(handlers):
            if h == handler:
                handlers.pop(i)
                return True
        return False

    def subscribers(self, event):
        return [h for _, h in self._subscribers.get(event, [])]

    async def publish(self, event, sequential=False, **kwargs):
        async def safe(handler):
            try:
                await handler(**kwargs)
            except Exception:
                log.exception("Event handler failed for %r", event)

        handlers = self.subscribers(event)
        if sequential:
            for handler in handlers:
                await safe(handler)
        else:
            await asyncio.gather(*(safe(h) for h in handlers))

    def emit_to_frontend(self, event_type, data, scope=constants.SCOPE_WINDOW):
        if self.client_connected:
            self.frontend.append((event_type, data))

    def events_named(self, event_type):
        return [data for name, data in self.frontend if name == event_type]

    # -- chat ----------------------------------------------------------------------------------

    async def chat_send(self, message, chat_id, stream=False):
        """What the chat window's ``chat.send`` does: history from ``chat.get_history``, then
        the pipeline (non-streaming) or ``stream_run`` and ``pipeline.output`` (streaming)."""
        history = (await self.execute_command("chat.get_history", chat_id=chat_id))["history"]
        if not stream:
            ctx = await self.pipeline.run(
                message, history, stream=False, metadata={"chat_id": chat_id}
            )
            return ctx
        metadata = {"category": "fast", "model": None, "chat_id": chat_id}
        response = ""
        async for token in self.pipeline.stream_run(
            message=message, history=history, metadata=metadata
        ):
            response += token
        ctx = PipelineContext(
            message=message, original_message=message, history=history, response=response
        )
        ctx.metadata["chat_id"] = chat_id
        await self.publish(PipelineEvents.OUTPUT, sequential=True, ctx=ctx)
        return ctx
