"""Figures for the plugin's hot paths, in one process (run: python benchmarks/bench_context.py).

- pipeline_context with a warm cache, an active filter and the default budget, at 100 / 1,000
  / 10,000 messages (``--sizes``; median and p95), next to a baseline in the same process: one
  ``json.loads`` of the chat, which any host pays to read the chat at all; with a fixed cut, the
  automatic cut, and the automatic cut with the example vault's rules, references and notes.
  The figure of the targets repeats one message ("next", which no message of the chat holds);
  beside it, the median of a new message each time that shares words with the chat, as a real
  next turn (its vectors are embedded: by random vectors here; its words are each in most of
  the chat's messages, which a search leaves out, so it finds none but the turns added turn by
  turn: ``public/bench_words.py`` runs requests on real text, whose words are not so);
- the same with the chat model named (gpt-4o), its history chosen anew every turn
  (``prompt_cache = "none"``) and laid out for its prompt cache (the default): a turn between
  cuts extends the last request; and turn by turn, as people chat: each request the last one's
  history with its turn added, the background pass after each reply settled between; then the
  same with each turn joining a selected topic, as the pass after a reply lets it in a mapped
  chat (the topic's vector moves, so the click over the chat is made again);
- loading a 10,000-message embedding cache file from disk;
- local embedding throughput on ~50-token messages (needs the ``local`` extra).
Targets: <= 2 ms and <= 0.1 x json.loads at 10,000 messages, <= 20 ms at 100,000; <= 50 ms to
load the 10,000-entry cache; >= 200 msg/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pluggy

import smart_context.hookspecs
from smart_context.paths import ChatId
from smart_context.plugin import SmartContextPlugin
from smart_context.vectors import files
from smart_context.vectors.chat import ChatVectors
from smart_context.vectors.codec import content_hash
from smart_context.vectors.ops import Matrix, normalize_rows

DIM = 384
EXAMPLE_VAULT = Path(__file__).resolve().parents[1] / "example-vault"
WORDS = [
    "asyncio",
    "postgres",
    "index",
    "docker",
    "nginx",
    "react",
    "hooks",
    "state",
    "trip",
    "huts",
    "weather",
    "gear",
    "bread",
    "starter",
    "oven",
    "query",
    "plan",
    "schema",
    "deploy",
    "certificate",
    "budget",
    "temple",
    "train",
]


class RandomEmbedder:
    """Deterministic random unit vectors: the warm path never calls it, so quality is moot."""

    model_id = "bench-random-384"

    async def embed(self, texts: Sequence[str]) -> Matrix:
        rows = [np.random.default_rng(int(content_hash(t)[:8], 16)).normal(size=DIM) for t in texts]
        return normalize_rows(np.array(rows) if rows else np.zeros((0, DIM)))


class Memory:
    def __init__(self, chats: dict[str, dict[str, Any]]) -> None:
        self.chats = chats

    def load_chat(self, chat_id: str) -> dict[str, Any]:
        return self.chats[chat_id]

    def save_chat(self, chat_id: str, data: dict[str, Any]) -> None:
        self.chats[chat_id] = data

    def update_chat(
        self, chat_id: str, fn: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any]:
        self.chats[chat_id] = fn(self.chats[chat_id])
        return self.chats[chat_id]


class Host:
    def __init__(
        self,
        vault: Path,
        chats: dict[str, dict[str, Any]],
        threshold: float | str = 0.05,
        budget: int | None = None,
        cache: str = "auto",
    ) -> None:
        self.vault_path = vault
        self.memory = Memory(chats)
        self.llm = None
        self.threshold = threshold
        self.budget = budget
        self.cache = cache

    def settings(self, name: str) -> dict[str, Any]:
        budget = {} if self.budget is None else {"budget_tokens": self.budget}
        return {"similarity_threshold": self.threshold, "prompt_cache": self.cache, **budget}

    def emit(self, event: str, data: dict[str, Any]) -> None:
        pass


class Ctx:
    def __init__(
        self,
        chat_id: str,
        history: list[dict[str, Any]],
        message: str = "next",
        model: str | None = None,
    ) -> None:
        self.message = message
        self.original_message = message
        self.history = history
        self.metadata: dict[str, Any] = {"chat_id": chat_id}
        if model is not None:
            self.metadata["model"] = model
        self.response = None
        self.should_abort = False


def make_chat(n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(n)
    return [
        {
            "id": f"m{i:05d}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": " ".join(rng.choice(WORDS, size=40)),
        }
        for i in range(n)
    ]


def new_message(k: int) -> str:
    """The ``k``-th of a run of distinct messages that share words with :func:`make_chat`'s
    chats, as a real next turn does, and whose vectors are not cached yet (the text search
    finds none of the chat's own messages: its words are in most of them)."""
    rng = np.random.default_rng(k)
    a, b, c, d = rng.choice(WORDS, size=4, replace=False)
    return f"How do I get the {a} {b} working with {c} and {d}? ({k})"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def mapped(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Six topics sharing the messages out as an extractor would (a tenth left unassigned)."""
    labels = ["Asyncio Scraper", "Trip Planning", "Postgres", "Docker", "Sourdough", "Budget"]
    owned = [m["id"] for i, m in enumerate(messages) if i % 10]
    return [
        {
            "label": label,
            "count": len(owned[k :: len(labels)]),
            "message_ids": owned[k :: len(labels)],
        }
        for k, label in enumerate(labels)
    ]


async def bench_context(
    vault: Path,
    sizes: Sequence[int],
    repeats: int,
    threshold: float | str,
    items: bool = False,
    budget: int | None = None,
    model: str | None = None,
    cache: str = "auto",
) -> None:
    """``items``: the example vault's rules, references and notes in the vault too (agent
    selection, the rules' system message and the notes' search on every request); ``budget``:
    ``budget_tokens`` (``None``: the default, 8,000; 0: no budget); ``model``: the chat model
    the host names (its prompt cache lays the request out, unless ``cache`` is ``"none"``)."""
    if items:
        for folder in ("rules", "references", "notes"):
            shutil.copytree(EXAMPLE_VAULT / folder, vault / folder, dirs_exist_ok=True)
    chats: dict[str, dict[str, Any]] = {
        f"c{n}": {
            "messages": make_chat(n),
            "topics": mapped(make_chat(n)) if threshold == "auto" else [],
            "smart_context": {"active_topics": ["Asyncio Scraper", "Trip Planning"]},
        }
        for n in sizes
    }
    pm = pluggy.PluginManager("sidecar")
    pm.add_hookspecs(smart_context.hookspecs)
    plugin = SmartContextPlugin(RandomEmbedder())
    pm.register(plugin)
    for result in pm.hook.sidecar_startup(host=Host(vault, chats, threshold, budget, cache)):
        await result
    if model is not None:
        how = "chosen anew every turn" if cache == "none" else "laid out for its prompt cache"
        print(f"the same, threshold auto, the model {model} named, {how}:")
    elif budget == 0:
        print("the same, threshold auto, no budget (budget_tokens = 0):")
    elif items:
        print("the same, with the example vault's rules, references and notes:")
    elif threshold == "auto":
        print("the same, threshold auto, 6 topics with members (the default):")
    else:
        print(f"pipeline_context, warm cache, filter of 2 topics active, threshold {threshold}:")
    for n in sizes:
        history = chats[f"c{n}"]["messages"]
        raw = json.dumps(chats[f"c{n}"])
        ctx = Ctx(f"c{n}", list(history), model=model)
        await pm.hook.pipeline_context(ctx=ctx)[0]  # warm-up: embeds and caches everything
        # the background pass the first request starts (indexing and summarising a long chat)
        # would otherwise share the two cores with the requests measured
        assert plugin.services is not None
        await plugin.services.settle(timeout=600)
        await pm.hook.pipeline_context(ctx=Ctx(f"c{n}", list(history), model=model))[0]
        await plugin.services.settle(timeout=600)
        samples, fresh, base = [], [], []
        for k in range(repeats):
            ctx = Ctx(f"c{n}", list(history), model=model)
            t0 = time.perf_counter()
            await pm.hook.pipeline_context(ctx=ctx)[0]
            samples.append((time.perf_counter() - t0) * 1000)
            other = Ctx(f"c{n}", list(history), new_message(k), model)
            t0 = time.perf_counter()
            await pm.hook.pipeline_context(ctx=other)[0]
            fresh.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            json.loads(raw)
            base.append((time.perf_counter() - t0) * 1000)
        med, p95 = percentiles(samples)
        new_med, _ = percentiles(fresh)
        bmed, _ = percentiles(base)
        mode = ctx.metadata["smart_context"]["mode"]
        print(
            f"  {n:>6} messages: median {med:6.2f} ms  p95 {p95:6.2f} ms  ({mode}; "
            f"baseline json.loads of the chat {bmed:6.2f} ms, ratio {med / bmed:4.2f}); "
            f"a new message each time {new_med:6.2f} ms"
        )
        if model is not None:
            for joins in (False, True):
                turns = await turn_by_turn(pm, plugin, chats, f"c{n}", model, repeats, joins=joins)
                turn_med, turn_p95 = percentiles(turns)
                how = "its turn joining a selected topic" if joins else "its turn"
                print(
                    f"  {n:>6} messages, turn by turn (each request the last one's history and "
                    f"{how}): median {turn_med:6.2f} ms  p95 {turn_p95:6.2f} ms"
                )
    assert plugin.services is not None
    await plugin.services.close()


async def turn_by_turn(
    pm: pluggy.PluginManager,
    plugin: SmartContextPlugin,
    chats: dict[str, dict[str, Any]],
    chat_id: str,
    model: str | None,
    turns: int,
    around: Callable[[int, Ctx], AbstractContextManager[object]] | None = None,
    joins: bool = False,
) -> list[float]:
    """A chat as people use it: each request brings the last one's history with its turn (the
    message and a reply) added, the host has stored that turn and told the plugin
    (``pipeline_output``), and the background pass it starts has settled, as it does while the
    model writes. Times each request (in ``around(turn, ctx)``, when given: entered just before
    it and left just after, the background still to come); the chat is left grown. ``joins``:
    each turn joins one of the selected topics (written on the chat before the pass, as the
    pass's own join of a mapped chat writes it; the stand-in has no map to join), which moves
    that topic's vector."""
    assert plugin.services is not None
    history = list(chats[chat_id]["messages"])
    samples = []
    quiet = logging.getLogger("smart_context")
    level, quiet.level = quiet.level, logging.ERROR  # the stand-in has no model to map topics
    try:
        for k in range(turns):
            message = new_message(1000 + k)
            ctx = Ctx(chat_id, list(history), message, model)
            with nullcontext() if around is None else around(k, ctx):
                t0 = time.perf_counter()
                await pm.hook.pipeline_context(ctx=ctx)[0]
                samples.append((time.perf_counter() - t0) * 1000)
            at = len(history)  # ids of their own, however many runs grew the chat
            history += [
                {"id": f"t{at:06d}u", "role": "user", "content": message},
                {"id": f"t{at:06d}a", "role": "assistant", "content": f"An answer on {message}"},
            ]
            chats[chat_id]["messages"] = list(history)
            if joins:
                joined = partial(_joined, history[-2:], k)
                await plugin.services.chats.update(ChatId(chat_id), joined)
            pm.hook.pipeline_output(ctx=ctx)
            await plugin.services.settle(timeout=600)
    finally:
        quiet.setLevel(level)
    return samples


def _joined(turn: list[dict[str, Any]], k: int, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``turn``'s messages among the members of one of the selected topics (the
    two of :func:`bench_context`, in turn)."""
    selected = data.get("smart_context", {}).get("active_topics") or []
    label = selected[k % len(selected)] if selected else None
    topics = [
        {**t, "message_ids": [*t["message_ids"], *(m["id"] for m in turn)]}
        if t.get("label") == label
        else t
        for t in data.get("topics") or []
    ]
    return {**data, "topics": topics}


async def bench_cache_load(vault: Path, repeats: int) -> None:
    n = 10_000
    messages = make_chat(n)
    vectors = ChatVectors("bench-random-384", DIM)
    vectors.add_messages(messages, await RandomEmbedder().embed([m["content"] for m in messages]))
    path = vault / ".memory" / "big.embeddings.json"
    files.save(path, vectors)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        loaded = files.load(path, ChatVectors, "bench-random-384", DIM)
        samples.append((time.perf_counter() - t0) * 1000)
        assert loaded is not None and len(loaded) == n
    med, p95 = percentiles(samples)
    size = path.stat().st_size / 1e6
    print(
        f"loading a {n:,}-message cache file ({size:.1f} MB): median {med:.1f} ms, p95 {p95:.1f} ms"
    )


def bench_local(count: int) -> None:
    if count <= 0:
        print("local embedding: skipped (--local-count 0)")
        return
    try:
        from smart_context.embeddings.local import shared_local_model
    except ImportError as exc:
        print(f"local embedding: skipped ({exc})")
        return
    model = shared_local_model()
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(WORDS, size=42)) for _ in range(count)]  # ~50 tokens with specials
    model.embed_sync(texts[:32])
    t0 = time.perf_counter()
    model.embed_sync(texts)
    elapsed = time.perf_counter() - t0
    print(
        f"local embedding ({model.model_id}): {count / elapsed:.0f} messages/s on ~50-token "
        f"messages ({count} in {elapsed:.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--local-count", type=int, default=512)
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        (vault / ".memory").mkdir()
        sizes = [int(s) for s in args.sizes.split(",")]
        asyncio.run(bench_context(vault, sizes, args.repeats, 0.05))
        asyncio.run(bench_context(vault, sizes, args.repeats, "auto"))
        asyncio.run(bench_context(vault, sizes, args.repeats, "auto", items=True))
        asyncio.run(bench_context(vault, sizes, args.repeats, "auto", budget=0))
        for cache in ("none", "auto"):  # the same model: per turn, then laid out for its cache
            asyncio.run(
                bench_context(vault, sizes, args.repeats, "auto", model="gpt-4o", cache=cache)
            )
        asyncio.run(bench_cache_load(vault, 20))
    bench_local(args.local_count)


if __name__ == "__main__":
    main()
