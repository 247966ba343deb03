"""``smart-context mcp VAULT``: the vault's long memory as an MCP server over stdio
(docs/contract.md §9), written with the official SDK.

Its tools are the memory commands under their names without the ``smart_context.`` prefix:
``store_memory``, ``retrieve_context``, ``summarize_conversation``, ``mark_important``,
``forget_context`` and ``post_direct_message``. Each calls the same command the panel and the
sidecar call, on the plugin's services that the command line starts for the vault, so an
MCP-capable app and the chat see one memory. A refused argument is a tool error the model can
read, never a crash.

Nothing but the protocol may reach stdout: the command line sends logging to stderr first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

SERVER_NAME = "smart-context-memory"
INSTRUCTIONS = (
    "Long-term memory of this vault's chats: store facts and decisions, find what was said "
    "long ago, summarise a chat, pin messages, forget memories, and leave notes for a chat."
)

Handler = Callable[..., Awaitable[dict[str, Any]]]


def build_server(handlers: dict[str, Handler]) -> MCPServer:
    """The server whose tools call ``handlers`` (the bound commands, by their full names)."""
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    async def run(name: str, **arguments: Any) -> dict[str, Any]:
        given = {k: v for k, v in arguments.items() if v is not None}
        result = await handlers[f"smart_context.{name}"](**given)
        if result.get("status") != "success":
            raise ToolError(str(result.get("error") or "the command failed"))
        return {k: v for k, v in result.items() if k != "status"}

    async def store_memory(
        content: Annotated[str, Field(description="The fact, decision or preference to keep.")],
        chat_id: Annotated[
            str | None, Field(description="The chat it belongs to; none: every chat.")
        ] = None,
        importance: Annotated[
            float | None, Field(ge=0, le=1, description="0-1, default 0.5.")
        ] = None,
    ) -> dict[str, Any]:
        """Remember something for later requests of a chat, or of every chat."""
        return await run("store_memory", content=content, chat_id=chat_id, importance=importance)

    async def retrieve_context(
        query: Annotated[str, Field(description="What to look for.")],
        chat_id: Annotated[str | None, Field(description="The chat to search.")] = None,
        limit: Annotated[int | None, Field(ge=1, le=50, description="At most this many.")] = None,
    ) -> dict[str, Any]:
        """Find stored memories and a chat's messages about the query, however old."""
        return await run("retrieve_context", query=query, chat_id=chat_id, limit=limit)

    async def summarize_conversation(
        chat_id: Annotated[str, Field(description="The chat to summarise.")],
    ) -> dict[str, Any]:
        """Bring a chat's summaries up to date and return them."""
        return await run("summarize_conversation", chat_id=chat_id)

    async def mark_important(
        chat_id: Annotated[str, Field(description="The chat.")],
        message_id: Annotated[str, Field(description="The message to pin or unpin.")],
        important: Annotated[bool, Field(description="true pins, false unpins.")] = True,
    ) -> dict[str, Any]:
        """Pin a message so every request sends it while it fits, or unpin it."""
        return await run(
            "mark_important", chat_id=chat_id, message_id=message_id, important=important
        )

    async def forget_context(
        memory_id: Annotated[int | None, Field(description="One memory to forget.")] = None,
        chat_id: Annotated[str | None, Field(description="With before: a chat's memories.")] = None,
        before: Annotated[
            str | None, Field(description="ISO 8601 time: memories stored before it.")
        ] = None,
    ) -> dict[str, Any]:
        """Forget one stored memory, or a chat's memories stored before a time."""
        return await run("forget_context", memory_id=memory_id, chat_id=chat_id, before=before)

    async def post_direct_message(
        chat_id: Annotated[str, Field(description="The chat the note is for.")],
        content: Annotated[str, Field(description="The note.")],
        priority: Annotated[float, Field(ge=0, le=1, description="0-1: higher comes first.")] = 0.5,
        ttl_seconds: Annotated[float | None, Field(gt=0, description="Expires after this.")] = None,
        source: Annotated[str | None, Field(description="Who sends it.")] = None,
    ) -> dict[str, Any]:
        """Leave a note that the chat's next requests carry until it expires."""
        return await run(
            "post_direct_message",
            chat_id=chat_id,
            content=content,
            priority=priority,
            ttl_seconds=ttl_seconds,
            source=source,
        )

    for tool in (
        store_memory,
        retrieve_context,
        summarize_conversation,
        mark_important,
        forget_context,
        post_direct_message,
    ):
        server.add_tool(tool)
    return server


async def serve_stdio(handlers: dict[str, Handler]) -> None:
    """Serve the tools that call ``handlers`` over stdio until the client hangs up. The caller
    starts the services behind them and keeps logging off stdout."""
    await build_server(handlers).run_stdio_async()
