"""The sidecar's own time per message, against the length of the chat.

Run: python benchmarks/bench_post.py [--sizes 100,1000,10000] [--posts 15]

For each size, a vault holds one chat of that many messages (five interleaved subjects) whose
embedding cache is already warm, on the embedded offline default with no chat model: the
reply is the sidecar's "no model" notice, so no model time is in the figures. A message is
what the page does to send one: ``POST /api/chats/{id}/messages`` through the HTTP app (in
process, no sockets), which stores the user message, runs the context hook, stores the reply
and answers, then ``GET /api/chats`` for the chat list. The background topic pass each message
schedules is waited for before the list is read, and timed apart (it joins the new turns to
the map, or makes the map again when topics/grow.py says so). The target: the per-message time at
10,000 messages is at most 3x the time at 100.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks.bench_server import make_chat
from smart_context.paths import check_chat_id
from smart_context.plugin import SmartContextPlugin
from smart_context.topics.refresh import refresh
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.plugins import get_plugin_manager
from smart_context_hosts.sidecar.runtime import Sidecar

QUESTIONS = [
    "how do I cancel the asyncio tasks cleanly when the scraper stops",
    "would a partial index on the orders table help the postgres planner",
    "the nginx proxy still answers 502 after docker compose up, why",
    "should the react effect depend on the callback or on its result",
    "is the hut at Lagazuoi open in winter and how cold does it get",
]


class Vault:
    """One sidecar on a vault holding one chat of ``size`` messages, its app and a client."""

    def __init__(self, root: Path, size: int) -> None:
        (root / ".memory").mkdir(parents=True)
        (root / ".memory" / "big.json").write_text(json.dumps(make_chat(size)))
        self.size = size
        # Its own plugin instance: the entry point's is one per process, and here are three.
        self.plugin = SmartContextPlugin()
        manager = get_plugin_manager(None, load_entrypoints=False)
        manager.register(self.plugin, name="smart_context")
        self.sidecar = Sidecar(root, plugin_manager=manager)
        transport = httpx.ASGITransport(app=create_app(self.sidecar))
        self.client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
        self.request: list[float] = []
        self.background: list[float] = []
        self.background_cpu: list[float] = []  # CPU time of every thread of the process

    async def start(self) -> None:
        await self.sidecar.start()
        assert self.plugin.services is not None
        self.services = self.plugin.services
        # warm: every message embedded once
        await refresh(self.services.topic_pass, check_chat_id("big"))

    async def post(self, question: str, keep: bool) -> None:
        """One message as the page sends it; the background pass is timed apart."""
        start = time.perf_counter()
        answer = await self.client.post("/api/chats/big/messages", json={"content": question})
        took = time.perf_counter() - start
        start, cpu = time.perf_counter(), time.process_time()
        await self.services.settle(120)
        settled, settled_cpu = time.perf_counter() - start, time.process_time() - cpu
        start = time.perf_counter()
        listed = await self.client.get("/api/chats")
        took += time.perf_counter() - start
        assert answer.status_code == 200 and listed.status_code == 200, answer.text
        if keep:
            self.request.append(took)
            self.background.append(settled)
            self.background_cpu.append(settled_cpu)

    async def stop(self) -> None:
        await self.client.aclose()
        await self.sidecar.stop()


async def measure(sizes: list[int], posts: int) -> list[Vault]:
    """All sizes in one process, their posts taking turns: what slows the machine down slows
    every size alike, so the ratios hold on a noisy machine."""
    with tempfile.TemporaryDirectory() as tmp:
        vaults = [Vault(Path(tmp) / str(size), size) for size in sizes]
        for vault in vaults:
            await vault.start()
        try:
            for i in range(posts + 2):  # the first two warm caches
                for vault in vaults:
                    await vault.post(QUESTIONS[i % len(QUESTIONS)], keep=i >= 2)
                    for other in vaults:  # each post starts on an idle machine
                        await other.services.settle(120)
        finally:
            for vault in vaults:
                await vault.stop()
    return vaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--posts", type=int, default=25)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; {args.posts} posts")
    vaults = asyncio.run(measure(sizes, args.posts))
    for vault in vaults:
        print(
            f"  {vault.size:>6} messages: {statistics.median(vault.request) * 1000:7.1f} ms per "
            f"message, background pass {statistics.median(vault.background) * 1000:7.1f} ms "
            f"({statistics.median(vault.background_cpu) * 1000:7.1f} ms of CPU; medians)"
        )
    base = statistics.median(vaults[0].request)
    for vault in vaults[1:]:
        ratio = statistics.median(vault.request) / base
        print(f"  {vault.size} vs {vaults[0].size}: {ratio:.2f}x per message")


if __name__ == "__main__":
    main()
