"""The sidecar's own time per message, against the length of the chat (issue 9, point 8).

Run: python benchmarks/bench_post.py [--sizes 100,1000,10000] [--posts 15]

For each size, a vault holds one chat of that many messages (five interleaved subjects) whose
embedding cache is already warm, on the embedded offline default with no chat model: the
reply is the sidecar's "no model" notice, so no model time is in the figures. A message is
what the page does to send one: ``POST /api/chats/{id}/messages`` through the HTTP app (in
process, no sockets), which stores the user message, runs the context hook, stores the reply
and answers, then ``GET /api/chats`` for the chat list. The background topic pass each message
schedules is waited for between posts and timed apart. The target: the per-message time at
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from bench_server import make_chat

from smart_context.paths import check_chat_id
from smart_context.plugin import SmartContextPlugin
from smart_context.sidecar.app import create_app
from smart_context.sidecar.runtime import Sidecar
from smart_context.topics.refresh import refresh

QUESTIONS = [
    "how do I cancel the asyncio tasks cleanly when the scraper stops",
    "would a partial index on the orders table help the postgres planner",
    "the nginx proxy still answers 502 after docker compose up, why",
    "should the react effect depend on the callback or on its result",
    "is the hut at Lagazuoi open in winter and how cold does it get",
]


async def _measure(vault: Path, posts: int) -> tuple[list[float], list[float]]:
    sidecar = Sidecar(vault)
    await sidecar.start()
    plugin = sidecar.pm.get_plugin("smart_context")
    assert isinstance(plugin, SmartContextPlugin) and plugin.services is not None
    services = plugin.services
    transport = httpx.ASGITransport(app=create_app(sidecar))
    try:
        await refresh(services, check_chat_id("big"))  # warm: every message embedded once
        request, background = [], []
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for i in range(posts + 2):
                question = {"content": QUESTIONS[i % len(QUESTIONS)]}
                start = time.perf_counter()
                answer = await client.post("/api/chats/big/messages", json=question)
                listed = await client.get("/api/chats")
                took = time.perf_counter() - start
                assert answer.status_code == 200 and listed.status_code == 200, answer.text
                start = time.perf_counter()
                await services.settle(120)
                settled = time.perf_counter() - start
                if i >= 2:  # the first two warm caches
                    request.append(took)
                    background.append(settled)
        return request, background
    finally:
        await sidecar.stop()


def run(size: int, posts: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        (vault / ".memory").mkdir()
        (vault / ".memory" / "big.json").write_text(json.dumps(make_chat(size)))
        request, background = asyncio.run(_measure(vault, posts))
    return statistics.median(request), statistics.median(background)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--posts", type=int, default=25)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; {args.posts} posts")
    figures: dict[int, tuple[float, float]] = {}
    for size in sizes:
        figures[size] = run(size, args.posts)
        req, bg = figures[size]
        print(
            f"  {size:>6} messages: {req * 1000:7.1f} ms per message, "
            f"background pass {bg * 1000:7.1f} ms (medians)"
        )
    base = figures[sizes[0]][0]
    for size in sizes[1:]:
        print(f"  {size} vs {sizes[0]}: {figures[size][0] / base:.2f}x per message")


if __name__ == "__main__":
    main()
