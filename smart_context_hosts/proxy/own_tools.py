"""The plugins' own tools beside the client's: offered upstream, run here, unseen by the client.

The plugins offer tools as the sidecar gets them (``ctx.metadata["tools"]``, named
``{server}__{tool}``): the vault's MCP servers and Smart Context's memory tools. Through the
proxy they are offered only when the client's request carries tools of its own (so its model
takes tools), only those that may run unasked (a server the vault marks ``auto_approve``, or a
plugin's own server it lists in ``auto_approve_servers``: no one could approve a call here), and
never one whose name a client tool has.

When the model calls one of ours, the proxy runs it (the command ``smart_context.call_tool``,
as the sidecar does) and asks the model again with the result, at most
:data:`~smart_context_hosts.sidecar.tools.MAX_TOOL_ROUNDS` times; the client sees only the text
and its own tool calls. A streamed turn is filtered event by event (:class:`StreamFilter`):
our calls' pieces are held back and the client's calls are numbered as if ours were never
there. A turn that calls ours and the client's at once goes back to the client with its own
calls only (ours are not run: the model asks again on the client's next turn).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from smart_context.record import json_safe
from smart_context_hosts.sidecar.host import CommandError
from smart_context_hosts.sidecar.tools import (
    CALL_TOOL_COMMAND,
    MODEL_RESULT_CHARS,
    Outcome,
    RequestedCall,
    clip,
    failed,
    offered_tools,
    outcome_of,
    resolve,
)

CallCommand = Callable[[str, Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class OwnTools:
    """The tools of ours a turn offers: their definitions and their names."""

    definitions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(d["function"]["name"] for d in self.definitions)


def own_tools(
    metadata: Mapping[str, Any], client_tools: Any, may_run: Callable[[str, frozenset[str]], bool]
) -> OwnTools:
    """The plugins' tools (``metadata["tools"]``) that go upstream beside ``client_tools``;
    ``may_run(server, unasked)``: whether a call to ``server`` may run without asking."""
    if not isinstance(client_tools, list) or not client_tools:
        return OwnTools()
    taken = {_name(t) for t in client_tools}
    servers = metadata.get("auto_approve_servers")
    unasked = (
        frozenset(s for s in servers if isinstance(s, str))
        if isinstance(servers, list)
        else frozenset()
    )
    keep = []
    for tool in offered_tools(json_safe(metadata.get("tools"))):
        name = _name(tool)
        server = name.partition("__")[0]
        if name and name not in taken and "__" in name and may_run(server, unasked):
            keep.append(tool)
    return OwnTools(keep)


def _name(tool: Any) -> str:
    function = tool.get("function") if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""


def requested(calls: list[dict[str, Any]]) -> list[RequestedCall]:
    """Tool calls as a reply carries them (``{"id", "function": {"name", "arguments"}}``)."""
    out = []
    for call in calls:
        given = call.get("function")
        function: dict[str, Any] = given if isinstance(given, dict) else {}
        out.append(
            RequestedCall(
                str(call.get("id") or ""),
                str(function.get("name") or ""),
                str(function.get("arguments") or ""),
            )
        )
    return out


async def run_calls(
    call_command: CallCommand, chat_id: str, calls: list[RequestedCall], names: frozenset[str]
) -> list[dict[str, Any]]:
    """Run our ``calls``; the ``tool`` messages the model reads next."""
    out = []
    for call in calls:
        server, tool, arguments, problem = resolve(call, set(names))
        if problem is not None:
            outcome: Outcome = failed(problem)
        else:
            kwargs = {
                "server_name": server,
                "name": tool,
                "arguments": arguments,
                "chat_id": chat_id,
            }
            try:
                outcome = outcome_of(await call_command(CALL_TOOL_COMMAND, kwargs))
            except CommandError as exc:
                outcome = failed(f"The tool call failed: {exc}")
        out.append(
            {
                "role": "tool",
                "tool_call_id": call.model_id,
                "content": clip(outcome.text, MODEL_RESULT_CHARS) or "(no output)",
            }
        )
    return out


def _stopped(line: bytes) -> bytes:
    """An event line with ``finish_reason: "tool_calls"`` made ``"stop"``."""
    text = line.strip()
    if not text.startswith(b"data:") or b"tool_calls" not in text:
        return line
    try:
        chunk = json.loads(text[5:].strip())
        choice = chunk["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return line
    if not isinstance(choice, dict) or choice.get("finish_reason") != "tool_calls":
        return line
    choice["finish_reason"] = "stop"
    return b"data: " + json.dumps(chunk).encode() + b"\n"


class StreamFilter:
    """One streamed turn on its way to the client, our calls taken out (module docstring).
    :meth:`feed` returns the bytes to pass on; after the stream, :attr:`ours` holds our calls
    and :attr:`theirs` whether the client's were called."""

    def __init__(self, names: frozenset[str], last_round: bool) -> None:
        self.names = names
        self.last_round = last_round  # a round after which nothing of ours will run
        self.ours: dict[int, dict[str, Any]] = {}
        self.theirs: dict[int, int] = {}  # the model's index -> the client's
        self.text: list[str] = []
        self._pending = b""
        self._held: list[bytes] = []  # the end of a round of ours: dropped if we ask again

    @property
    def calls(self) -> list[dict[str, Any]]:
        return [self.ours[k] for k in sorted(self.ours)]

    def must_ask_again(self) -> bool:
        """Whether our tools were called alone, so the model is asked again with their results."""
        return bool(self.ours) and not self.theirs and not self.last_round

    def feed(self, data: bytes) -> bytes:
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        return b"".join(self._line(line) for line in lines)

    def close(self) -> bytes:
        """What is left to pass on once the upstream's stream ended."""
        rest = self._line(self._pending) if self._pending else b""
        if rest.endswith(b"\n"):  # the last line had no end of line of its own
            rest = rest[:-1]
        self._pending = b""
        held, self._held = self._held, []
        if self.must_ask_again():
            return rest
        # a last round that called ours alone: the client is told the reply stopped, not that
        # it holds tool calls it never saw
        return b"".join(_stopped(line) for line in held) + rest

    def _line(self, line: bytes) -> bytes:
        stripped = line.strip()
        if not stripped.startswith(b"data:"):
            return line + b"\n"
        payload = stripped[5:].strip()
        if payload == b"[DONE]":
            return self._hold_if_ours(line + b"\n")
        try:
            chunk = json.loads(payload)
        except ValueError:
            return line + b"\n"
        if not isinstance(chunk, dict):
            return line + b"\n"
        changed, keep, ends = self._chunk(chunk)
        if not keep:
            return b""
        out = b"data: " + json.dumps(chunk).encode() + b"\n" if changed else line + b"\n"
        return self._hold_if_ours(out) if ends else out

    def _hold_if_ours(self, out: bytes) -> bytes:
        if self.ours and not self.theirs:  # decided at the end: shown, or asked again
            self._held.append(out)
            return b""
        return out

    def _chunk(self, chunk: dict[str, Any]) -> tuple[bool, bool, bool]:
        """(changed, worth passing on, ends the turn)."""
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return False, True, "usage" in chunk  # a usage chunk ends the turn
        choice = choices[0]
        ends = bool(choice.get("finish_reason"))
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return False, True, ends
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        calls = delta.get("tool_calls")
        if not isinstance(calls, list):
            return False, True, ends
        kept = []
        for call in calls:
            if not isinstance(call, dict):
                continue
            given_index, given = call.get("index"), call.get("function")
            index: int = given_index if isinstance(given_index, int) else 0
            function: dict[str, Any] = given if isinstance(given, dict) else {}
            name = function.get("name")
            if index not in self.ours and index not in self.theirs:
                if name in self.names:
                    self.ours[index] = {
                        "id": "",
                        "type": "function",
                        "function": {"name": "", "arguments": ""},
                    }
                else:
                    self.theirs[index] = len(self.theirs)
            if index in self.ours:
                slot = self.ours[index]
                if isinstance(call.get("id"), str):
                    slot["id"] = call["id"]
                for key in ("name", "arguments"):
                    if isinstance(function.get(key), str):
                        slot["function"][key] += function[key]
            else:
                kept.append({**call, "index": self.theirs[index]})
        if len(kept) == len(calls) and all(
            c.get("index") == o.get("index") for c, o in zip(kept, calls, strict=True)
        ):
            return False, True, ends
        if kept:
            delta["tool_calls"] = kept
        else:
            delta.pop("tool_calls", None)
        worth = bool(kept) or any(delta.get(k) for k in ("content", "role")) or ends
        return True, worth, ends
