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
  messages (``porter unicode61`` tokenizer, every word of the message OR-ed, the best 200),
  which the product queried on every request before; alternating query by query, median and
  90th percentile;
- how many of each one's best 20 the other finds (stems and function words differ: FTS5 uses
  Porter's stemmer and keeps every word).

    PYTHONPATH=. python benchmarks/public/bench_words.py --data /path/to/REALTALK \\
        [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import platform
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.public.bench_history import PARTS, load
from benchmarks.public.snapshot import Snapshot, reported, snapshot
from smart_context.budget.budgeter import LEXICAL_HITS
from smart_context.budget.words import Words, bm25
from smart_context.items.lexical import STOP_WORDS

QUERIES = 200


def texts_of(source: Snapshot, size: int) -> list[str]:
    """Every chat's messages in order, repeated to ``size`` plus the queries."""
    chats = sorted(load(source, "both"), key=lambda c: c.number)
    assert {c.number for c in chats} == {n for numbers in PARTS.values() for n in numbers}
    once = [str(m["content"]) for c in chats for m in c.messages]
    return (once * ((size + QUERIES) // len(once) + 1))[: size + QUERIES]


def fts5_expression(text: str) -> str | None:
    """Every word of ``text`` as an FTS5 string, OR-ed (quotes doubled: any text is safe)."""
    found = "".join(c if c.isalnum() else " " for c in text.lower()).split()
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
    texts = texts_of(source, size)
    history, queries = texts[:size], texts[size:]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="REALTALK: a checkout or a bare mirror")
    parser.add_argument("--sizes", default="10000,100000")
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
        for size in (int(s) for s in args.sizes.split(",")):
            run(found, size)


if __name__ == "__main__":
    main()
