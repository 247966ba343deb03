"""One kept connection per MCP server: reused, closed when idle, restarted after a crash."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from smart_context.errors import ToolServerError
from smart_context.items.pool import ServerPool
from smart_context.mcp.client import McpSession
from smart_context.mcp.config import McpServer
from tests.items.test_mcp_client import HAS_PROC, child_pids

SCRIPT = str(Path(__file__).with_name("slow_mcp_server.py"))


def server(**changes: object) -> McpServer:
    return McpServer("slow", command=sys.executable, args=(SCRIPT,), timeout=20, **changes)  # type: ignore[arg-type]


async def pid_of(pool: ServerPool, target: McpServer) -> int:
    async def ask(session: McpSession) -> int:
        return int((await session.call_tool("pid", {})).text)

    return await pool.run(target, ask)


async def test_calls_share_one_server_until_it_idles() -> None:
    pool = ServerPool(idle=1.0)
    try:
        first = await pid_of(pool, server())
        assert await pid_of(pool, server()) == first
        together = await asyncio.gather(*(pid_of(pool, server()) for _ in range(3)))
        assert set(together) == {first}
        await asyncio.sleep(2.0)  # idle: the connection closed, the next call starts it again
        assert await pid_of(pool, server()) != first
    finally:
        await pool.close()


async def test_a_changed_config_gets_a_new_connection() -> None:
    pool = ServerPool()
    try:
        first = await pid_of(pool, server())
        assert await pid_of(pool, server(env={"CHANGED": "1"})) != first
    finally:
        await pool.close()


async def test_a_server_that_dies_mid_call_fails_that_call_and_the_next_starts_it_again() -> None:
    pool = ServerPool()
    try:
        first = await pid_of(pool, server())
        with pytest.raises(ToolServerError):
            await pool.run(server(), lambda s: s.call_tool("crash", {}))
        assert await pid_of(pool, server()) != first
    finally:
        await pool.close()


async def test_a_server_that_cannot_start_fails_every_waiting_call() -> None:
    pool = ServerPool()
    ghost = McpServer("ghost", command="smart-context-no-such-server", timeout=5)
    results = await asyncio.gather(
        *(pool.run(ghost, lambda s: s.list_tools()) for _ in range(2)), return_exceptions=True
    )
    assert all(isinstance(r, ToolServerError) and "not found" in str(r) for r in results)


async def test_a_jobs_own_error_keeps_the_connection() -> None:
    pool = ServerPool()

    async def broken(session: McpSession) -> None:
        raise ValueError("the caller's bug")

    try:
        first = await pid_of(pool, server())
        with pytest.raises(ValueError, match="the caller's bug"):
            await pool.run(server(), broken)
        assert await pid_of(pool, server()) == first
    finally:
        await pool.close()


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to see child processes")
async def test_closing_stops_every_server() -> None:
    before = child_pids()
    pool = ServerPool()
    await pid_of(pool, server())
    assert child_pids() - before
    await pool.close()
    for _ in range(50):  # reaped by the SDK's shutdown
        if not child_pids() - before:
            break
        await asyncio.sleep(0.1)
    assert not child_pids() - before
