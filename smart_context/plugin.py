"""The pluggy plugin: thin adapters from the host's hooks to the services and the context.

``plugin`` (the entry point) is created at import without doing any work; the services are
built in ``sidecar_startup``. Pipeline hooks never raise: a failure of ours must not cost the user
a reply or a message, so they log it and leave the request as it was.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from smart_context.commands import make_commands
from smart_context.config import Settings, parse_settings
from smart_context.context.assemble import assemble, click_ahead, plan_request, request_items
from smart_context.context.prepared import Prepared
from smart_context.context.usage import take_report
from smart_context.embeddings.base import Embedder
from smart_context.errors import SmartContextError
from smart_context.hookspecs import hookimpl
from smart_context.host import UI, Commands, Host, PipelineContext, resolve
from smart_context.mcp.config import PLUGIN_SERVER
from smart_context.memory.unsent import unsent_among
from smart_context.paths import check_chat_id
from smart_context.record import ContextRecord
from smart_context.services import Services

log = logging.getLogger("smart_context")


class SmartContextPlugin:
    """Smart Context as a sidecar plugin (docs/contract.md §1)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        # ``embedder`` overrides the setting, for hosts and tests that bring their own model.
        self.embedder = embedder
        self.services: Services | None = None

    @hookimpl
    async def sidecar_startup(self, host: Host) -> None:
        error = None
        try:
            settings = parse_settings(await resolve(host.settings("smart_context")))
        except SmartContextError as exc:
            # A bad setting switches the filter off with a visible reason instead of taking the
            # whole chat app down; the panel and every context record show the message.
            error = str(exc)
            log.error("Smart Context is off until the setting is fixed: %s", exc)
            settings = Settings(embedding_search=False)
        self.services = Services(host, settings, self.embedder, error)
        self.services.click_ahead = partial(click_ahead, self.services)
        # meanwhile: list the MCP servers' tools, and embed the items no request has yet
        self.services.items.servers.refresh_soon()
        self.services.index_items()
        self.services.index_knowledge()

    @hookimpl
    def sidecar_register_commands(self, commands: Commands) -> None:
        for name, handler in make_commands(self._services()).items():
            commands.register(name, handler)

    @hookimpl
    async def sidecar_client_connected(self, ui: UI) -> None:
        # jinja2 loads on the first client, not when a host merely loads the plugin
        from smart_context.panel import PANEL_ID, PANEL_TITLE, render_panel

        services = self._services()
        await resolve(ui.register_panel(PANEL_ID, PANEL_TITLE, icon="brain", position="right"))
        initial = {
            "chat_id": services.current_chat_id,
            "embedding_search": services.settings.embedding_search,
            "error": services.config_error,
        }
        await resolve(ui.set_panel_content(PANEL_ID, render_panel(initial)))

    @hookimpl
    async def pipeline_context(self, ctx: PipelineContext) -> None:
        plan = None
        try:
            chat_id = check_chat_id(ctx.metadata.get("chat_id"))
            services = self._services()
            services.current_chat_id = chat_id
            history = services.histories.read(chat_id, ctx.history)
            await services.budget.read_ahead(chat_id, _model_of(ctx), history)
            plan = plan_request(
                services, chat_id, history, ctx.message, _model_of(ctx), _takes_tools(ctx)
            )
            if plan.dense is not None:
                await asyncio.sleep(0)  # the work the plan started reaches its first wait
            decision = await assemble(services, chat_id, history)
            dry = bool(ctx.metadata.get("dry_run"))
            place = ctx.metadata.get("recalled_in")  # the host's word, when it says
            prepared = await request_items(
                services, plan, decision, not dry, place if isinstance(place, str) else None
            )
            if not dry:  # where the model's look back will search
                memories = _sent_memories(prepared.record)
                services.unsent.put(
                    chat_id, partial(unsent_among, history.ids, prepared.messages, memories)
                )
        except Exception as exc:  # the one broad except: the user's request must go through
            if plan is not None and plan.dense is not None:
                plan.dense.cancel()  # what the plan started for the budget is not needed
            if isinstance(exc, SmartContextError):  # ours, with a message that says it all
                log.warning("Smart Context: sending the full history: %s", exc)
            else:
                log.exception("Smart Context: context selection failed; sending the full history")
            failed = ContextRecord.failed(len(ctx.history), f"Smart Context failed: {exc}")
            ctx.metadata["smart_context"] = failed.as_dict()
            return
        _write_back(ctx, prepared, services.settings)

    @hookimpl
    async def pipeline_post_process(self, ctx: PipelineContext) -> None:
        try:
            services = self._services()
            sent = [*ctx.history, {"role": "user", "content": ctx.message}]
            await take_report(
                services.budget,
                services.calibration,
                ctx.metadata,
                sent,
                _model_of(ctx),
                services.cache_seen,
            )
        except Exception:  # the usage figures must never cost the user the reply
            log.exception("Smart Context: the reported token usage was not taken")

    @hookimpl
    def pipeline_output(self, ctx: PipelineContext) -> None:
        try:
            self._services().schedule_refresh(check_chat_id(ctx.metadata.get("chat_id")))
        except Exception:  # scheduling must never fail the reply the user is waiting for
            log.exception("Smart Context: could not schedule topic extraction")

    @hookimpl
    async def sidecar_shutdown(self) -> None:
        if self.services is not None:
            await self.services.close()

    def _services(self) -> Services:
        if self.services is None:
            raise SmartContextError(
                "Smart Context has not been started (sidecar_startup not called)."
            )
        return self.services


def _model_of(ctx: PipelineContext) -> str | None:
    """The chat model the host will call, when it says (``ctx.metadata["model"]``): its
    tokenizer counts the budget."""
    model = ctx.metadata.get("model")
    return model if isinstance(model, str) and model.strip() else None


def _write_back(ctx: PipelineContext, prepared: Prepared, settings: Settings) -> None:
    """The request as the host sends it: the history, the records, the tools, and which of the
    plugin's own tools may run unasked."""
    ctx.history = prepared.messages
    if prepared.message is not None:  # what was chosen for this message goes inside it
        ctx.message = prepared.message
    ctx.metadata["smart_context"] = prepared.record
    ctx.metadata["request_context"] = prepared.request.record()
    if prepared.tools:
        ctx.metadata["tools"] = prepared.tools
    if settings.memory_tools and settings.memory_tools_auto_approve:
        ctx.metadata["auto_approve_servers"] = [PLUGIN_SERVER]


def _takes_tools(ctx: PipelineContext) -> bool:
    """Whether the host's chat model takes tools: yes unless the host says it does not
    (``ctx.metadata["tools_supported"]`` false)."""
    return ctx.metadata.get("tools_supported") is not False


def _sent_memories(record: dict[str, Any]) -> list[Any]:
    """The ids of the stored memories the request's memory section carried."""
    memory = record.get("memory")
    ids = memory.get("memory_ids") if isinstance(memory, dict) else None
    return ids if isinstance(ids, list) else []


plugin = SmartContextPlugin()
