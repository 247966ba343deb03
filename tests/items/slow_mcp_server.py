"""A stdio MCP server for the timeout and connection tests: ``wait`` takes as long as it is
told, ``pid`` names the process (is the connection kept?), ``crash`` ends it mid-call.

Run as a script (``python tests/items/slow_mcp_server.py``), in a process of its own.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer


async def wait(seconds: float) -> str:
    """Sleep, then say so."""
    await anyio.sleep(seconds)
    return f"waited {seconds} s"


def pid() -> int:
    """The server's process id."""
    return os.getpid()


def crash() -> str:
    """Exit at once, without answering."""
    os._exit(3)


if __name__ == "__main__":
    server: MCPServer = MCPServer("slow", log_level="WARNING")
    server.add_tool(wait)
    server.add_tool(pid)
    server.add_tool(crash)
    server.run("stdio")
