"""How long the background passes hold the event loop, and every request with it, by chat length.

Run: python benchmarks/bench_loop_waits.py [--sizes 10000,100000] [--repeats 3]

A ticker on the loop wakes every millisecond while a pass runs, and the longest gap between two
ticks is printed, for this release's way against the release before's, alternating in this
process, with the switch interval and the cycle collector the server commands set (1 ms):

- **the topic map's ask** to the fast model (``topics.extract.ask_model``, a model that answers
  at once): the chat as a bounded transcript, a line rendered per message, made in a worker
  thread (before: on the loop);
- **the chat's embedding file** written by the pass after a reply
  (``VectorStore.sync_rows``), once 200 rows changed since it was last written: its text made
  in the writer's thread from a snapshot of the rows (before: made on the loop, under the
  collection's lock);
- **opening a chat's embedding file** (``vectors.files.load``, in a worker thread, as a chat's
  first request after a start opens it): read in pieces (before: one ``json.loads`` and one
  ``bytes.fromhex``, each holding the interpreter's lock for all of it).

The chats are ``bench_context.make_chat``'s, with random vectors (their stand-in embedder
runs on the loop, a few ms for the 200 new messages of each pass, the same both ways; the
local model runs in a thread).
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
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_context import RandomEmbedder, make_chat, new_message
from smart_context.allocator import quiet_collector
from smart_context.config import Settings
from smart_context.history_index import HistoryIndexes
from smart_context.messages import History
from smart_context.paths import check_chat_id, embeddings_file
from smart_context.store import SAVE_EVERY, VectorStore
from smart_context.topics import extract
from smart_context.topics.prompt import build_extraction_messages
from smart_context.vectors import files
from smart_context.vectors.chat import ChatVectors
from smart_context.vectors.codec import as_hex

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


async def asked_on_the_loop(messages: list[dict[str, Any]], settings: Settings) -> None:
    """The ask as the release before made it: the prompt made on the loop."""
    prompt = build_extraction_messages(messages, [], settings.extraction_max_chars)
    await AtOnce().complete(prompt)


class Chat:
    """A chat of ``size`` messages whose vectors are in the store, grown by ``SAVE_EVERY``
    messages before each pass, so that each pass writes the file, and read through its index
    as the pass reads it."""

    def __init__(self, vault: Path, size: int) -> None:
        self.store = VectorStore(vault, RandomEmbedder())
        self.chat_id = check_chat_id(f"c{size}")
        self.messages = make_chat(size)
        self.grown = 0
        self.indexes = HistoryIndexes()  # read as the pass reads it: what was added only

    def grow(self) -> History:
        for _ in range(SAVE_EVERY // 2):
            text = new_message(10_000 + self.grown)
            self.messages += [
                {"id": f"n{self.grown}u", "role": "user", "content": text},
                {"id": f"n{self.grown}a", "role": "assistant", "content": f"On {text}"},
            ]
            self.grown += 1
        return self.indexes.read(self.chat_id, self.messages)

    async def synced(self) -> None:
        """The pass as this release runs it."""
        await self.store.sync_rows(self.chat_id, self.grow())

    async def synced_before(self) -> None:
        """The pass as the release before ran it: the file's text made on the loop."""
        history, name = self.grow(), f"chat:{self.chat_id}"
        async with self.store.lock(name):
            vectors, _ = await self.store._chat_rows(name, self.chat_id, history)
            vectors.mark_saved()
            text = json.dumps(  # the file's text as it was made: one json.dumps
                {
                    "format": files.FORMAT,
                    "version": files.VERSION,
                    "model": vectors.model_id,
                    "dim": vectors.dim,
                    "dtype": "int8",
                    "keys": vectors.keys,
                    **as_hex(*vectors.stored),
                },
                separators=(",", ":"),
            )
        path = self.store.vault / ".memory" / f"{self.chat_id}.before.json"
        await asyncio.to_thread(path.write_text, text)

    async def opened(self) -> None:
        """The chat's file read as a chat's first request opens it."""
        path = embeddings_file(self.store.vault, self.chat_id)
        await asyncio.to_thread(files.load, path, ChatVectors, RandomEmbedder.model_id)

    async def opened_before(self) -> None:
        """The file read as the release before read it: whole."""
        path = embeddings_file(self.store.vault, self.chat_id)

        def whole() -> ChatVectors:
            return files.from_json(path.read_bytes().decode("utf-8"), ChatVectors)

        await asyncio.to_thread(whole)


async def main_async(sizes: list[int], repeats: int) -> None:
    settings = Settings()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(f"longest wait of a 1 ms ticker on the event loop (medians of {repeats}, alternating):")
    for size in sizes:
        messages = make_chat(size)
        asks: dict[str, list[float]] = {"now": [], "before": []}
        writes: dict[str, list[float]] = {"now": [], "before": []}
        opens: dict[str, list[float]] = {"now": [], "before": []}
        with tempfile.TemporaryDirectory() as tmp:
            vault = Path(tmp)
            (vault / ".memory").mkdir()
            chat = Chat(vault, size)
            await chat.store.sync_rows(chat.chat_id, chat.grow())  # embedded
            for _ in range(repeats):
                ask = partial(extract.ask_model, AtOnce(), settings, messages, [])
                asks["now"].append(await longest_gap(ask))
                asks["before"].append(
                    await longest_gap(partial(asked_on_the_loop, messages, settings))
                )
                writes["now"].append(await longest_gap(chat.synced))
                writes["before"].append(await longest_gap(chat.synced_before))
                opens["now"].append(await longest_gap(chat.opened))
                opens["before"].append(await longest_gap(chat.opened_before))
        rows = (("the topic map's ask", asks), ("the embedding file", writes))
        for label, runs in (*rows, ("opening that file", opens)):
            now, before = (statistics.median(runs[k]) for k in ("now", "before"))
            print(
                f"  {size:>7,} messages, {label:20s}: {now:7.1f} ms, the release before "
                f"{before:7.1f} ms"
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
