"""The model phase with tools: stream a turn, run the tool calls it asks for, ask again.

The plugin offers tools as OpenAI function definitions in ``ctx.metadata["tools"]`` (named
``{server}__{tool}``) and runs them through its command ``smart_context.call_tool``
(docs/contract.md §8). For each call the model asks for, :class:`ToolLoop`:

1. resolves the name to a server and tool among those offered and parses the arguments; a call
   it cannot make becomes an error result the model reads and can correct, never a crash;
2. emits ``tool_call`` and, unless the vault says ``auto_approve = true`` for that server,
   waits for the user's answer (:mod:`.tool_approvals`); a decline or no answer in time is
   "The user declined this tool call." A server the vault does not declare is a plugin's own
   (Smart Context's memory tools): its calls run unasked when the plugin lists it in
   ``ctx.metadata["auto_approve_servers"]``, so the vault's word is never overridden;
3. runs the command with the ``chat_id`` of the reply (a plugin's own tools work on that chat
   only), emits ``tool_result``, and records the call for the stored reply.

The assistant's ``tool_calls`` message and the ``tool`` results go into the *in-flight* prompt
only: the stored chat keeps a clipped record on the assistant message, and later prompts are
built from role and content alone, so a tool's output is never sent again. At most
:data:`MAX_TOOL_ROUNDS` rounds of calls per reply; then the model is asked once without tools.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from smart_context.mcp.config import parse_mcp_servers, split_function_name
from smart_context.shorten import shorten
from smart_context_hosts.sidecar.config import VaultConfig
from smart_context_hosts.sidecar.host import CommandError
from smart_context_hosts.sidecar.llm import LLMService, ToolCallDelta, TurnUsage
from smart_context_hosts.sidecar.tool_approvals import ToolApprovals

CALL_TOOL_COMMAND = "smart_context.call_tool"
MAX_TOOL_ROUNDS = 5
MODEL_RESULT_CHARS = 8_000
"""What of a result the model reads: enough for a file or a page, not a flood of tokens."""
STORED_RESULT_CHARS = 2_000
"""What of a result the chat file keeps, for the page to show after a reload."""
SUMMARY_CHARS = 160
DECLINED_TEXT = "The user declined this tool call."
ROUND_SEPARATOR = "\n\n"
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

log = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]
CallCommand = Callable[[str, Mapping[str, Any]], Awaitable[Any]]
Emit = Callable[[str, Mapping[str, Any]], None]


class ReplyDraft(Protocol):
    """What the loop fills in: the reply's text so far, the record of its tool calls, and
    what the server said each turn cost."""

    text: str
    tool_calls: list[dict[str, Any]]
    usage: list[TurnUsage]


@dataclass
class RequestedCall:
    """One tool call the model asked for, assembled from its streamed pieces."""

    model_id: str = ""
    function: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Outcome:
    """How one call ended: what the model reads (``text``) and what the page shows."""

    approved: bool
    ok: bool
    text: str
    summary: str


@dataclass
class CallAssembler:
    """Joins streamed :class:`ToolCallDelta` pieces by index, as OpenAI's own client does."""

    slots: dict[int, RequestedCall] = field(default_factory=dict)

    def add(self, delta: ToolCallDelta) -> None:
        """Fold one piece into its call."""
        call = self.slots.setdefault(delta.index, RequestedCall())
        call.model_id = call.model_id or (delta.call_id or "")
        call.function += delta.name or ""
        call.arguments += delta.arguments or ""

    def calls(self) -> list[RequestedCall]:
        """The calls in index order; one the model gave no id gets one (the reply needs it)."""
        ordered = [self.slots[index] for index in sorted(self.slots)]
        for call in ordered:
            call.model_id = call.model_id or f"call_{new_call_id()}"
        return ordered


def new_call_id() -> str:
    """Our id of a call: the page answers it by this id, whatever id the model chose."""
    return uuid.uuid4().hex[:12]


def offered_tools(value: Any) -> list[dict[str, Any]]:
    """The well-formed function definitions of ``ctx.metadata["tools"]``; anything else is
    left out (and logged), so a plugin's slip never costs the user the reply."""
    if not isinstance(value, list):
        return []
    return [entry for entry in value if _is_function(entry)]


def _is_function(entry: Any) -> bool:
    function = entry.get("function") if isinstance(entry, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(entry, dict) or entry.get("type") != "function" or not isinstance(name, str):
        log.warning("Ignoring a tool offered to the model that is not a function definition.")
        return False
    if not _FUNCTION_NAME.fullmatch(name):
        log.warning("Ignoring tool %r: not 1-64 characters of [A-Za-z0-9_-].", name[:80])
        return False
    return True


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """The call's arguments as an object, or ``({}, problem)`` in words the model can act on."""
    if not text.strip():
        return {}, None  # a tool without parameters: some models send nothing at all
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"The arguments are not valid JSON ({exc}); send one JSON object."
    if not isinstance(value, dict):
        return {}, "The arguments must be one JSON object."
    return value, None


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters not shown]"


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first line of ``text``, shortened: a summary when the tool gave none."""
    return shorten(text.strip().split("\n", 1)[0], limit)


def failed(text: str, approved: bool = True) -> Outcome:
    """A call that did not succeed, with its reason for the model and the page."""
    return Outcome(approved=approved, ok=False, text=text, summary=one_line(text))


def outcome_of(answer: Any) -> Outcome:
    """The result of ``smart_context.call_tool`` (``{"status", "result": {"ok", "text",
    "summary", ...}}``) as an :class:`Outcome`; any other shape is a failure that says so."""
    if not isinstance(answer, dict):
        return failed(f"{CALL_TOOL_COMMAND} answered something that is not a result.")
    if answer.get("status") != "success":
        return failed(f"The tool call failed: {answer.get('error') or 'no reason given'}")
    result = answer.get("result")
    if not isinstance(result, dict):
        return failed(f"{CALL_TOOL_COMMAND} answered without a result.")
    text = str(result.get("text") or "")
    summary = result.get("summary")
    summary = summary if isinstance(summary, str) and summary.strip() else one_line(text)
    return Outcome(approved=True, ok=result.get("ok") is True, text=text, summary=summary)


def auto_approved(config: VaultConfig, server_name: str) -> bool | None:
    """Whether the vault lets ``server_name``'s calls run unasked (``auto_approve = true``),
    ``None`` when the vault declares no such server; read afresh each time, so editing
    ``.vault.toml`` takes effect at once."""
    server = parse_mcp_servers(config.data()).server(server_name)
    return None if server is None else server.auto_approve


class ToolLoop:
    """The model's turns of one reply, with the tool calls between them (see the module doc)."""

    def __init__(
        self,
        llm: LLMService,
        call_command: CallCommand,
        emit: Emit,
        approvals: ToolApprovals,
        auto_approve: Callable[[str], bool | None],
        max_rounds: int = MAX_TOOL_ROUNDS,
    ) -> None:
        self.llm = llm
        self.call_command = call_command
        self.emit = emit
        self.approvals = approvals
        self.auto_approve = auto_approve
        self.max_rounds = max_rounds

    async def run(
        self,
        chat_id: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        reply: ReplyDraft,
        unasked: frozenset[str] = frozenset(),
    ) -> AsyncIterator[Event]:
        """Stream the reply into ``reply``, yielding ``token``, ``tool_call`` and
        ``tool_result`` events; ``messages`` (the in-flight prompt) grows with each round.
        ``unasked``: servers the vault does not declare whose calls may run unasked (the
        plugin's word, ``ctx.metadata["auto_approve_servers"]``)."""
        offered = {str(tool["function"]["name"]) for tool in tools}
        for round_number in range(self.max_rounds + 1):
            params = {"tools": tools} if tools and round_number < self.max_rounds else {}
            calls = CallAssembler()
            text = ""
            async for piece in self.llm.stream_turn(messages, "chat", **params):
                if isinstance(piece, ToolCallDelta):
                    calls.add(piece)
                    continue
                if isinstance(piece, TurnUsage):
                    reply.usage.append(piece)
                    continue
                if not text and reply.text:
                    piece = ROUND_SEPARATOR + piece  # rounds read as paragraphs
                text += piece
                reply.text += piece
                yield "token", {"text": piece}
            requested = calls.calls()
            if not requested:
                return
            if not params:  # asked for more after the last round, or without being offered any
                if not tools:
                    log.warning("The model asked for tool calls, but none were offered.")
                    return
                async for event in self._limit_reached(reply):
                    yield event
                return
            messages.append(assistant_turn(text, requested))
            for call in requested:
                async for event in self._run_call(chat_id, call, offered, reply, messages, unasked):
                    yield event

    async def _limit_reached(self, reply: ReplyDraft) -> AsyncIterator[Event]:
        note = f"(Tool calls stopped: one reply may use {self.max_rounds} rounds of them.)"
        piece = (ROUND_SEPARATOR if reply.text else "") + note
        reply.text += piece
        yield "token", {"text": piece}

    async def _run_call(
        self,
        chat_id: str,
        call: RequestedCall,
        offered: set[str],
        reply: ReplyDraft,
        messages: list[dict[str, Any]],
        unasked: frozenset[str],
    ) -> AsyncIterator[Event]:
        server, tool, arguments, problem = resolve(call, offered)
        vault_says = self.auto_approve(server) if problem is None else None
        approved = vault_says if vault_says is not None else server in unasked
        needs_approval = problem is None and not approved
        call_id = new_call_id()
        announced = {
            "chat_id": chat_id,
            "call_id": call_id,
            "server_name": server,
            "name": tool,
            "arguments": call.arguments if problem else arguments,
            "needs_approval": needs_approval,
        }
        # Registered before the event goes out, so no answer can arrive ahead of the question.
        waiting = self.approvals.pending(chat_id, call_id) if needs_approval else nullcontext()
        with waiting as question:
            self.emit("tool_call", announced)
            yield "tool_call", announced
            if problem is not None:
                outcome = failed(problem, approved=False)
            elif question is None:
                outcome = await self._call(chat_id, server, tool, arguments)
            else:
                answer = await self.approvals.wait(question)
                outcome = await self._after_answer(answer, chat_id, server, tool, arguments)
        reply.tool_calls.append(_record(announced, outcome))
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call.model_id,
                "content": clip(outcome.text, MODEL_RESULT_CHARS) or "(no output)",
            }
        )
        result = {
            "chat_id": chat_id,
            "call_id": call_id,
            "ok": outcome.ok,
            "summary": outcome.summary,
        }
        self.emit("tool_result", result)
        yield "tool_result", result

    async def _after_answer(
        self,
        answer: bool | None,
        chat_id: str,
        server: str,
        tool: str,
        arguments: dict[str, Any],
    ) -> Outcome:
        if answer:
            return await self._call(chat_id, server, tool, arguments)
        if answer is None:
            waited = f"{self.approvals.timeout_seconds:g} s"
            return Outcome(False, False, DECLINED_TEXT, f"No answer within {waited}: declined.")
        return Outcome(False, False, DECLINED_TEXT, "Declined.")

    async def _call(
        self, chat_id: str, server: str, tool: str, arguments: dict[str, Any]
    ) -> Outcome:
        kwargs = {"server_name": server, "name": tool, "arguments": arguments, "chat_id": chat_id}
        try:
            return outcome_of(await self.call_command(CALL_TOOL_COMMAND, kwargs))
        except CommandError as exc:
            if exc.status == 404:
                return failed(
                    f"No plugin runs tools in this sidecar: the command {CALL_TOOL_COMMAND} is "
                    "not registered (is the Smart Context plugin installed and enabled?)."
                )
            return failed(f"The tool call failed: {exc}")


def resolve(call: RequestedCall, offered: set[str]) -> tuple[str, str, dict[str, Any], str | None]:
    """``(server, tool, arguments, problem)`` of a call; ``problem`` (for the model) when it
    names no tool offered or its arguments are not one JSON object."""
    split = split_function_name(call.function)
    server, tool = split if split else ("", call.function)
    arguments, problem = parse_arguments(call.arguments)
    if call.function not in offered or split is None:
        problem = f"There is no tool {call.function!r} here; use one of the tools offered."
    return server, tool, arguments, problem


def _record(announced: Mapping[str, Any], outcome: Outcome) -> dict[str, Any]:
    """What the chat file keeps of a call, for the page to show after a reload."""
    return {
        **{key: announced[key] for key in ("call_id", "server_name", "name", "arguments")},
        "approved": outcome.approved,
        "ok": outcome.ok,
        "summary": outcome.summary,
        "result": clip(outcome.text, STORED_RESULT_CHARS),
    }


def assistant_turn(text: str, calls: list[RequestedCall]) -> dict[str, Any]:
    """The model's own turn as the next request must repeat it. Arguments that are not JSON
    are sent back as ``{}``: some servers refuse a request that repeats them, and the tool's
    answer already tells the model what was wrong."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.model_id,
                "type": "function",
                "function": {
                    "name": call.function,
                    "arguments": call.arguments
                    if parse_arguments(call.arguments)[1] is None and call.arguments.strip()
                    else "{}",
                },
            }
            for call in calls
        ],
    }
