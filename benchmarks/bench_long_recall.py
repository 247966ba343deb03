"""Does the budget keep what a question about an old part of a long chat needs?

For each long chat of a set and each of its questions about old parts (each labelled with the
messages that answer it), the question is sent as the current message with the whole chat as
history, under a budget of 2%, 5%, 10% and 20% of the chat's tokens. The figure is the share of
answering messages inside what is sent, for:

- ``last N``: the most recent messages that fit (what a plain truncation sends);
- ``dense only``: messages by cosine similarity to the question, best first, while they fit;
- ``lexical only``: the same by BM25 (the ``bm25s`` package, English stop words);
- ``smart context``: the plugin's budget with its default settings (recent, pinned, hybrid
  search with turns, summaries from the offline pass, importance).

Sets (``--set``): ``generated`` (``benchmarks/data/long_chats.json`` from
``benchmarks/long_chats.py``: templated facts, easy) and ``hard`` (``long_chats_hard.json`` and
its labels, from ``benchmarks/long_chats_hard.py``: hand-written facts, corrections, paraphrased
questions, distractors; its chats are split into ``tune`` and ``heldout``, ``--split``).

Messages are embedded for real by the local model (all-MiniLM-L6-v2 int8), once per chat, as
the background pass would; the vectors are kept in ``--cache`` (a directory under the system's
temp dir by default), so a second run embeds nothing. Counts use gpt-4o's tokenizer.

    PYTHONPATH=. python benchmarks/bench_long_recall.py [--set hard] [--split heldout] [--kinds]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.budget_recall import default_settings, ready_chat
from benchmarks.public import baselines
from benchmarks.public.baselines import fill_by_rank, rank
from smart_context.config import Settings

DATA = Path(__file__).parent / "data" / "long_chats.json"
HARD = Path(__file__).parent / "data" / "long_chats_hard.json"
HARD_LABELS = Path(__file__).parent / "data" / "long_chats_hard_labels.json"
CACHE = Path(tempfile.gettempdir()) / "smart-context-recall"
SHARES = (0.02, 0.05, 0.10, 0.20)
METHODS = ("last N", "dense only", "lexical only", "smart context")


def load_chats(name: str, limit: int | None, split: str = "all") -> list[dict[str, Any]]:
    """The chats of set ``name``, each with its ``questions`` (of ``split`` for the hard set)."""
    if name == "hard":
        chats = json.loads(HARD.read_text(encoding="utf-8"))
        labels = json.loads(HARD_LABELS.read_text(encoding="utf-8"))
        for chat in chats:
            chat["questions"] = [
                q for q in labels if q["chat"] == chat["id"] and split in ("all", q["split"])
            ]
        chats = [c for c in chats if c["questions"]]
    elif DATA.exists():
        chats = json.loads(DATA.read_text(encoding="utf-8"))
    else:
        from benchmarks.long_chats import make_set

        chats = make_set()
    return list(chats[:limit] if limit else chats)


async def run_chat(
    chat: dict[str, Any], embedder: Any, settings: Settings, cache: Path
) -> dict[tuple[Any, ...], list[float]]:
    """Recall of every answer set, per (method, share) and (method, share, kind)."""
    out: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    async with ready_chat(chat["id"], chat["messages"], cache, embedder, settings) as ready:
        position = {m["id"]: i for i, m in enumerate(ready.messages)}
        n = len(ready.messages)
        bm25 = baselines.BM25([str(m.get("content") or "") for m in ready.messages])
        texts = [q["text"] for q in chat["questions"]]
        for question, queries in zip(
            chat["questions"], await ready.queries(texts, cache), strict=True
        ):
            text = question["text"]
            answers = {position[a] for a in question["answers"] if a in position}
            dense = baselines.dense(ready.vectors, queries) if len(queries) else np.zeros(n)
            lexical = bm25.scores(text)
            for share in SHARES:
                # the baselines get the history's whole room: the budget less the question
                kept, room = await ready.fit(text, int(share * ready.total), queries)
                chosen = {
                    "last N": fill_by_rank(range(n - 1, -1, -1), ready.tokens, room),
                    "dense only": fill_by_rank(rank(dense).tolist(), ready.tokens, room),
                    "lexical only": fill_by_rank(rank(lexical).tolist(), ready.tokens, room),
                    "smart context": kept,
                }
                kind = question.get("kind", "?")
                for method, taken in chosen.items():
                    recall = len(answers & taken) / len(answers)
                    out[(method, share)].append(recall)
                    out[(method, share, kind)].append(recall)
    return out


async def main(name: str, limit: int | None, split: str, kinds: bool, cache: Path) -> None:
    from smart_context.embeddings.local import LocalMiniLM

    chats = load_chats(name, limit, split)
    embedder = LocalMiniLM.from_package()
    settings = default_settings()
    results: dict[Any, list[float]] = defaultdict(list)
    start = time.perf_counter()
    for chat in chats:
        for key, values in (await run_chat(chat, embedder, settings, cache)).items():
            results[key].extend(values)
    questions = sum(len(c["questions"]) for c in chats)
    messages = sum(len(c["messages"]) for c in chats)
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; set {name!r}, "
        f"split {split!r}: {len(chats)} chats, "
        f"{messages:,} messages, {questions} questions ({time.perf_counter() - start:.0f} s)"
    )
    print("share of answering messages inside the budget (budget = share of the chat's tokens):")
    print(f"  {'method':<15}" + "".join(f"{f'{s:.0%}':>8}" for s in SHARES))
    for method in METHODS:
        row = "".join(f"{statistics.mean(results[(method, s)]):>8.3f}" for s in SHARES)
        print(f"  {method:<15}{row}")
    if kinds:
        found = sorted({k[2] for k in results if len(k) == 3})
        for kind in found:
            print(f"questions of kind {kind!r}:")
            for method in METHODS:
                row = "".join(
                    f"{statistics.mean(results[(method, s, kind)]):>8.3f}" for s in SHARES
                )
                print(f"  {method:<15}{row}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--set", choices=("generated", "hard"), default="generated")
    parser.add_argument("--split", choices=("all", "tune", "heldout"), default="all")
    parser.add_argument("--chats", type=int, default=None, help="only the first N chats")
    parser.add_argument("--kinds", action="store_true", help="also per kind of question")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where chat vectors are kept")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(args.set, args.chats, args.split, args.kinds, args.cache))
