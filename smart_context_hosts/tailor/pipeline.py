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
- on that path the ``pipeline.output`` context is built afresh, without the request's metadata,
  so the record of what the reply was sent with (docs/contract.md §6) is kept aside per chat
  (:class:`StreamedRecords`) until the output phase asks for it. Either way, at the output
  phase, after Tailor's memory plugin has saved the turn, the record is stored on the saved
  reply, as our sidecar stores it: the panel's usage chart, ``smart-context stats`` and a later
  look at what a reply was sent with read it there. ``chat.updated`` then tells open pages.

Every handler lets the message through untouched when anything fails: logged, never raised
into Tailor.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from smart_context.host import ChatData
from smart_context.paths import check_chat_id
from smart_context.plugin import SmartContextPlugin
from smart_context.record import json_safe

log = logging.getLogger("smart_context")

CONTEXT = "pipeline.context"
PROMPT = "pipeline.prompt"
POST_PROCESS = "pipeline.post_process"
OUTPUT = "pipeline.output"
RECORD = "smart_context"  # our record in ctx.metadata (docs/contract.md §6): the phase has run
TOOLS_SUPPORTED = "tools_supported"  # the host's word on its model (smart_context.plugin)
STASH = "smart_context_history"  # the rewritten history, from the context to the prompt phase
# Tailor's memory plugin saves the turn at priority 10; our topic pass must read it saved
OUTPUT_PRIORITY = 0
CHAT_UPDATED = "chat.updated"  # docs/contract.md §7: the reply now carries its record
KEPT_STREAMS = 64  # records of streamed requests waiting for their output phase, at most


class PipelineHooks:
    """Tailor's pipeline events for ``plugin``'s hooks, while ``is_on()`` says it may act."""

    def __init__(self, plugin: SmartContextPlugin, is_on: Callable[[], bool]) -> None:
        self.plugin = plugin
        self.is_on = is_on
        self.streamed = StreamedRecords()

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
        # Tailor calls its model with the messages alone, on both paths: no tool is sent, so
        # none may be counted in the budget or listed in the record (a Tailor that says
        # otherwise is believed)
        ctx.metadata.setdefault(TOOLS_SUPPORTED, False)
        # Tailor's memory plugin stores ctx.message as the user's message: what is chosen for
        # this message goes as a system message before it, never inside it
        ctx.metadata.setdefault("recalled_in", "system")
        try:
            await self.plugin.pipeline_context(ctx)
            if ctx.history is not original:
                ctx.metadata[STASH] = ctx.history
        except Exception:  # the user's message must go through as it came
            log.exception("Smart Context: the context phase failed; the history is sent as is")
            ctx.history = original
            ctx.metadata.pop(STASH, None)

    async def on_streamed_context(self, request: StreamingRequest) -> None:
        """The context phase of a streamed request; its record is kept for the output phase."""
        await self.on_context(request)
        self.streamed.keep(request.metadata, request.original_message)

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
        """After the reply is saved: store the record on it, then schedule the topic and memory
        pass (which returns at once)."""
        if self.is_on() and ctx.response:
            await self.store_record(ctx)
            self.plugin.pipeline_output(ctx)

    async def store_record(self, ctx: Any) -> None:
        """Put the request's record on the reply Tailor's memory plugin just saved, and say so
        to open pages. A failure is logged: the reply itself is saved already."""
        chat_id = ctx.metadata.get("chat_id")
        record = ctx.metadata.get(RECORD)
        if not isinstance(record, dict):
            record = self.streamed.take(chat_id, ctx.message)
        if not isinstance(record, dict) or not isinstance(chat_id, str):
            return
        ids = ctx.metadata.get("generated_ids")
        reply_id = ids.get("assistant_message_id") if isinstance(ids, dict) else None
        stored_record = json_safe(record)
        try:
            host = self.plugin.services.host if self.plugin.services else None
            if host is None:
                return
            chat = await host.memory.update_chat(
                check_chat_id(chat_id),
                lambda data: with_record(data, reply_id, ctx.response, stored_record),
            )
            messages = chat.get("messages")
            count = len(messages) if isinstance(messages, list) else 0
            host.emit(CHAT_UPDATED, {"chat_id": chat_id, "message_count": count})
        except Exception:  # the reply is saved; only what it was sent with is missing
            log.exception("Smart Context: could not store the context record of a reply")


def with_record(
    data: ChatData, reply_id: object, response: str, record: dict[str, Any]
) -> ChatData:
    """``data`` with ``record`` on the reply: the message with id ``reply_id`` when Tailor said
    which, else the chat's last message if it is an assistant message reading ``response`` (an
    older reply of the same text is never taken for it). A reply that already has a record, or
    none found, leaves ``data`` as it is."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return data
    replies = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    if reply_id is not None:
        found = [m for m in replies if str(m.get("id")) == str(reply_id)]
    else:
        last = replies[-1:] if replies and messages[-1] is replies[-1] else []
        found = [m for m in last if m.get("content") == response]
    for message in found[:1]:
        if RECORD not in message:
            message[RECORD] = record
    return data


class StreamedRecords:
    """The record of each chat's last streamed request, until its output phase takes it.

    Tailor rebuilds the output context from the message, the reply and the chat id alone; the
    message tells a record from that of a request cancelled before its output phase. At most
    :data:`KEPT_STREAMS` chats are remembered, the oldest forgotten first.
    """

    def __init__(self) -> None:
        self._records: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()

    def keep(self, metadata: dict[str, Any], message: str) -> None:
        """Remember the record in ``metadata`` (if any) for its chat."""
        chat_id, record = metadata.get("chat_id"), metadata.get(RECORD)
        if not isinstance(chat_id, str) or not isinstance(record, dict):
            return
        self._records.pop(chat_id, None)
        self._records[chat_id] = (message, record)
        while len(self._records) > KEPT_STREAMS:
            self._records.popitem(last=False)

    def take(self, chat_id: object, message: str) -> dict[str, Any] | None:
        """The record kept for ``chat_id``'s request with ``message``, forgotten once taken."""
        if not isinstance(chat_id, str):
            return None
        kept = self._records.get(chat_id)
        if kept is None or kept[0] != message:
            return None
        del self._records[chat_id]
        return kept[1]


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
