"""What the stored summaries of a 10,000-message chat cost after a new message, and after a
new summary.

Run: PYTHONPATH=. python benchmarks/bench_summary_spans.py

The chat is summarised offline, then three messages arrive one by one and each request asks the
budget for the summaries' spans (``Budgeter._spans_of``). New messages leave every stored
summary valid (they cover earlier messages only), so the spans are kept; the baseline, in the
same process, is reading and checking them again (what every request after a new message paid
while the memo was keyed on every change of the chat).

Then, what the background pays when a pass stored a new summary (one reply in five on a long
chat): the budget's spans planned again, and a memory pass that makes a new leaf, each with the
summaries found valid before kept unhashed, against checking them all (alternating, medians).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from smart_context.budget.budgeter import Budgeter
from smart_context.budget.facts import Facts, MessageFacts
from smart_context.budget.tokens import Counter, counter_for
from smart_context.config import Settings
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import SeenChats, summarize_chat
from smart_context.memory.tree import LEAF
from smart_context.messages import History
from smart_context.paths import ChatId

SIZE = 10_000
CHAT = ChatId("c")


def chat(n: int) -> list[dict[str, Any]]:
    subjects = ["the sourdough starter", "the garden beds", "the TOML parser", "the Lisbon trip"]
    return [
        {
            "id": f"m{i:05d}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Message {i} about {subjects[(i // 6) % 4]}. " + "More detail. " * 8,
        }
        for i in range(n)
    ]


async def main() -> None:
    messages = chat(SIZE + 3)
    with tempfile.TemporaryDirectory() as tmp:
        db = MemoryDB(Path(tmp))
        await summarize_chat(db, "c", messages[:SIZE], Settings(summarizer="offline"), None)
        budgeter = Budgeter(Settings(), db)
        counter = counter_for("gpt-4o")
        owner = MessageFacts(counter)
        facts = owner.update(History(messages[:SIZE]))
        await budgeter._spans_of(CHAT, facts, counter)
        kept, again = [], []
        for k in range(1, 4):
            facts = owner.update(History(messages[: SIZE + k]))
            with_memo, without = await memo_and_none(budgeter, facts, counter)
            kept.append(with_memo)
            again.append(without)
        replan, replan_all = await after_a_new_summary(budgeter, facts, counter)
        leaf, leaf_all = await a_new_leaf(db)
        db.close()
    print(
        f"{SIZE:,} messages, after a new message: spans kept {statistics.median(kept):.2f} ms; "
        f"read and checked again (baseline) {statistics.median(again):.1f} ms"
    )
    print(
        f"after a new summary: the spans planned again {replan:.1f} ms against {replan_all:.1f} ms "
        f"checking every summary ({replan / replan_all:.2f} x); a memory pass making a leaf "
        f"{leaf:.1f} ms against {leaf_all:.1f} ms ({leaf / leaf_all:.2f} x)"
    )


async def after_a_new_summary(
    budgeter: Budgeter, facts: Facts, counter: Counter, rounds: int = 15
) -> tuple[float, float]:
    """The spans planned again as after a pass stored a summary: the checks kept by the memo,
    against a memo dropped (every summary hashed); medians in ms."""
    kept: list[float] = []
    every: list[float] = []
    for _ in range(rounds):
        budgeter.summary_version[CHAT] = budgeter.summary_version.get(CHAT, 0) + 1
        with_memo, without = await memo_and_none(budgeter, facts, counter)
        kept.append(with_memo)
        every.append(without)
    return statistics.median(kept), statistics.median(every)


async def memo_and_none(budgeter: Budgeter, facts: Facts, counter: Counter) -> tuple[float, float]:
    """The spans of ``facts`` with the budget's memo as it stands, then with none (every
    stored summary read and checked again), in ms; the memo is left made anew."""
    start = time.perf_counter()
    await budgeter._spans_of(CHAT, facts, counter)
    with_memo = (time.perf_counter() - start) * 1000
    budgeter._spans.clear()
    start = time.perf_counter()
    await budgeter._spans_of(CHAT, facts, counter)
    return with_memo, (time.perf_counter() - start) * 1000


async def a_new_leaf(db: MemoryDB, rounds: int = 10) -> tuple[float, float]:
    """A memory pass over the chat grown by a leaf's worth, with the checks an earlier pass
    kept (``SeenChats``) against none; medians in ms."""
    messages = chat(SIZE + 20 * rounds + 20)
    settings, seen, chat_id = Settings(summarizer="offline"), SeenChats(), ChatId("c")
    n = SIZE
    kept: list[float] = []
    every: list[float] = []
    for _ in range(rounds):
        for times, checked in ((kept, True), (every, False)):
            n += LEAF
            keyed, _ = seen.keys(chat_id, messages[:n])
            keep = seen.checked(chat_id) if checked else None
            start = time.perf_counter()
            await summarize_chat(db, "c", messages[:n], settings, None, None, keyed, keep)
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(kept), statistics.median(every)


if __name__ == "__main__":
    asyncio.run(main())
