"""Where a request makes its reads, measured in one process (run: python
benchmarks/bench_request_reads.py [--sizes 1000,10000] [--repeats 40]).

A request reads the memory store and stats the vault's item and note files when its plan is
made, and with a budget that cuts the chat it starts the message's embedding and the budget's
dense search then too (``context/assemble.py: plan_request``). Before, every request took one
trip to a worker thread for the reads, and the dense search waited for the budget's turn. This
script alternates the ways request by request on the same warm chat, so all see the same
machine: "before" (the trip always; the search late), "the trip" (the reads on the loop when
they are quick, but a text index of 1,000 rows or more searched in the trip, as the release
before the search's quick check did; its search, like the others', leaves the chat's key out
for rare words) and "now" (the reads on the loop when they are quick, the text search too when
it counts few words and walks few rows: ``MemoryDB.quick``; the search started with the plan).

Three cases, each at every size: the default budget; no budget; and the default budget with the
message embedded by a server 50 ms away (an OpenAI-compatible endpoint), where starting the
embedding early lets it run while the topic rule and the sections do. The chat's own vectors are
random (bench_context.RandomEmbedder); each request has a new message that shares words with
the chat, two of them in few of its messages, so that its text search finds some (printed;
none without a budget, whose text index the budget fills).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pluggy

import smart_context.hookspecs
from benchmarks.bench_context import Ctx, Host, RandomEmbedder, make_chat, mapped, new_message
from smart_context.budget.budgeter import Budgeter
from smart_context.context import assemble
from smart_context.memory.db import WEIGHED_FROM, MemoryDB
from smart_context.plugin import SmartContextPlugin
from smart_context.vectors.ops import Matrix

NETWORK_SECONDS = 0.05
PARTS = 250


class FarEmbedder(RandomEmbedder):
    """Random vectors, the request's message after a network round trip."""

    async def embed(self, texts: Sequence[str]) -> Matrix:
        if any(t.startswith("How do I") for t in texts):  # bench_context.new_message
            await asyncio.sleep(NETWORK_SECONDS)
        return await super().embed(texts)


def ways() -> dict[str, Callable[[], None]]:
    """Each way as a switch of the module attributes it differs in."""
    look_now, cuts, quick = getattr(assemble, "look_now"), Budgeter.cuts, MemoryDB.quick  # noqa: B009

    def before() -> None:
        setattr(assemble, "look_now", lambda *args: None)  # noqa: B010 - swapped for the run
        setattr(Budgeter, "cuts", lambda *args: False)  # noqa: B010
        setattr(MemoryDB, "quick", quick)  # noqa: B010

    def trip() -> None:
        now()
        setattr(MemoryDB, "quick", lambda db, chat_id, query: db.last_row() < WEIGHED_FROM)  # noqa: B010

    def now() -> None:
        setattr(assemble, "look_now", look_now)  # noqa: B010
        setattr(Budgeter, "cuts", cuts)  # noqa: B010
        setattr(MemoryDB, "quick", quick)  # noqa: B010

    return {"before": before, "trip": trip, "now": now}


async def compare(n: int, repeats: int, budget: int | None, embedder: Any) -> dict[str, float]:
    """The median of each way, on a warm chat of ``n`` messages."""
    switches = ways()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        (vault / ".memory").mkdir()
        chat: dict[str, Any] = {
            "messages": with_parts(make_chat(n)),
            "topics": mapped(make_chat(n)),
            "smart_context": {"active_topics": ["Asyncio Scraper", "Trip Planning"]},
        }
        pm = pluggy.PluginManager("sidecar")
        pm.add_hookspecs(smart_context.hookspecs)
        plugin = SmartContextPlugin(embedder)
        pm.register(plugin)
        for result in pm.hook.sidecar_startup(host=Host(vault, {"c": chat}, "auto", budget)):
            await result
        assert plugin.services is not None
        history = chat["messages"]
        for _ in range(3):  # warm: the chat embedded, indexed, counted
            await pm.hook.pipeline_context(ctx=Ctx("c", list(history)))[0]
            await plugin.services.settle(timeout=600)
        samples: dict[str, list[float]] = {name: [] for name in switches}
        try:
            for k in range(repeats):
                for j, (name, switch) in enumerate(switches.items()):
                    switch()
                    ctx = Ctx("c", list(history), asking(len(switches) * k + j))
                    t0 = time.perf_counter()
                    await pm.hook.pipeline_context(ctx=ctx)[0]
                    samples[name].append((time.perf_counter() - t0) * 1000)
            found = [
                len(plugin.services.memory_db.search("c", asking(k), 200)) for k in range(repeats)
            ]
        finally:
            switches["now"]()
            await plugin.services.close()
    return {name: statistics.median(values) for name, values in samples.items()} | {
        "hits": statistics.median(found)
    }


def with_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` each naming one of :data:`PARTS` parts: the words of
    :func:`bench_context.make_chat` are each in most messages, so a search of them scores no
    row; a part is in one message of :data:`PARTS`, as a name or a subject is."""
    return [m | {"content": f"{m['content']} part{i % PARTS}"} for i, m in enumerate(messages)]


def asking(k: int) -> str:
    """The ``k``-th new message: :func:`bench_context.new_message`, naming two parts, so that
    the text search finds the messages that name them (8 at 1,000 messages, 80 at 10,000)."""
    return f"{new_message(k)} About part{k % PARTS} and part{(7 * k + 3) % PARTS}."


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; medians of {args.repeats} requests each, a new message each"
    )
    cases = [
        ("the default budget", None, RandomEmbedder),
        ("no budget", 0, RandomEmbedder),
        (
            f"the default budget, message embedded {NETWORK_SECONDS * 1000:.0f} ms away",
            None,
            FarEmbedder,
        ),
    ]
    for title, budget, kind in cases:
        print(title + ":")
        for n in (int(s) for s in args.sizes.split(",")):
            found = asyncio.run(compare(n, args.repeats, budget, kind()))
            print(
                f"  {n:>6} messages: before {found['before']:6.2f} ms, a large index searched "
                f"in the trip {found['trip']:6.2f} ms, now {found['now']:6.2f} ms "
                f"({found['now'] / found['before']:.2f} x before, "
                f"{found['now'] / found['trip']:.2f} x the trip; the text search finds "
                f"{found['hits']:.0f} messages)"
            )


if __name__ == "__main__":
    main()
