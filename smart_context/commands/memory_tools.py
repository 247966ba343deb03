"""The chat model's own memory tools (a lazy look back at
what the budget left out): it may look further back than the budget reached, and keep a fact for
the rest of the chat.

The tools are offered as ``smart_context__retrieve_context`` and ``smart_context__store_memory``
(defined in :mod:`smart_context.memory.model_tools`; the server name ``smart_context`` is
reserved: no vault MCP server may take it) and run by
``smart_context.call_tool``, through the same code as the commands and the MCP server
(:func:`look_back`, :func:`remember`). They work on the chat the model is answering in, which
the host names when it calls ``call_tool``: a ``chat_id`` the model passes must be that chat's,
so it can neither read nor write another chat's memory, and what it stores belongs to this chat
only (a global memory would reach every chat).

What the model reads is plain text, bounded: each retrieved message with who said it and when,
oldest first. A bad argument is a result the model reads and can correct
(``ok`` false), never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from smart_context.commands.guard import BadArguments
from smart_context.commands.memory import look_back, remember, search_arguments
from smart_context.errors import ChatIdError
from smart_context.mcp.client import ToolResult
from smart_context.memory.model_tools import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_MEMORY_CHARS,
    MODEL_SOURCE,
    PARAMETERS,
    RETRIEVE,
    STORE,
    retrieved_text,
)
from smart_context.paths import ChatId, check_chat_id
from smart_context.services import Services
from smart_context.shorten import shorten


async def run_memory_tool(
    services: Services, name: str, arguments: Mapping[str, Any], chat_id: Any
) -> ToolResult:
    """Run one memory tool call for the chat ``chat_id`` (the host's word, never the model's).

    The tools being off, or no chat named, is the caller's error (:class:`BadArguments`); a
    bad argument from the model is a result with ``ok`` false that says what to send instead.
    """
    if not services.settings.memory_tools:
        raise BadArguments("The memory tools are off (memory_tools = false in .vault.toml).")
    if chat_id is None or chat_id == "":
        raise BadArguments("chat_id is required: the memory tools work on one chat.")
    chat = check_chat_id(chat_id)
    try:
        if name not in PARAMETERS:
            raise BadArguments(f"There is no memory tool {name!r}; use {RETRIEVE} or {STORE}.")
        given = _checked(name, arguments, chat)
        if name == RETRIEVE:
            return await _retrieve(services, chat, given)
        return await _store(services, chat, given)
    except (BadArguments, ChatIdError) as exc:
        return ToolResult(ok=False, text=str(exc), summary=shorten(str(exc), 160))


def _checked(name: str, arguments: Mapping[str, Any], chat: ChatId) -> dict[str, Any]:
    """The arguments the tool knows; a ``chat_id`` is accepted only when it names ``chat``."""
    given = dict(arguments)
    named = given.pop("chat_id", None)
    if named is not None and named != chat:
        raise BadArguments("chat_id: these tools work on the current chat only; leave chat_id out.")
    known = PARAMETERS[name]["properties"]
    unknown = sorted(str(key) for key in given if key not in known)
    if unknown:
        raise BadArguments(
            f"Unknown argument {unknown[0][:60]!r}; {name} takes " + ", ".join(known) + "."
        )
    return given


async def _retrieve(services: Services, chat: ChatId, given: dict[str, Any]) -> ToolResult:
    query, limit = search_arguments(
        given.get("query"), given.get("limit"), MAX_LIMIT, DEFAULT_LIMIT
    )
    unsent = services.unsent.get(chat)
    found = await look_back(services, chat, query, limit, unsent)
    messages, memories = found["messages"], found["memories"]
    text = retrieved_text(
        query, messages, memories, whole=unsent is not None and not unsent.message_ids
    )
    summary = f"{_count(len(messages), 'message')} and {_count(len(memories), 'memory')} found"
    return ToolResult(ok=True, text=text, structured=found, summary=summary)


async def _store(services: Services, chat: ChatId, given: dict[str, Any]) -> ToolResult:
    content, importance = given.get("content"), given.get("importance")
    if not isinstance(content, str) or not content.strip():
        raise BadArguments("content is required: the fact to keep, as text.")
    if len(content) > MAX_MEMORY_CHARS:
        raise BadArguments(
            f"content is {len(content)} characters; keep one fact in at most {MAX_MEMORY_CHARS}."
        )
    memory = await remember(services, content.strip(), chat, importance, MODEL_SOURCE)
    text = f"Stored as memory #{memory.id} of this chat: {memory.content}"
    return ToolResult(
        ok=True,
        text=text,
        structured={"memory_id": memory.id},
        summary=shorten(f"Stored: {memory.content}", 160),
    )


def _count(n: int, noun: str) -> str:
    plural = "memories" if noun == "memory" else noun + "s"
    return f"{n} {noun if n == 1 else plural}"
