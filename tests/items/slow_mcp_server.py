"""A stdio MCP server whose one tool takes as long as it is told: for the request timeout test.

Run as a script (``python tests/items/slow_mcp_server.py``), in a process of its own.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer


async def wait(seconds: float) -> str:
    """Sleep, then say so."""
    await anyio.sleep(seconds)
    return f"waited {seconds} s"


if __name__ == "__main__":
    server: MCPServer = MCPServer("slow", log_level="WARNING")
    server.add_tool(wait)
    server.run("stdio")
