"""The token budget at 100, 1,000 and 10,000 messages (docs/contract.md §9).

Prints, for generated long chats (``benchmarks/long_chats.py``) and a 4,000-token budget:

- tokens sent against the full history (counted with gpt-4o's tokenizer);
- the warm assembly time of the budget (``Budgeter.fit``: counts, text search, vector scores,
  importance, the plan and the summaries), median of 30 requests, beside one embedding of the
  message by the local model in the same process (every request pays that once anyway, shared
  with context items), when the local model is installed;
- summarising a 1,000-message chat offline: time and peak memory (``tracemalloc``).

Message vectors are random unit vectors under a stand-in model: their values do not change
what the budget costs, and embedding 10,000 messages with the real model would take minutes.

    PYTHONPATH=. python benchmarks/bench_budget.py [--sizes 100 1000 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.long_chats import make_chat
from smart_context.budget.budgeter import Budgeter
from smart_context.budget.parts import Fixed
from smart_context.budget.tokens import counter_for, prompt_tokens
from smart_context.config import Settings
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import summarize_chat
from smart_context.messages import History
from smart_context.paths import ChatId
from smart_context.store import VectorStore
from smart_context.vectors.ops import Matrix, normalize_rows

MODEL = "gpt-4o"
DIM = 384


class RandomEmbedder:
    """Unit vectors from a fixed-seed generator, one per text: instant, model-shaped."""

    model_id = "bench-random-384"

    def __init__(self) -> None:
        self.rng = np.random.default_rng(11)

    async def embed(self, texts: Sequence[str]) -> Matrix:
        return normalize_rows(self.rng.standard_normal((len(texts), DIM)).astype(np.float32))


async def prepare(
    vault: Path, chat: dict[str, Any], settings: Settings
) -> tuple[Budgeter, VectorStore]:
    """What the background pass leaves: vectors, the text index and the summaries."""
    chat_id = ChatId(chat["id"])
    messages = chat["messages"]
    store = VectorStore(vault, RandomEmbedder())
    await store.sync_chat(chat_id, messages)
    db = MemoryDB(vault)
    await summarize_chat(db, chat_id, messages, settings, None)
    return Budgeter(settings, db), store


async def measure(chat: dict[str, Any], settings: Settings, rounds: int = 30) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        budgeter, store = await prepare(vault, chat, settings)
        messages = chat["messages"]
        questions = [q["text"] for q in chat["questions"]] or ["What did we decide?"]

        async def get_store() -> VectorStore:
            return store

        counter = counter_for(MODEL)
        full = prompt_tokens(counter, [*messages, {"role": "user", "content": questions[0]}])
        queries = normalize_rows(np.random.default_rng(5).standard_normal((2, DIM)))
        times, reads, used = [], [], []
        for r in range(rounds + 1):
            question = questions[r % len(questions)]
            start = time.perf_counter()
            history = History(messages)  # the topic rule reads the ids; the budget reuses them
            read = time.perf_counter() - start
            start = time.perf_counter()
            fitted = await budgeter.fit(
                ChatId(chat["id"]),
                messages,
                Fixed(message=question),
                MODEL,
                get_store,
                queries,
                history=history,
            )
            elapsed = time.perf_counter() - start
            assert fitted is not None
            if r:  # the first builds the memos: warm requests are what a chat pays
                times.append(elapsed)
                reads.append(read)
                used.append(fitted.record["budget"]["used"])
        budgeter.db.close()
        return {
            "full": full["total"],
            "sent": statistics.median(used),
            "fit_ms": 1000 * statistics.median(times),
            "read_ms": 1000 * statistics.median(reads),
        }


async def embed_baseline(text: str) -> float | None:
    """Median ms of one embedding of ``text`` by the local model, or None without it."""
    try:
        from smart_context.embeddings.local import LocalMiniLM

        embedder = LocalMiniLM.from_package()
    except Exception:  # noqa: BLE001 - the local extra is optional here
        return None
    await embedder.embed([text])
    times = []
    for _ in range(15):
        start = time.perf_counter()
        await embedder.embed([text])
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


async def summarise_1000(settings: Settings) -> tuple[float, float, int]:
    chat = make_chat(1000, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        db = MemoryDB(Path(tmp))
        tracemalloc.start()
        start = time.perf_counter()
        made = await summarize_chat(db, chat["id"], chat["messages"], settings, None)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        db.close()
    return elapsed, peak / 2**20, made


def chat_of(n: int) -> dict[str, Any]:
    """A generated chat of ``n`` messages: the generator makes 200 to about 2,500, so a longer
    one is several of its chats one after the other (ids prefixed by part)."""
    parts = 0
    questions: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    while len(messages) < n:
        part = make_chat(min(max(n - len(messages), 200), 2000), seed=1 + parts)
        messages += [{**m, "id": f"p{parts}-{m['id']}"} for m in part["messages"]]
        questions += part["questions"]
        parts += 1
    return {"id": f"bench-{n}", "messages": messages[:n], "questions": questions}


async def main(sizes: Sequence[int]) -> None:
    settings = Settings(budget_tokens=4000, token_model=MODEL, summarizer="offline")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, budget 4000 tokens")
    baseline = await embed_baseline("When does the lease on the flat end, and who is the landlord?")
    for n in sizes:
        chat = chat_of(n)
        figures = await measure(chat, settings)
        ratio = f", {figures['fit_ms'] / baseline:.2f}x one message embedding" if baseline else ""
        print(
            f"{n:>6} messages: full history {figures['full']:>8,} tokens, sent "
            f"{figures['sent']:>6,.0f} ({figures['sent'] / figures['full']:.1%}); "
            f"assembly median {figures['fit_ms']:.1f} ms{ratio} (reading the ids: "
            f"{figures['read_ms']:.1f} ms, shared with the topic rule)"
        )
    if baseline:
        print(f"one embedding of the message by the local model: {baseline:.1f} ms (median)")
    elapsed, peak, made = await summarise_1000(settings)
    print(
        f"summarising a 1,000-message chat offline: {made} summaries in {elapsed:.2f} s, "
        f"peak memory {peak:.1f} MiB"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    asyncio.run(main(parser.parse_args().sizes))
