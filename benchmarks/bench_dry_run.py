"""A dry run with hundreds of MCP tools in the vault (target: 500 tools in under 250 ms).

Run: python benchmarks/bench_dry_run.py [--tools 500] [--runs 30]

The vault declares the 33 servers of ``benchmarks/data/tools.json`` (plus copies of them, named
``{server}-2``..., until it holds ``--tools`` tools), every tool ``include = "agent"``, and their
last known tool lists are on disk, as a vault whose servers were listed before. No server runs:
requests never wait for one (the background listing fails and is reported, off the request
path). A 1,000-message chat is open. Measured through the sidecar's HTTP app in process:
``POST /api/chats/{id}/context`` with a three-sentence message, on the embedded offline default
(the local model embeds the message's sentences; the tools' chunks are embedded by the
background pass the first, cold, request starts, and the warm requests are measured once it is
done). Reported: the cold first request, then the median and p95 of the warm ones, and how many
tools the last one chose, beside the same request in a vault without tools (the baseline, same
process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks.bench_server import make_chat
from smart_context.mcp.client import ToolInfo, save_tool_list
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.plugins import get_plugin_manager
from smart_context_hosts.sidecar.runtime import Sidecar

DATA = Path(__file__).resolve().parent / "data"
MESSAGE = (
    "Find the failing test in the payments repository. Open an issue with the stack trace. "
    "Then tell the team on Slack which commit broke it."
)


def make_vault(root: Path, n_tools: int) -> None:
    (root / ".memory").mkdir(parents=True)
    (root / ".memory" / "chat.json").write_text(json.dumps(make_chat(1000)))
    servers: list[dict[str, Any]] = json.loads((DATA / "tools.json").read_text())
    tables, total, copy = [], 0, 1
    while total < n_tools:
        for server in servers:
            if total >= n_tools:
                break
            name = server["name"] if copy == 1 else f"{server['name']}-{copy}"
            tools = server["tools"][: n_tools - total]
            save_tool_list(
                root,
                name,
                [
                    ToolInfo(t["name"], t.get("description", ""), t.get("inputSchema", {}))
                    for t in tools
                ],
            )
            tables.append(
                f'[mcp.servers.{name}]\ncommand = "no-such-server-{name}"\ninclude = "agent"\n'
            )
            total += len(tools)
        copy += 1
    # a chat model is named, so that tools may be offered (the offline default offers none);
    # a dry run only prepares the request, and nothing answers at this address
    llm = '[llm]\nbase_url = "http://127.0.0.1:9/v1"\n[llm.models]\nchat = "bench-model"\n'
    (root / ".vault.toml").write_text("\n".join([llm, *tables]))


async def measure(root: Path, runs: int) -> tuple[float, list[float], int]:
    plugin = SmartContextPlugin()
    manager = get_plugin_manager(None, load_entrypoints=False)
    manager.register(plugin, name="smart_context")
    sidecar = Sidecar(root, plugin_manager=manager)
    app = create_app(sidecar)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client,
    ):

        async def once() -> tuple[float, dict[str, Any]]:
            start = time.perf_counter()
            answer = await client.post("/api/chats/chat/context", json={"content": MESSAGE})
            elapsed = time.perf_counter() - start
            answer.raise_for_status()
            return elapsed, answer.json()

        cold, _ = await once()
        # the items' and tools' chunks are embedded by the background pass the first request
        # starts: the warm requests are measured once it is done, as a vault that has served
        assert plugin.services is not None
        await plugin.services.settle(timeout=600)
        timed = [await once() for _ in range(runs)]
    return cold, [elapsed for elapsed, _ in timed], len(timed[-1][1]["tools"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    logging.getLogger("smart_context.items").setLevel(logging.ERROR)  # the servers are absent
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        base, with_tools = Path(tmp) / "plain", Path(tmp) / "tools"
        make_vault(base, 0)
        make_vault(with_tools, args.tools)
        for label, root in (("no tools (baseline)", base), (f"{args.tools} tools", with_tools)):
            cold, warm, chosen = asyncio.run(measure(root, args.runs))
            warm.sort()
            print(
                f"{label:>20}: cold {cold * 1000:7.1f} ms; warm median "
                f"{statistics.median(warm) * 1000:6.1f} ms, p95 "
                f"{warm[int(0.95 * (len(warm) - 1))] * 1000:6.1f} ms; {chosen} tools chosen"
            )


if __name__ == "__main__":
    main()
