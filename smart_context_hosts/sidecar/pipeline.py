"""One user message through the phases: input, context, prompt, llm, post_process, output.

Order of work, chosen so that nothing is ever lost:

1. the user's message is appended to the chat file *first*;
2. the phases run on a :class:`PipelineContext` (``history`` is a copy of the chat before the
   message; ``metadata["chat_id"]`` names the chat);
3. the reply streams from the chat model, piece by piece, with the tool calls the model asks
   for run in between (:mod:`.tools`), unless a plugin supplied ``ctx.response`` in
   ``pipeline_llm``;
4. the assistant message is appended, carrying
   ``ctx.metadata["smart_context"]`` so what the reply was sent with can be rebuilt, and a
   record of its tool calls (``tool_calls``) for the page, never for later prompts.

With no chat model configured the stored assistant message says so (``"notice": "no_model"``)
and never pretends to be a reply. When the model fails, the assistant message carries an
``"error"`` and the human-readable text, and the stream ends with an ``error`` event.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pluggy

from smart_context.allocator import urgent
from smart_context.record import json_safe
from smart_context_hosts.sidecar.llm import LLMError, LLMService, TurnUsage
from smart_context_hosts.sidecar.memory import ChatMemory, now_iso
from smart_context_hosts.sidecar.plugins import call_hook
from smart_context_hosts.sidecar.tools import ToolLoop, offered_tools

PROMPT_ROLES = frozenset({"system", "user", "assistant"})
TITLE_LENGTH = 60
BEFORE_MODEL = ("pipeline_input", "pipeline_context", "pipeline_prompt", "pipeline_llm")

log = logging.getLogger(__name__)


@dataclass
class PipelineContext:
    """``ctx``: the fields of docs/contract.md §1, as in the Tailor sidecar's
    ``PipelineContext``."""

    message: str
    original_message: str
    history: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    response: str | None = None
    should_abort: bool = False
    abort_reason: str | None = None

    def abort(self, reason: str) -> None:
        """Stop the pipeline before the model is called (Tailor's spelling of it)."""
        self.should_abort = True
        self.abort_reason = reason


@dataclass(frozen=True)
class PipelineEvent:
    """What the pipeline reports: ``token`` ``{"text"}`` (with ``tool_call`` and
    ``tool_result`` between them when the model uses tools), then ``done`` or ``error``."""

    name: str
    data: dict[str, Any]


@dataclass
class Reply:
    """The outcome of the model phase."""

    text: str = ""
    error: str | None = None
    notice: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: list[TurnUsage] = field(default_factory=list)  # per model turn, when reported
    model: str | None = None  # the model that answered, when not the vault's chat model
    wire: dict[str, Any] | None = None  # the reply as a client holds it (the proxy's chats)


def reply_usage(turns: list[TurnUsage]) -> dict[str, int] | None:
    """What the server said a reply cost, OpenAI's ``usage`` shape: ``prompt_tokens`` of its
    first turn (the request as the plugins built it: what their counts are compared with),
    with ``cached_tokens`` and ``cache_write_tokens`` of that turn when the server said what
    its prompt cache did; ``completion_tokens`` and ``total_tokens`` over all its turns (tool
    rounds send the prompt again), and ``rounds``; ``None`` when the server said nothing."""
    if not turns:
        return None
    first = turns[0]
    completion = sum(t.completion_tokens for t in turns)
    out = {"prompt_tokens": first.prompt_tokens}
    if first.cached_tokens is not None:
        out["cached_tokens"] = first.cached_tokens
    if first.cache_write_tokens is not None:
        out["cache_write_tokens"] = first.cache_write_tokens
    return out | {
        "completion_tokens": completion,
        "total_tokens": sum(t.prompt_tokens for t in turns) + completion,
        "rounds": len(turns),
    }


def new_message_id() -> str:
    """A short unique message id."""
    return uuid.uuid4().hex[:12]


def prompt_messages(ctx: PipelineContext) -> list[dict[str, str]]:
    """What the chat model receives: ``ctx.history`` then ``ctx.message``, role and content only.

    Stored notices and error texts are the sidecar talking, not the model: they stay out.
    """
    prompt = [
        {"role": str(m["role"]), "content": m["content"]}
        for m in ctx.history
        if m.get("role") in PROMPT_ROLES
        and isinstance(m.get("content"), str)
        and not m.get("error")
        and not m.get("notice")
    ]
    prompt.append({"role": "user", "content": ctx.message})
    return prompt


def title_from(content: str) -> str:
    """A chat title from its first message: the first line, shortened (read no further than a
    title needs: a 60 MB pasted line took a second to split into words)."""
    line = " ".join(content.lstrip()[: 16 * TITLE_LENGTH].split("\n", 1)[0].split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


class Pipeline:
    """Runs messages for one host: ``async for event in pipeline.run(chat_id, content)``."""

    def __init__(
        self, pm: pluggy.PluginManager, memory: ChatMemory, llm: LLMService, turns: ToolLoop
    ) -> None:
        self.pm = pm
        self.memory = memory
        self.llm = llm
        self.turns = turns

    async def run(self, chat_id: str, content: str) -> AsyncIterator[PipelineEvent]:
        """Store the message, run the phases, stream the reply, store it; see the module doc."""
        with urgent():  # the cycle collector's passes wait until the model is asked
            user_message, history = await self._store_user_message(chat_id, content)
            ctx = PipelineContext(
                message=content,
                original_message=content,
                history=history,
                metadata=self._metadata(chat_id),
            )
            for phase in BEFORE_MODEL:
                await call_hook(self.pm, phase, ctx=ctx)
                if ctx.should_abort:
                    break
        reply = Reply()
        if ctx.should_abort:
            reply = self._aborted(ctx)
        elif ctx.response is None:
            async for event in self._generate(chat_id, ctx, reply):
                yield event
        else:
            reply.text = str(ctx.response)
            yield PipelineEvent("token", {"text": reply.text})
        yield await self.finish(chat_id, ctx, reply, user_message)

    async def dry_run(self, chat_id: str, content: str) -> dict[str, Any]:
        """What sending ``content`` now would use: the phases up to the prompt run on a copy of
        the chat; nothing is stored and no model is called (``pipeline_llm`` is not run, since
        a plugin may call a model there)."""
        data = await self.memory.load_chat(chat_id)
        history = [m for m in data.get("messages") or [] if isinstance(m, dict)]
        ctx = PipelineContext(
            message=content,
            original_message=content,
            history=history,
            metadata={**self._metadata(chat_id), "dry_run": True},
        )
        for phase in ("pipeline_input", "pipeline_context", "pipeline_prompt"):
            await call_hook(self.pm, phase, ctx=ctx)
            if ctx.should_abort:
                break
        metadata = ctx.metadata if isinstance(ctx.metadata, dict) else {}
        out: dict[str, Any] = {
            "smart_context": json_safe(metadata.get("smart_context")),
            "request_context": json_safe(metadata.get("request_context")),
            "messages": prompt_messages(ctx),
            "tools": self._tools_of(metadata),  # as the model gets them
        }
        out["tokens"] = self._tokens(out["messages"], out["tools"])
        if ctx.should_abort:
            out["aborted"] = ctx.abort_reason or "a plugin stopped this message"
        return out

    def _metadata(self, chat_id: str) -> dict[str, Any]:
        """What plugins learn of a request besides its messages: the chat, the chat model that
        will answer (its tokenizer counts a token budget), and whether it takes tools."""
        out: dict[str, Any] = {"chat_id": chat_id}
        model = self.llm.model_name("chat")
        if model:
            out["model"] = model
        # whether tools may be offered: a chat model, and the vault does not say it takes none
        out["tools_supported"] = self.llm.takes_tools
        return out

    def _tokens(self, messages: list[dict[str, Any]], tools: list[Any]) -> dict[str, Any]:
        """What the request would cost, counted with the chat model's tokenizer when it ships
        offline (else estimated), against its context window when known
        (docs/contract.md §7, §9)."""
        from smart_context.budget.tokens import context_window, counter_for, prompt_tokens

        model = self.llm.model_name("chat")
        counter = counter_for(model)
        return {
            "model": model,
            "encoding": counter.name,
            "exact": counter.exact,
            **prompt_tokens(counter, messages, tools),
            "context_window": context_window(model),
        }

    async def _generate(
        self, chat_id: str, ctx: PipelineContext, reply: Reply
    ) -> AsyncIterator[PipelineEvent]:
        if not self.llm.chat_configured:
            reply.notice = "no_model"
            reply.text = self.llm.missing_model_message("chat") or ""
            return
        metadata = ctx.metadata if isinstance(ctx.metadata, dict) else {}
        prompt: list[dict[str, Any]] = list(prompt_messages(ctx))
        try:
            async for name, data in self.turns.run(
                chat_id, prompt, self._tools_of(metadata), reply, _unasked(metadata)
            ):
                yield PipelineEvent(name, data)
        except LLMError as exc:
            reply.error = str(exc)
        except Exception as exc:  # an unexpected failure must still end as a stored message
            log.exception("The reply failed.")
            reply.error = f"The reply failed: {type(exc).__name__}: {exc}"

    def _tools_of(self, metadata: dict[str, Any]) -> list[dict[str, Any]]:
        """The tools plugins offer (``ctx.metadata["tools"]``), none for a model that takes
        none."""
        return offered_tools(json_safe(metadata.get("tools"))) if self.llm.takes_tools else []

    @staticmethod
    def _aborted(ctx: PipelineContext) -> Reply:
        reason = ctx.abort_reason or "no reason given"
        text = (
            ctx.response if ctx.response is not None else f"A plugin stopped this message: {reason}"
        )
        return Reply(text=str(text), notice="aborted")

    async def finish(
        self, chat_id: str, ctx: PipelineContext, reply: Reply, user_message: dict[str, Any]
    ) -> PipelineEvent:
        """Store the reply with the record of what it was sent with, after
        ``pipeline_post_process``; then ``pipeline_output``. Another host's model phase (the
        proxy's upstream) ends here too."""
        usage = reply_usage(reply.usage)
        if usage is not None and isinstance(ctx.metadata, dict):  # plugins compare their counts
            ctx.metadata["usage"] = usage
        if reply.error is None and reply.notice is None:
            ctx.response = reply.text
            await call_hook(self.pm, "pipeline_post_process", ctx=ctx)
            reply.text = "" if ctx.response is None else str(ctx.response)
        elif reply.notice == "no_model":
            ctx.response = reply.text
            if isinstance(ctx.metadata, dict):  # lets pipeline_output see there was no reply
                ctx.metadata["notice"] = reply.notice
        assistant = self._assistant_message(ctx, reply)
        # The chat the message came in on, whatever a plugin did to ctx.metadata meanwhile.
        await self._append(chat_id, assistant)
        if reply.error is not None:
            return PipelineEvent(
                "error",
                {
                    "error": reply.error,
                    "user_message": user_message,
                    "assistant_message": assistant,
                },
            )
        if reply.notice != "aborted":
            await call_hook(self.pm, "pipeline_output", ctx=ctx)
        return PipelineEvent("done", {"user_message": user_message, "assistant_message": assistant})

    def _assistant_message(self, ctx: PipelineContext, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": new_message_id(),
            "role": "assistant",
            "content": reply.error if reply.error is not None else reply.text,
            "created_at": now_iso(),
            "smart_context": json_safe(_record_of(ctx)),
        }
        request = ctx.metadata.get("request_context") if isinstance(ctx.metadata, dict) else None
        if request is not None:  # the items the reply was sent with (docs/contract.md §8)
            message["request_context"] = json_safe(request)
        if reply.tool_calls:  # shown by the page; prompt_messages never sends them again
            message["tool_calls"] = json_safe(reply.tool_calls)
        usage = reply_usage(reply.usage)
        if usage is not None:  # the server's own count, beside the plugin's in its record
            message["usage"] = usage
        model = reply.model or self.llm.model_name("chat")
        if model is not None and reply.notice is None:
            message["model"] = model
        if reply.wire is not None:
            message["wire"] = json_safe(reply.wire)
        if reply.error is not None:
            message["error"] = reply.error
            if reply.text:
                message["partial_content"] = reply.text  # what arrived before the failure
        if reply.notice is not None:
            message["notice"] = reply.notice
        if reply.notice == "aborted" and ctx.abort_reason:
            message["abort_reason"] = ctx.abort_reason
        return message

    async def _store_user_message(
        self, chat_id: str, content: str
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Append the user's message; return it and a copy of the history before it."""
        message = {
            "id": new_message_id(),
            "role": "user",
            "content": content,
            "created_at": now_iso(),
        }
        # The history is a copy of the chat's messages before this one, owned by this run.
        before = await self.memory.append_message(
            chat_id,
            message,
            updates={"updated_at": message["created_at"]},
            defaults={"title": title_from(content), "created_at": message["created_at"]},
            history=True,
        )
        return dict(message), before

    async def _append(self, chat_id: str, message: dict[str, Any]) -> None:
        await self.memory.append_message(
            chat_id, message, updates={"updated_at": message["created_at"]}
        )


def _unasked(metadata: dict[str, Any]) -> frozenset[str]:
    """``ctx.metadata["auto_approve_servers"]``: servers of a plugin's own tools whose calls
    may run unasked (the vault's word decides for the servers it declares)."""
    servers = metadata.get("auto_approve_servers")
    if not isinstance(servers, list):
        return frozenset()
    return frozenset(s for s in servers if isinstance(s, str))


def _record_of(ctx: PipelineContext) -> Any:
    """``ctx.metadata["smart_context"]``, the record of what the request was sent with."""
    return ctx.metadata.get("smart_context") if isinstance(ctx.metadata, dict) else None
