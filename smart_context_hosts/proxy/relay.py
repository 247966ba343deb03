"""One proxied chat turn, without HTTP: the client's messages into the vault chat, the plugins'
pipeline over it, the request rebuilt for the upstream, and the reply stored with its record.

The same :class:`~smart_context_hosts.sidecar.runtime.Sidecar` runs it as runs ``serve``: the
vault's plugins, settings, chat files and background passes. So a proxied chat is a vault chat
like any other: ``serve``'s page shows it with its topics, a bubble clicked there is read by
the next proxied request, and ``stats`` counts it.

What goes upstream is the client's request with one change, its ``messages``: the client's
system prompt first and unchanged, then what the plugins chose (their own system messages, the
history they kept), then the user message and any tool round after it as they came. The
client's tools, options and model stay as they were. When any of this fails the client's
request goes as it came (:class:`Passed`): a user never loses a reply because of us.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from smart_context.record import json_safe
from smart_context_hosts.proxy.conversation import (
    SIDECAR_ONLY,
    Split,
    merge,
    paired_tools,
    stored_form,
    wire_form,
)
from smart_context_hosts.proxy.identity import Chat
from smart_context_hosts.proxy.own_tools import OwnTools, own_tools
from smart_context_hosts.proxy.replies import Answer
from smart_context_hosts.sidecar.llm import TurnUsage
from smart_context_hosts.sidecar.memory import now_iso
from smart_context_hosts.sidecar.pipeline import (
    PipelineContext,
    Reply,
    new_message_id,
    title_from,
)
from smart_context_hosts.sidecar.plugins import call_hook
from smart_context_hosts.sidecar.runtime import Sidecar
from smart_context_hosts.sidecar.tools import auto_approved

BEFORE_UPSTREAM = ("pipeline_input", "pipeline_context", "pipeline_prompt")
MAX_HEADER_LABELS = 4
MAX_MEMOS = 256  # chats whose last request is remembered for the quick check
MAX_PENDING = 256  # chats whose turn waits for a reply a client brings (the turns API)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Turn:
    """A chat turn ready to go upstream: ``body`` is the rebuilt request, ``summary`` the
    ``X-Smart-Context`` header."""

    chat: Chat
    ctx: PipelineContext
    user_message: dict[str, Any]
    body: dict[str, Any]
    summary: str
    known: list[dict[str, Any]]  # the client's conversation, for the next request's quick check
    own: OwnTools = field(default_factory=OwnTools)  # the plugins' tools beside the client's


@dataclass(frozen=True)
class _Memo:
    """A chat as the last request left it: the client's messages, and the stored chat's length
    and last id then. A request that extends those messages appends without comparing."""

    wire: list[dict[str, Any]]
    count: int
    last_id: Any


class Relay:
    """The proxy's chat turns over one vault (:meth:`prepare`, then :meth:`finish`)."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar
        self._memos: dict[str, _Memo] = {}
        self._pending: OrderedDict[str, Turn] = OrderedDict()

    def hold(self, turn: Turn) -> None:
        """Keep ``turn`` until its reply comes (:meth:`take`), the chat's last turn only."""
        self._pending.pop(turn.chat.chat_id, None)
        while len(self._pending) >= MAX_PENDING:
            self._pending.popitem(last=False)  # a client that never sent the reply
        self._pending[turn.chat.chat_id] = turn

    def take(self, chat_id: str) -> Turn | None:
        """The chat's turn waiting for its reply, if any, no longer waiting."""
        return self._pending.pop(chat_id, None)

    async def prepare(self, chat: Chat, parts: Split, body: dict[str, Any]) -> Turn:
        """Store the client's messages in the chat, run the phases before the model, and
        rebuild the request. Raises when it cannot (the caller then sends the client's
        request as it came)."""
        chat_id = chat.chat_id
        incoming = [*parts.history, parts.message, *parts.tail]
        stored, user_message = await self._store(chat_id, incoming, parts)
        ctx = PipelineContext(
            message=parts.text,
            original_message=parts.text,
            history=stored,
            metadata=self._metadata(chat_id, body),
        )
        for phase in BEFORE_UPSTREAM:
            await call_hook(self.sidecar.pm, phase, ctx=ctx)
            if ctx.should_abort:
                raise RuntimeError(f"a plugin stopped the message: {ctx.abort_reason}")
        record = ctx.metadata.get("smart_context") if isinstance(ctx.metadata, dict) else None
        if not isinstance(record, dict):
            raise RuntimeError("no plugin chose the context (is Smart Context enabled?)")
        if record.get("error"):
            raise RuntimeError(str(record["error"]))
        own = own_tools(ctx.metadata, body.get("tools"), self._may_run)
        rebuilt = {**body, "messages": self._messages(ctx, parts)}
        if own.definitions:
            rebuilt["tools"] = [*body["tools"], *own.definitions]
        return Turn(
            chat=chat,
            ctx=ctx,
            user_message=user_message,
            body=rebuilt,
            summary=summary(record),
            known=incoming,
            own=own,
        )

    def _may_run(self, server: str, unasked: frozenset[str]) -> bool:
        """Whether a call to ``server`` may run without asking: no one can be asked here."""
        said = auto_approved(self.sidecar.config, server)
        return said if said is not None else server in unasked

    async def finish(self, turn: Turn, answer: Answer, error: str | None = None) -> None:
        """Store the upstream's reply on the chat with the record of what it was sent with
        (``error``: why there is no whole reply), then the plugins' after-reply work."""
        wire: dict[str, Any] = {"role": "assistant", "content": answer.text}
        if answer.tool_calls:
            wire["tool_calls"] = answer.tool_calls
        usage = []
        if answer.prompt_tokens is not None and answer.completion_tokens is not None:
            usage.append(TurnUsage(answer.prompt_tokens, answer.completion_tokens))
        reply = Reply(
            text=answer.text,
            error=error,
            usage=usage,
            model=answer.model or _str(turn.body.get("model")),
            wire=wire if answer.tool_calls else None,
        )
        event = await self.sidecar.pipeline.finish(
            turn.chat.chat_id, turn.ctx, reply, turn.user_message
        )
        stored = event.data.get("assistant_message") or {}
        memo = self._memos.pop(turn.chat.chat_id, None)
        if memo is not None and error is None:  # the chat as this reply left it
            known = [*turn.known, wire]
            self._remember(turn.chat.chat_id, _Memo(known, memo.count + 1, stored.get("id")))
        # after an error the next turn goes the long way: the client's copy of what it got
        # then takes the place of the stored error, as merge does with the sidecar's own

    def _remember(self, chat_id: str, memo: _Memo) -> None:
        self._memos.pop(chat_id, None)
        if len(self._memos) >= MAX_MEMOS:
            self._memos.pop(next(iter(self._memos)))
        self._memos[chat_id] = memo

    async def _store(
        self, chat_id: str, incoming: list[dict[str, Any]], parts: Split
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Put the client's conversation in the chat; the history before the user message
        (copies) and the stored user message."""
        now = now_iso()
        memory = self.sidecar.host.memory
        lead = json_safe(parts.lead)
        memo = self._memos.get(chat_id)
        keys: dict[str, Any] = {"updated_at": now, "proxy": {"system": lead}}
        defaults = {"title": title_from(parts.text), "created_at": now}
        if (
            memo is not None
            and len(incoming) > len(memo.wire)
            and incoming[: len(memo.wire)] == memo.wire
        ):
            # the usual turn: the conversation as the last request left it, and what is new,
            # appended in time that does not grow with the chat, while the chat is as we left it
            added = [stored_form(m, new_message_id(), now) for m in incoming[len(memo.wire) :]]
            before = await memory.append_messages(
                chat_id,
                added,
                updates=keys,
                defaults=defaults,
                history=True,
                expect=lambda data: _as_left(data, memo),
            )
            if before is not None:
                messages = [*before, *added]
                self._remember(chat_id, _Memo(list(incoming), len(messages), added[-1]["id"]))
                return _at_user(messages)

        def update(data: dict[str, Any]) -> dict[str, Any]:
            merged = merge(
                [m for m in data["messages"] if isinstance(m, dict)], incoming, new_message_id, now
            )
            if merged.dropped:
                log.info(
                    "Chat %s: the client no longer has %d stored message(s) (an edit or a "
                    "regenerated reply); its version is kept.",
                    chat_id,
                    merged.dropped,
                )
            out = {**data, "messages": merged.messages, **keys}
            for key, value in defaults.items():
                if not str(data.get(key) or "").strip():
                    out[key] = value
            return out

        data = await memory.update_chat(chat_id, update)
        messages = data["messages"]
        self._remember(chat_id, _Memo(list(incoming), len(messages), messages[-1].get("id")))
        return _at_user(messages)

    def _metadata(self, chat_id: str, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"chat_id": chat_id}
        model = _str(body.get("model"))
        if model:  # its tokenizer counts the budget
            out["model"] = model
        # the plugins' tools go beside the client's, when it sends some: its model takes tools
        tools = body.get("tools")
        out["tools_supported"] = isinstance(tools, list) and bool(tools)
        return out

    @staticmethod
    def _messages(ctx: PipelineContext, parts: Split) -> list[dict[str, Any]]:
        kept = [
            wire_form(m)
            for m in ctx.history
            if isinstance(m, dict) and not any(m.get(k) for k in SIDECAR_ONLY)
        ]
        message = parts.message
        if ctx.message != parts.text:  # a plugin rewrote the message
            message = {**message, "content": ctx.message}
        return [*parts.lead, *paired_tools(kept), message, *parts.tail]


def _at_user(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The history before the turn's user message (the last one: a tool round may follow it),
    and that message; ``messages`` are the caller's own copies."""
    at = next(i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user")
    return messages[:at], messages[at]


def _as_left(data: dict[str, Any], memo: _Memo) -> bool:
    """Whether a chat is as the last turn left it: as long, and ending with the same message
    (another client that changed it, or the page, sends this turn the long way)."""
    messages = data["messages"]
    last = messages[-1] if messages else None
    return len(messages) == memo.count and isinstance(last, dict) and last.get("id") == memo.last_id


def summary(record: dict[str, Any]) -> str:
    """The ``X-Smart-Context`` header of a rebuilt request: what was sent of how much, and the
    topics filtering it. Labels are percent-encoded beyond printable ASCII."""
    usage = record.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    sent, full = usage.get("sent_tokens"), usage.get("full_tokens")
    text = (
        f"sent {sent:,} of {full:,} tokens"
        if isinstance(sent, int) and isinstance(full, int)
        else f"mode {record.get('mode')}"
    )
    topics = [t for t in record.get("active_topics") or [] if isinstance(t, str)]
    if topics:
        shown = ", ".join(topics[:MAX_HEADER_LABELS])
        more = len(topics) - MAX_HEADER_LABELS
        text += f"; filter: {shown}" + (f" and {more} more" if more > 0 else "")
    return header_safe(text)


def header_safe(text: str) -> str:
    """``text`` as a header value: printable ASCII, the rest percent-encoded (UTF-8), so no
    label can end the header or start another."""
    return quote(text, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
