"""Full-text search of one chat in a vault of several large chats (the memory database).

Run: python benchmarks/bench_memory_search.py [--chats 5] [--messages 10000] [--runs 50]

A temporary vault gets ``--chats`` chats of ``--messages`` messages each, about 40 words drawn
from a random vocabulary of 5,000 made-up words (seeded, so every run builds the same vault),
indexed through :meth:`MemoryDB.index_messages`. Then :meth:`MemoryDB.search` on one chat with
6-word queries of that vocabulary, limit 50: the median and 95th percentile of ``--runs``.
The target is a median under 10 ms. The indexing rate is printed too.

A second vault draws its words as natural text does (Zipf's law: the k-th commonest word 1/k as
often), so a query's words are held by many of a long chat's messages: there the search keeps
its rarest words within ``SCORED_ROWS`` rows, and each query is timed beside the same search over
every word (``whole=True``, as before that bound), alternately in one process.

Timings on a shared machine are only as good as the CPU it got: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from smart_context.memory.db import MemoryDB

VOCABULARY = 5_000
WORDS_PER_MESSAGE = 40
QUERY_WORDS = 6


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(VOCABULARY)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=5)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    rng = random.Random(11)  # noqa: S311 - a repeatable vault, not a secret
    words = _vocabulary(rng)
    for title, weights in (
        ("words drawn evenly", None),
        ("words drawn as in natural text (Zipf)", [1 / (k + 1) for k in range(VOCABULARY)]),
    ):
        print(f"{title}:")
        with tempfile.TemporaryDirectory() as vault, MemoryDB(Path(vault)) as db:
            started = time.perf_counter()
            for chat in range(args.chats):
                rows = [
                    (f"m{i}", f"k{i}", " ".join(rng.choices(words, weights, k=WORDS_PER_MESSAGE)))
                    for i in range(args.messages)
                ]
                db.index_messages(f"chat-{chat}", rows)
            took = time.perf_counter() - started
            total = args.chats * args.messages
            print(f"  indexed {total:,} messages in {took:.1f} s ({total / took:,.0f}/s)")
            _searches(db, f"chat-{args.chats // 2}", args.runs, rng, words, weights)
    print(f"python {sys.version.split()[0]}, nproc {os.cpu_count()}, load {os.getloadavg()}")


def _searches(
    db: MemoryDB,
    chat: str,
    runs: int,
    rng: random.Random,
    words: list[str],
    weights: list[float] | None,
) -> None:
    """``runs`` queries of :data:`QUERY_WORDS` words drawn as the chat's were, each searched as
    the product does and over every word, alternately."""
    db.search(chat, "warm up", 50)
    times: dict[bool, list[float]] = {False: [], True: []}
    hits: dict[bool, int] = {False: 0, True: 0}
    for _ in range(runs):
        query = " ".join(rng.choices(words, weights, k=QUERY_WORDS))
        for whole in (False, True):
            started = time.perf_counter()
            hits[whole] += len(db.search(chat, query, 50, whole=whole))
            times[whole].append((time.perf_counter() - started) * 1000)
    for whole, how in ((False, "search"), (True, "every word")):
        ordered = sorted(times[whole])
        p95 = ordered[int(len(ordered) * 0.95) - 1]
        print(
            f"  {how} of {chat}: median {statistics.median(ordered):.2f} ms, p95 {p95:.2f} ms "
            f"over {runs} queries of {QUERY_WORDS} words, {hits[whole] / runs:.0f} hits each"
        )


if __name__ == "__main__":
    main()
