"""What the chat model's look back adds to the budget.

For each generated long chat (``benchmarks/data/long_chats.json``) and each of its questions
about old parts, the question is sent under a budget of 2%, 5% and 10% of the chat's tokens, as
in ``bench_long_recall.py``. Then the model is assumed to call ``retrieve_context`` once with
the question as its query (a real model writes its own query; this is the plain case): the look
back searches only the messages the budget left out, and returns the best ``--limit`` of them,
each with the other half of its turn (``look_back_hits``, the tool's own choice). Printed: the
share of answering messages inside the budget, inside the budget or the look back, and the
median size of what the model reads back (tokens of the tool's text, gpt-4o's tokenizer); once
with the question as the current message, once with a message that names nothing (:data:`VAGUE`,
"what did we settle on back then?"), where only the model's own query can find the answer.

Messages are embedded by the local model (all-MiniLM-L6-v2 int8), once per chat.

    PYTHONPATH=. python benchmarks/bench_look_back.py [--chats N] [--limit 6]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_long_recall import load_chats
from benchmarks.budget_recall import default_settings, ready_chat
from smart_context.budget.budgeter import Budgeter
from smart_context.budget.parts import Fixed
from smart_context.budget.tokens import counter_for
from smart_context.commands.memory import look_back_hits
from smart_context.config import Settings, replace
from smart_context.items.catalog import ItemCatalog
from smart_context.memory.model_tools import retrieved_text
from smart_context.messages import History
from smart_context.store import VectorStore

MODEL = "gpt-4o"
SHARES = (0.02, 0.05, 0.10)
# A message that names nothing: the budget's search finds nothing in it, the model must look back
VAGUE = "Wait, what did we settle on back then? Remind me."


async def run_chat(
    chat: dict[str, Any], embedder: Any, settings: Settings, limit: int
) -> dict[tuple[str, float], list[float]]:
    """Per (measure, share): recall without and with one look back, and its size in tokens."""
    out: dict[tuple[str, float], list[float]] = defaultdict(list)
    counter = counter_for(MODEL)
    with tempfile.TemporaryDirectory() as cache:
        async with ready_chat(
            chat["id"], chat["messages"], Path(cache), embedder, settings
        ) as ready:
            messages = ready.messages
            history = History(messages)
            position = {m["id"]: i for i, m in enumerate(messages)}

            async def get_store() -> VectorStore:
                return ready.store

            for question in chat["questions"]:
                text = question["text"]
                answers = {position[a] for a in question["answers"] if a in position}
                queries = await ItemCatalog.query_vectors(ready.store, text)
                for share in SHARES:
                    budget = replace(settings, budget_tokens=int(share * ready.total))
                    budgeter = Budgeter(budget, ready.db)
                    scores = await budgeter.relevance(
                        ready.chat_id, history, text, get_store, queries
                    )
                    for sent_as, message in (("question", text), ("vague", VAGUE)):
                        fitted = await budgeter.fit(
                            ready.chat_id, messages, Fixed(message=message), MODEL, get_store, None
                        )
                        assert fitted is not None
                        kept = fitted.kept
                        hits = look_back_hits(scores, history.codes, limit, ~kept)
                        sent = {int(i) for i in np.flatnonzero(kept)}
                        found = sent | set(hits)
                        recall = len(answers & sent) / len(answers)
                        out[(f"{sent_as}: budget", share)].append(recall)
                        out[(f"{sent_as}: + look back", share)].append(
                            len(answers & found) / len(answers)
                        )
                        rows = [
                            {
                                "role": messages[i].get("role"),
                                "content": messages[i]["content"],
                                "created_at": messages[i].get("created_at"),
                            }
                            for i in hits
                        ]
                        read = retrieved_text(text, rows, [])
                        out[(f"{sent_as}: tokens", share)].append(float(counter.count([read])[0]))
    return out


async def main(chats_limit: int | None, limit: int) -> None:
    from smart_context.embeddings.local import LocalMiniLM

    chats = load_chats("long", chats_limit)
    embedder = LocalMiniLM.from_package()
    settings = default_settings()
    results: dict[tuple[str, float], list[float]] = defaultdict(list)
    start = time.perf_counter()
    for chat in chats:
        for key, values in (await run_chat(chat, embedder, settings, limit)).items():
            results[key].extend(values)
    questions = sum(len(c["questions"]) for c in chats)
    print(
        f"{len(chats)} chats, {questions} questions, look back limit {limit} "
        f"({time.perf_counter() - start:.0f} s)"
    )
    print(f"  {'':<44}" + "".join(f"{f'{s:.0%}':>8}" for s in SHARES))
    for sent_as in ("question", "vague"):
        print(
            "the current message is "
            + ("the question:" if sent_as == "question" else f"{VAGUE!r}:")
        )
        for name, kind in (
            ("answering messages inside the budget", "budget"),
            ("... inside the budget or one look back", "+ look back"),
        ):
            row = "".join(
                f"{statistics.mean(results[(f'{sent_as}: {kind}', s)]):>8.3f}" for s in SHARES
            )
            print(f"  {name:<44}{row}")
        tokens = [statistics.median(results[(f"{sent_as}: tokens", s)]) for s in SHARES]
        print(
            f"  {'tokens the model reads back (median)':<44}"
            + "".join(f"{t:>8.0f}" for t in tokens)
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=None, help="only the first N chats")
    parser.add_argument("--limit", type=int, default=6, help="the look back's limit")
    args = parser.parse_args()
    asyncio.run(main(args.chats, args.limit))
