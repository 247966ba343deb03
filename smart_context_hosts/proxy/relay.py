"""One proxied chat turn, without HTTP: the client's messages into the vault chat, the plugins'
pipeline over it, the request rebuilt for the upstream, and the reply stored with its record.

The same :class:`~smart_context_hosts.sidecar.runtime.Sidecar` runs it as runs ``serve``: the
vault's plugins, settings, chat files and background passes. So a proxied chat is a vault chat
like any other: ``serve``'s page shows it with its topics, a bubble clicked there is read by
the next proxied request, and ``stats`` counts it.

What goes upstream is the client's request with one change, its ``messages``: the client's
system prompt first and unchanged, then what the plugins chose (their own system messages, the
history they kept), then the user message and any tool round after it as they came. The
client's tools, options and model stay as they were (the plugins' own tools follow the
client's; OpenAI gets the chat's ``prompt_cache_key`` when the client set none,
:mod:`.cache_key`). When any of this fails the client's
request goes as it came (:class:`Passed`): a user never loses a reply because of us.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from smart_context.background import held, to_thread
from smart_context.record import json_safe
from smart_context_hosts.proxy.body import Bodies
from smart_context_hosts.proxy.breakpoints import with_breakpoints
from smart_context_hosts.proxy.cache_key import with_cache_key
from smart_context_hosts.proxy.conversation import (
    SIDECAR_ONLY,
    Split,
    merge,
    paired_tools,
    stored_form,
    wire_form,
)
from smart_context_hosts.proxy.identity import Chat
from smart_context_hosts.proxy.note import summary
from smart_context_hosts.proxy.own_tools import OwnTools, own_tools
from smart_context_hosts.proxy.replies import Answer
from smart_context_hosts.sidecar.llm import TurnUsage
from smart_context_hosts.sidecar.memory import held_form, now_iso
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
MAX_MEMOS = 64  # chats whose last turn is remembered for the quick way (per vault)
MAX_MEMO_MESSAGES = 100_000  # and the messages all of them hold, at most
MAX_PENDING = 256  # chats whose turn waits for a reply a client brings (the turns API)
SPARE_FROM = 1_000  # messages of a chat from which its next turn's copies are made ahead
COPY_PIECE = 1_000  # messages copied at a time, ahead (some 0.3 ms with the interpreter's lock)

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
    stored: asyncio.Future[None] | None = None  # the client's new messages being written


@dataclass
class _Memo:
    """A chat as the last request left it: the client's messages (``wire``), and the stored
    chat's messages then (the relay's own copies, never changed). A request that extends those
    messages is answered from them, and its new messages are written on the side.

    The plugins get copies of them (a plugin may change a message it is given): for a long
    chat, copies made ahead (``spare``, by :func:`_copies`, off the event loop while the chat's
    person reads the reply), so a 10,000-message turn does not copy them on the way upstream
    (some 4 ms, with the event loop held)."""

    wire: list[dict[str, Any]]
    stored: list[dict[str, Any]]
    spare: list[dict[str, Any]] | None = None  # copies of ``stored``'s first messages, or None

    def copies(self) -> list[dict[str, Any]]:
        """Copies of ``stored`` for one turn's plugins: the spare ones, taken (a set of copies
        goes to one turn), and the messages past them copied now."""
        out, self.spare = self.spare or [], None
        out.extend(map(dict.copy, self.stored[len(out) :]))
        return out

    def continued_by(self, incoming: list[dict[str, Any]]) -> int | None:
        """Where the new messages of ``incoming`` start, when it is the conversation of this
        memo, or its last part (a client that trims its own history), with messages after it;
        else ``None``."""
        wire, n = self.wire, len(self.wire)
        if len(incoming) > n and incoming[:n] == wire:
            return n
        if not incoming or not wire:
            return None
        for dropped in range(1, n):  # the client let its first messages go
            if (
                wire[dropped] == incoming[0]
                and len(incoming) > n - dropped
                and incoming[: n - dropped] == wire[dropped:]
            ):
                return n - dropped
        return None

    def as_left(self, data: dict[str, Any]) -> bool:
        """Whether a chat is as this memo left it: as long, and ending with the same message
        (another client that changed it, or the page, sends this turn the long way)."""
        messages = data["messages"]
        last = messages[-1] if messages else None
        mine = self.stored[-1] if self.stored else None
        return (
            len(messages) == len(self.stored)
            and isinstance(last, dict)
            and mine is not None
            and last.get("id") == mine.get("id")
        )


class Relay:
    """The proxy's chat turns over one vault (:meth:`prepare`, then :meth:`finish`)."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar
        self._memos: OrderedDict[str, _Memo] = OrderedDict()
        self._memo_messages = 0  # the messages the memos hold
        self._pending: OrderedDict[str, Turn] = OrderedDict()
        self._writing: set[asyncio.Future[Any]] = set()  # held: the loop keeps tasks weakly
        self.bodies = Bodies()  # each chat's last request, read on from where it ended

    def hold(self, turn: Turn) -> None:
        """Keep ``turn`` until its reply comes (:meth:`take`), the chat's last turn only."""
        self._pending.pop(turn.chat.chat_id, None)
        while len(self._pending) >= MAX_PENDING:
            self._pending.popitem(last=False)  # a client that never sent the reply
        self._pending[turn.chat.chat_id] = turn

    def take(self, chat_id: str) -> Turn | None:
        """The chat's turn waiting for its reply, if any, no longer waiting."""
        return self._pending.pop(chat_id, None)

    async def prepare(
        self, chat: Chat, parts: Split, body: dict[str, Any], upstream: str | None = None
    ) -> Turn:
        """Store the client's messages in the chat (on the quick way, while the request goes
        upstream), run the phases before the model, and rebuild the request, with the chat's
        ``prompt_cache_key`` for an ``upstream`` that takes one. Raises when it cannot (the
        caller then sends the client's request as it came)."""
        chat_id = chat.chat_id
        incoming = [*parts.history, parts.message, *parts.tail]
        stored, user_message, write = await self._store(chat_id, incoming, parts)
        ctx = PipelineContext(
            message=parts.text,
            original_message=parts.text,
            history=stored,
            metadata=self._metadata(chat_id, body),
        )
        writing = None
        try:
            for phase in BEFORE_UPSTREAM:
                await call_hook(self.sidecar.pm, phase, ctx=ctx)
                if ctx.should_abort:
                    raise RuntimeError(f"a plugin stopped the message: {ctx.abort_reason}")
        finally:  # written while the request goes upstream, not while the plugins read the chat
            if write is not None:
                writing = self._soon(write())
        record = ctx.metadata.get("smart_context") if isinstance(ctx.metadata, dict) else None
        if not isinstance(record, dict):
            raise RuntimeError("no plugin chose the context (is Smart Context enabled?)")
        if record.get("error"):
            raise RuntimeError(str(record["error"]))
        own = own_tools(ctx.metadata, body.get("tools"), self._may_run)
        messages = self._messages(ctx, parts)
        cache = record.get("cache")
        if isinstance(cache, dict) and cache.get("kind") == "anthropic":  # Claude's marks
            messages = with_breakpoints(messages, len(messages) - 1 - len(parts.tail))
        rebuilt = with_cache_key(
            {**body, "messages": messages}, self.sidecar.vault, chat_id, upstream
        )
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
            stored=writing,
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
            usage.append(
                TurnUsage(
                    answer.prompt_tokens,
                    answer.completion_tokens,
                    answer.cached_tokens,
                    answer.cache_write_tokens,
                )
            )
        reply = Reply(
            text=answer.text,
            error=error,
            usage=usage,
            model=answer.model or _str(turn.body.get("model")),
            wire=wire if answer.tool_calls else None,
        )
        if turn.stored is not None:  # the reply goes after the messages it answers
            await turn.stored
        event = await self.sidecar.pipeline.finish(
            turn.chat.chat_id, turn.ctx, reply, turn.user_message
        )
        stored = event.data.get("assistant_message")
        memo = self._forget(turn.chat.chat_id)
        if memo is not None and memo.wire is turn.known and error is None and stored:
            # the chat as this reply left it, with copies for the next turn's plugins made ahead
            left = _Memo([*turn.known, wire], [*memo.stored, held_form(stored)])
            self._remember(turn.chat.chat_id, left)
            if len(left.stored) >= SPARE_FROM:
                held(self._writing, self._make_spare(left), "Copies made ahead failed.", log)
        # after an error the next turn goes the long way: the client's copy of what it got
        # then takes the place of the stored error, as merge does with the sidecar's own

    def _remember(self, chat_id: str, memo: _Memo) -> None:
        self._forget(chat_id)
        if len(memo.stored) > MAX_MEMO_MESSAGES:
            return  # a chat that long goes the long way each turn
        while self._memos and (
            len(self._memos) >= MAX_MEMOS
            or self._memo_messages + len(memo.stored) > MAX_MEMO_MESSAGES
        ):
            self._forget(next(iter(self._memos)))
        self._memos[chat_id] = memo
        self._memo_messages += len(memo.stored)

    def _forget(self, chat_id: str) -> _Memo | None:
        memo = self._memos.pop(chat_id, None)
        if memo is not None:
            self._memo_messages -= len(memo.stored)
        return memo

    async def _store(
        self, chat_id: str, incoming: list[dict[str, Any]], parts: Split
    ) -> tuple[
        list[dict[str, Any]], dict[str, Any], Callable[[], Coroutine[Any, Any, None]] | None
    ]:
        """Put the client's conversation in the chat; the history before the user message
        (copies), the stored user message, and, when the new messages are still to be
        written, what writes them (the caller runs it; :meth:`finish` waits for it)."""
        now = now_iso()
        lead = json_safe(parts.lead)
        keys: dict[str, Any] = {"updated_at": now, "proxy": {"system": lead}}
        defaults = {"title": title_from(parts.text), "created_at": now}
        memo = self._memos.get(chat_id)
        new = memo.continued_by(incoming) if memo is not None else None
        if memo is not None and new is not None:
            # the usual turn: the conversation as the last request left it, and what is new,
            # in time that does not grow with the chat. The new messages are written while
            # the request goes upstream (the client holds them until its reply comes).
            added = [stored_form(m, new_message_id(), now) for m in incoming[new:]]
            mine = _Memo(incoming, [*memo.stored, *added], memo.spare)
            memo.spare = None
            self._remember(chat_id, mine)
            write = partial(self._append, chat_id, memo, mine, added, incoming, keys, defaults, now)
            return (*_at_user(mine.copies()), write)

        data = await self.sidecar.host.memory.update_chat(
            chat_id, _merging(chat_id, incoming, keys, defaults, now)
        )
        messages = list(map(dict.copy, data["messages"]))
        self._remember(chat_id, _Memo(incoming, messages))
        return (*_at_user(list(map(dict.copy, messages))), None)

    async def _append(
        self,
        chat_id: str,
        memo: _Memo,
        mine: _Memo,
        added: list[dict[str, Any]],
        incoming: list[dict[str, Any]],
        keys: dict[str, Any],
        defaults: dict[str, Any],
        now: str,
    ) -> None:
        """Append ``added`` to the chat if it is still as ``memo`` (the last turn's) left it;
        else, or when the append fails, merge the client's conversation in the long way, unless
        a later turn of the chat (``mine`` is this one's memo) has come to store it."""
        memory = self.sidecar.host.memory
        try:
            before = await memory.append_messages(
                chat_id, added, updates=keys, defaults=defaults, expect=memo.as_left
            )
            if before is not None:  # appended: the chat was as the last turn left it
                return
        except Exception:  # once more the long way: a passing failure (a lock, the disk)
            log.warning("Chat %s: the new messages were not appended.", chat_id, exc_info=True)
        if self._memos.get(chat_id) is not mine:
            return  # a later turn brings the whole conversation, this one's too
        self._forget(chat_id)  # the next turn goes the long way too
        ids = [m["id"] for m in added]  # the plugins were given these
        await memory.update_chat(chat_id, _merging(chat_id, incoming, keys, defaults, now, ids))

    @staticmethod
    async def _make_spare(memo: _Memo) -> None:
        """Copies of ``memo``'s messages for its chat's next turn, made in a worker thread (the
        messages are the relay's own: nothing changes them meanwhile)."""
        spare = await to_thread(_copies, memo.stored)
        if memo.spare is None:
            memo.spare = spare

    def _soon(self, work: Awaitable[None]) -> asyncio.Future[None]:
        """``work`` running on its own, held until done; a failure is logged (the next turn
        stores the client's messages again the long way)."""
        return held(self._writing, work, "The client's messages could not be stored.", log)

    async def settle(self) -> None:
        """Wait until the messages being written are stored."""
        while self._writing:
            await asyncio.wait(list(self._writing))

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


def _copies(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``messages``, a piece at a time: in a worker thread, each piece is short
    enough for the event loop to get the interpreter's lock back between two."""
    out: list[dict[str, Any]] = []
    for start in range(0, len(messages), COPY_PIECE):
        out.extend(map(dict.copy, messages[start : start + COPY_PIECE]))
    return out


def _at_user(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The history before the turn's user message (the last one: a tool round may follow it),
    and that message; ``messages`` are the caller's own copies."""
    at = next(i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user")
    return messages[:at], messages[at]


def _merging(
    chat_id: str,
    incoming: list[dict[str, Any]],
    keys: dict[str, Any],
    defaults: dict[str, Any],
    now: str,
    ids: Sequence[str] = (),
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The update that merges the client's conversation into a stored chat (:func:`merge`):
    what the chat holds keeps its ids, and where the client says otherwise it wins. ``ids``:
    those the last messages of ``incoming`` were given already, kept if they are added."""

    def update(data: dict[str, Any]) -> dict[str, Any]:
        merged = merge(
            [m for m in data["messages"] if isinstance(m, dict)], incoming, new_message_id, now
        )
        given = min(len(ids), merged.added)  # merge's new messages are its own
        for message, message_id in zip(
            merged.messages[len(merged.messages) - given :], ids[len(ids) - given :], strict=True
        ):
            message["id"] = message_id
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

    return update


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
