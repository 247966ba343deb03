"""The sidecar host contract (docs/contract.md §1) as pluggy hook specifications.

A host does ``pm.add_hookspecs(smart_context.hookspecs)`` and
``pm.load_setuptools_entrypoints("sidecar")``; it calls every hook with keyword arguments and
awaits any awaitable result, in pluggy's call order.
"""

from __future__ import annotations

from typing import Any

import pluggy

from smart_context.host import UI, Commands, Host, PipelineContext

PROJECT = "sidecar"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def sidecar_startup(host: Host) -> Any:
    """Called once after all plugins are loaded; ``host`` offers the services of ``Host``."""


@hookspec
def sidecar_register_commands(commands: Commands) -> Any:
    """Called once; register command handlers with ``commands.register(name, handler)``."""


@hookspec
def sidecar_client_connected(ui: UI) -> Any:
    """Called each time a UI client connects; register and fill panels through ``ui``."""


@hookspec
def pipeline_input(ctx: PipelineContext) -> Any:
    """Phase ``pipeline.input``: the user's message has arrived; ``ctx`` may be rewritten."""


@hookspec
def pipeline_context(ctx: PipelineContext) -> Any:
    """Phase ``pipeline.context``: before every LLM call; plugins may rewrite ``ctx.history``."""


@hookspec
def pipeline_prompt(ctx: PipelineContext) -> Any:
    """Phase ``pipeline.prompt``: the prompt is being assembled from ``ctx``."""


@hookspec
def pipeline_llm(ctx: PipelineContext) -> Any:
    """Phase ``pipeline.llm``: the model call; a plugin may supply ``ctx.response``."""


@hookspec
def pipeline_post_process(ctx: PipelineContext) -> Any:
    """Phase ``pipeline.post_process``: ``ctx.response`` is complete and may be rewritten."""


@hookspec
def pipeline_output(ctx: PipelineContext) -> Any:
    """Phase ``pipeline.output``: after every LLM response; must return promptly."""


@hookspec
def sidecar_shutdown() -> Any:
    """Called once on exit: finish or cancel background work and flush caches."""
