"""Tailor's pipeline events onto our hooks: ``pipeline.context``, ``pipeline.prompt``,
``pipeline.post_process`` and ``pipeline.output``.

Two things about Tailor's pipeline shape this module:

- its graph's context node hands on only ``metadata`` (LangGraph applies the fields a node
  returns; the context node returns ``metadata``), so a history rewritten at
  ``pipeline.context`` would not reach the model. The rewritten history is kept in
  ``metadata`` (:data:`STASH`) and put in place at ``pipeline.prompt``, whose node hands on the
  whole context; where a history change does survive, putting the same list again is harmless;
- its streaming path (the chat window's default) publishes no ``pipeline.context`` at all: it
  calls ``pipeline.stream_run(message, history, metadata)`` directly. :class:`StreamingContext`
  wraps that one method of the running pipeline so our context phase runs there too (only ours:
  other plugins see Tailor's streaming path as before), and restores it on unload.

Every handler lets the message through untouched when anything fails: logged, never raised
into Tailor.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from smart_context.plugin import SmartContextPlugin

log = logging.getLogger("smart_context")

CONTEXT = "pipeline.context"
PROMPT = "pipeline.prompt"
POST_PROCESS = "pipeline.post_process"
OUTPUT = "pipeline.output"
RECORD = "smart_context"  # our record in ctx.metadata (CONTRACT §6): the phase has run
STASH = "smart_context_history"  # the rewritten history, from the context to the prompt phase
# Tailor's memory plugin saves the turn at priority 10; our topic pass must read it saved
OUTPUT_PRIORITY = 0


class PipelineHooks:
    """Tailor's pipeline events for ``plugin``'s hooks, while ``is_on()`` says it may act."""

    def __init__(self, plugin: SmartContextPlugin, is_on: Callable[[], bool]) -> None:
        self.plugin = plugin
        self.is_on = is_on

    def subscriptions(self) -> list[tuple[str, Callable[..., Awaitable[None]], int]]:
        """(event, handler, priority) to subscribe with Tailor."""
        return [
            (CONTEXT, self.on_context, 0),
            (PROMPT, self.on_prompt, 0),
            (POST_PROCESS, self.on_post_process, 0),
            (OUTPUT, self.on_output, OUTPUT_PRIORITY),
        ]

    async def on_context(self, ctx: Any) -> None:
        """Choose the history, the items and the budget for this request (once per request)."""
        if not self.is_on() or RECORD in ctx.metadata:
            return
        original = ctx.history
        try:
            await self.plugin.pipeline_context(ctx)
            if ctx.history is not original:
                ctx.metadata[STASH] = ctx.history
        except Exception:  # the user's message must go through as it came
            log.exception("Smart Context: the context phase failed; the history is sent as is")
            ctx.history = original
            ctx.metadata.pop(STASH, None)

    async def on_prompt(self, ctx: Any) -> None:
        """Put the history chosen at the context phase in place (see the module's docstring)."""
        stashed = ctx.metadata.pop(STASH, None)
        if isinstance(stashed, list):
            ctx.history = stashed

    async def on_post_process(self, ctx: Any) -> None:
        """The usage the model reported, for the budget's calibration (the hook catches its own
        failures: the reply is never lost to our bookkeeping)."""
        if self.is_on():
            await self.plugin.pipeline_post_process(ctx)

    async def on_output(self, ctx: Any) -> None:
        """After the reply is saved: schedule the topic and memory pass (returns at once)."""
        if self.is_on() and ctx.response:
            self.plugin.pipeline_output(ctx)


@dataclass
class StreamingRequest:
    """The pipeline context of a streamed request, as our hooks read it (Tailor builds none)."""

    message: str
    original_message: str
    history: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)
    response: str | None = None
    should_abort: bool = False


StreamRun = Callable[..., AsyncIterator[str]]


class StreamingContext:
    """Runs ``on_context`` on Tailor's streaming path, by wrapping ``pipeline.stream_run``."""

    def __init__(self, on_context: Callable[[Any], Awaitable[None]]) -> None:
        self.on_context = on_context
        self._installed: tuple[Any, StreamRun, StreamRun] | None = None

    def install(self, pipeline: Any) -> bool:
        """Wrap ``pipeline.stream_run``; False (and nothing changed) when it has none."""
        original = getattr(pipeline, "stream_run", None)
        if pipeline is None or not callable(original) or self._installed is not None:
            return False
        on_context = self.on_context

        async def stream_run(
            message: str,
            history: list[dict[str, Any]] | None = None,
            metadata: dict[str, Any] | None = None,
            **rest: Any,
        ) -> AsyncIterator[str]:
            request = StreamingRequest(message, message, list(history or []), dict(metadata or {}))
            await on_context(request)
            request.metadata.pop(STASH, None)  # the history goes on as the history itself
            async for token in original(
                message=request.message, history=request.history, metadata=request.metadata, **rest
            ):
                yield token

        pipeline.stream_run = stream_run
        self._installed = (pipeline, original, stream_run)
        return True

    def uninstall(self) -> None:
        """Give the pipeline its own ``stream_run`` back (unless someone wrapped ours since)."""
        if self._installed is None:
            return
        pipeline, original, ours = self._installed
        self._installed = None
        if getattr(pipeline, "stream_run", None) is not ours:
            return
        if "stream_run" in vars(pipeline) and getattr(type(pipeline), "stream_run", None):
            del pipeline.stream_run  # the class's method shows through again
        else:
            pipeline.stream_run = original
