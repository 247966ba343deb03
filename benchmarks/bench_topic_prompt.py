"""How long the topic pass's ask to the fast model holds the event loop, by the chat's length.

Run: python benchmarks/bench_topic_prompt.py [--sizes 10000,100000] [--repeats 3]

A full topic map asks the host's fast model with the chat as a bounded transcript
(``topics/transcript.py``): a line rendered per message, then a sample of them chosen. While
the prompt is made, the event loop, and every request of the process, waits unless it is made
in a worker thread. Here a ticker on the loop wakes every millisecond while
``topics.extract.ask_model`` asks a model that answers at once, and the longest gap between two
ticks is printed: the prompt made in a worker thread (this release) against the same prompt
made on the loop (the release before), alternating, with the switch interval and the cycle
collector the server commands set (1 ms). The chats are ``bench_context.make_chat``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_context import make_chat
from smart_context.allocator import quiet_collector
from smart_context.config import Settings
from smart_context.topics import extract
from smart_context.topics.prompt import build_extraction_messages

REPLY = json.dumps({"topics": [{"label": "Docker", "count": 1}], "sticky_message_ids": []})


class AtOnce:
    """A fast model that answers at once (and embeds nothing)."""

    async def complete(
        self, messages: list[dict[str, str]], category: str = "fast", **params: Any
    ) -> str:
        return REPLY

    async def embed(self, texts: list[str], category: str = "embedding") -> list[list[float]]:
        return []


async def longest_gap(work: Callable[[], Awaitable[object]]) -> float:
    """The longest time, in ms, between two wakes of a 1 ms ticker on the loop while ``work``
    runs."""
    done = False
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    gaps.clear()
    await work()
    done = True
    await ticker
    return max(gaps, default=0.0) * 1e3


async def on_the_loop(messages: list[dict[str, Any]], settings: Settings) -> None:
    """The ask as the release before made it: the prompt made on the loop."""
    prompt = build_extraction_messages(messages, [], settings.extraction_max_chars)
    await AtOnce().complete(prompt)


async def main_async(sizes: list[int], repeats: int) -> None:
    settings = Settings()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print("longest wait of a 1 ms ticker on the event loop while the fast model is asked:")
    for size in sizes:
        messages = make_chat(size)
        now, before = [], []
        for _ in range(repeats):
            now.append(
                await longest_gap(partial(extract.ask_model, AtOnce(), settings, messages, []))
            )
            before.append(await longest_gap(partial(on_the_loop, messages, settings)))
        print(
            f"  {size:>7,} messages: prompt in a worker thread {statistics.median(now):7.1f} ms, "
            f"on the loop (before) {statistics.median(before):7.1f} ms "
            f"(medians of {repeats}, alternating)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.setswitchinterval(0.001)  # as the server commands set it, and the cycle collector
    quiet_collector()
    asyncio.run(main_async([int(s) for s in args.sizes.split(",")], args.repeats))


if __name__ == "__main__":
    main()
