"""What a request pays for the stored summaries of a 10,000-message chat after a new message.

Run: PYTHONPATH=. python benchmarks/bench_summary_spans.py

The chat is summarised offline, then three messages arrive one by one and each request asks the
budget for the summaries' spans (``Budgeter._spans_of``). New messages leave every stored
summary valid (they cover earlier messages only), so the spans are kept; the baseline, in the
same process, is reading and checking them again (what every request after a new message paid
while the memo was keyed on every change of the chat).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from smart_context.budget.budgeter import Budgeter
from smart_context.budget.facts import MessageFacts
from smart_context.budget.tokens import counter_for
from smart_context.config import Settings
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import summarize_chat
from smart_context.messages import History

SIZE = 10_000


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
        await budgeter._spans_of("c", facts, counter)
        kept, again = [], []
        for k in range(1, 4):
            facts = owner.update(History(messages[: SIZE + k]))
            start = time.perf_counter()
            await budgeter._spans_of("c", facts, counter)
            kept.append((time.perf_counter() - start) * 1000)
            budgeter._spans.clear()
            start = time.perf_counter()
            await budgeter._spans_of("c", facts, counter)
            again.append((time.perf_counter() - start) * 1000)
        db.close()
    print(
        f"{SIZE:,} messages, after a new message: spans kept {statistics.median(kept):.2f} ms; "
        f"read and checked again (baseline) {statistics.median(again):.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
