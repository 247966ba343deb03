"""What the budget's keyword search over a long real chat costs, beside SQLite FTS5.

Data: REALTALK (``data/Chat_*.json`` only, read as ``bench_history.py`` reads it): its 10 chats
one after another (8,944 messages), repeated until the history has ``--sizes`` messages; each
of the next 200 messages (in the same order, so real next turns) is a query.

Printed per size, in one process:

- the words read: :meth:`smart_context.budget.words.Words.read` over the history (the request
  that meets a chat first reads them, in a worker thread when it is long), and what the
  postings take in memory (their buffers, the lists and the words, ``sys.getsizeof``);
- a query's time: the product's BM25 (:func:`~smart_context.budget.words.bm25`, the best 200,
  as the budget asks) against the plain baseline, SQLite FTS5's ``bm25()`` over the same
  messages (``porter unicode61`` tokenizer, the message's words OR-ed but for the same function
  words, the best 200), the index the product queried on every request before (which also left
  out the words half the rows hold, and in a long chat searched its rarest words only, within
  1,000 rows, at some cost in recall); alternating query by query, median and 90th percentile;
- how many of each one's best 20 the other finds (stems differ: FTS5 uses Porter's stemmer).

Then (``--request``, 0 to skip) whole requests on real text: ``pipeline_context`` turn by turn
on a history of that many REALTALK messages, as ``bench_context.py``'s turn-by-turn rows run it
(random vectors, two of six topics selected, the default budget, gpt-4o laid out for its
prompt cache, or chosen anew each turn with ``prompt_cache = "none"``), each request's message
the chat's real next one and the turn it makes added before the next; median and p95 of
``--turns`` requests after 10 to warm. Only this part runs on an older release too (it imports
nothing new), so the two can be compared on one machine.

    PYTHONPATH=. python benchmarks/public/bench_words.py --data /path/to/REALTALK \\
        [--sizes 10000,100000] [--request 10000] [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pluggy

import smart_context.hookspecs
from benchmarks.bench_context import Ctx, Host, RandomEmbedder, mapped, percentiles
from benchmarks.public.bench_history import PARTS, load
from benchmarks.public.snapshot import Snapshot, reported, snapshot
from smart_context.budget.budgeter import LEXICAL_HITS
from smart_context.items.lexical import STOP_WORDS
from smart_context.plugin import SmartContextPlugin

if TYPE_CHECKING:
    from smart_context.budget.words import Words

QUERIES = 200


def texts_of(source: Snapshot, size: int) -> list[str]:
    """Every chat's messages' texts in order, repeated to ``size`` plus the queries."""
    return [str(m["content"]) for m in messages_of(source, size)]


def fts5_expression(text: str) -> str | None:
    """The words of ``text`` but function words, each as an FTS5 string, OR-ed (quotes
    doubled: any text is safe)."""
    spaced = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    found = [w for w in spaced if w not in STOP_WORDS]
    if not found:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(found))


def held_bytes(said: Words) -> int:
    """The postings' memory: each buffer, each word, the dict and the counts."""
    total = sys.getsizeof(said.postings) + said.counts.nbytes
    for word, at in said.postings.items():
        total += sys.getsizeof(word) + sys.getsizeof(at)
    return total


def run(source: Snapshot, size: int) -> None:
    from smart_context.budget.words import Words, bm25  # (the request part runs without it)

    texts = texts_of(source, size)
    history, queries = texts[:size], texts[size : size + QUERIES]
    start = time.perf_counter()
    said = Words.read(history, 0)
    read_ms = (time.perf_counter() - start) * 1000
    memory = held_bytes(said)
    raw = sqlite3.connect(":memory:")
    raw.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    raw.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", enumerate(history))
    raw.execute("INSERT INTO t (t) VALUES ('optimize')")  # one segment: FTS5 at its fastest

    def fts5(text: str) -> list[int]:
        expression = fts5_expression(text)
        if expression is None:
            return []
        rows = raw.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?",
            (expression, LEXICAL_HITS),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def words(text: str) -> list[int]:
        scores = bm25(said.postings, said.counts, text, LEXICAL_HITS)
        found = np.flatnonzero(scores)
        best: list[int] = found[np.lexsort((found, -scores[found]))].tolist()
        return best

    for text in queries[:20]:  # warm both
        fts5(text)
        words(text)
    theirs, ours, shared = [], [], []
    for text in queries:
        t0 = time.perf_counter()
        a = fts5(text)
        t1 = time.perf_counter()
        b = words(text)
        t2 = time.perf_counter()
        theirs.append((t1 - t0) * 1000)
        ours.append((t2 - t1) * 1000)
        if a[:20]:
            shared.append(len(set(a[:20]) & set(b[:20])) / len(a[:20]))
    raw.close()

    def cut(samples: list[float]) -> str:
        ordered = sorted(samples)
        p90 = ordered[int(0.9 * len(ordered))]
        return f"median {statistics.median(ordered):.3f} ms, p90 {p90:.3f}"

    print(
        f"  {size:>7,} messages: words read in {read_ms:.0f} ms, their postings "
        f"{memory / 1e6:.1f} MB ({memory / size:.0f} bytes a message)"
    )
    print(f"    the product's BM25: {cut(ours)}")
    print(f"    SQLite FTS5 bm25(): {cut(theirs)}")
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(
        f"    ratio of medians {ratio:.2f}; of FTS5's best 20, the product's best 20 hold "
        f"{statistics.mean(shared):.2f} on average"
    )


def messages_of(source: Snapshot, size: int) -> list[dict[str, Any]]:
    """Every chat's messages in order with their roles, repeated to ``size`` plus the turns
    asked about (at least :data:`QUERIES`), each with an id of its own."""
    chats = sorted(load(source, "both"), key=lambda c: c.number)
    assert {c.number for c in chats} == {n for numbers in PARTS.values() for n in numbers}
    once = [(str(m["role"]), str(m["content"])) for c in chats for m in c.messages]
    repeated = (once * ((size + 2 * QUERIES) // len(once) + 1))[: size + 2 * QUERIES]
    return [{"id": f"r{i:06d}", "role": r, "content": t} for i, (r, t) in enumerate(repeated)]


async def requests(source: Snapshot, size: int, turns: int, cache: str) -> list[float]:
    """``pipeline_context`` turn by turn on ``size`` real messages (module docstring)."""
    messages = messages_of(source, size)
    history = messages[:size]
    chats = {
        "c": {
            "messages": list(history),
            "topics": mapped(history),
            "smart_context": {"active_topics": ["Asyncio Scraper", "Trip Planning"]},
        }
    }
    samples: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        (vault / ".memory").mkdir()
        pm = pluggy.PluginManager("sidecar")
        pm.add_hookspecs(smart_context.hookspecs)
        plugin = SmartContextPlugin(RandomEmbedder())
        pm.register(plugin)
        for result in pm.hook.sidecar_startup(host=Host(vault, chats, "auto", None, cache)):
            await result
        assert plugin.services is not None
        quiet = logging.getLogger("smart_context")
        level, quiet.level = quiet.level, logging.ERROR  # no model to map topics: said once
        try:
            for k in range(turns + 10):
                message, reply = messages[size + 2 * k], messages[size + 2 * k + 1]
                ctx = Ctx("c", list(history), str(message["content"]), "gpt-4o")
                t0 = time.perf_counter()
                await pm.hook.pipeline_context(ctx=ctx)[0]
                if k >= 10:
                    samples.append((time.perf_counter() - t0) * 1000)
                history += [message, reply]
                chats["c"]["messages"] = list(history)
                pm.hook.pipeline_output(ctx=ctx)
                await plugin.services.settle(timeout=600)
        finally:
            quiet.setLevel(level)
            await plugin.services.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="REALTALK: a checkout or a bare mirror")
    parser.add_argument("--sizes", default="10000,100000", help="the search's ('': none)")
    parser.add_argument("--request", type=int, default=10_000, help="messages (0: skip)")
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    found = snapshot("realtalk", args.data)
    if found is None:
        sys.exit(0)
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; REALTALK's "
        f"chats repeated to each size, the next {QUERIES} messages as queries; "
        f"{len(STOP_WORDS)} function words left out by the product"
    )
    with reported():
        for size in (int(s) for s in args.sizes.split(",") if s):
            run(found, size)
        if args.request:
            print(f"  pipeline_context turn by turn, {args.request:,} real messages:")
            for cache, how in (("auto", "laid out for its cache"), ("none", "chosen anew")):
                med, p95 = percentiles(
                    asyncio.run(requests(found, args.request, args.turns, cache))
                )
                print(f"    gpt-4o, {how}: median {med:.2f} ms, p95 {p95:.2f} ms")


if __name__ == "__main__":
    main()
