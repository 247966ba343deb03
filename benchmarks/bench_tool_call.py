"""A tool call on the example MCP server: on a fresh connection against the kept one.

Run: python benchmarks/bench_tool_call.py [--calls 10]

The server is the package's own (``python -m smart_context_hosts.example_mcp``, over stdio). Each
"fresh" call starts the server, calls ``yen_to_euro`` and stops it, as
:func:`smart_context.mcp.client.call_tool` does; the kept calls go through
:class:`smart_context.items.servers.ToolServers`, which is what the plugin uses: the first starts
the server, the rest reuse its connection.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from smart_context.items.servers import ToolServers
from smart_context.mcp.client import call_tool
from smart_context.mcp.config import McpServer

ARGS = ("-m", "smart_context_hosts.example_mcp")


async def main(calls: int) -> None:
    server = McpServer("example", command=sys.executable, args=ARGS)
    fresh = []
    for _ in range(calls):
        start = time.perf_counter()
        await call_tool(server, "yen_to_euro", {"yen": 16000})
        fresh.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as vault:
        (Path(vault) / ".vault.toml").write_text(
            f'[mcp.servers.example]\ncommand = "{sys.executable}"\n'
            'args = ["-m", "smart_context_hosts.example_mcp"]\n'
        )
        servers = ToolServers(Path(vault))
        kept = []
        try:
            for _ in range(calls + 1):
                start = time.perf_counter()
                await servers.call("example", "yen_to_euro", {"yen": 16000})
                kept.append(time.perf_counter() - start)
        finally:
            await servers.close()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; {calls} calls each")
    print(f"  a connection of its own per call: median {statistics.median(fresh) * 1000:.0f} ms")
    print(
        f"  the kept connection: first call (starts the server) {kept[0] * 1000:.0f} ms, "
        f"then median {statistics.median(kept[1:]) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10)
    asyncio.run(main(parser.parse_args().calls))
