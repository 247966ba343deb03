"""Does the history kept under a token budget hold what a question about a long real chat needs?

Data: REALTALK (https://github.com/danny911kr/REALTALK, ``data/Chat_*.json`` only): 10 chats of
two people over weeks (8,944 messages), with 728 questions in LoCoMo's format, each naming the
messages that hold its answer (``evidence``: dialogue ids such as "D3:18"; a few strings hold
several, or a range, and those are read too; ids not in the chat are dropped, and a question left
with none is skipped).

Each chat becomes one history: its sessions in order, ``speaker_1`` as "user" and ``speaker_2``
as "assistant" (consecutive messages of one speaker stay as they are). For each question, the
question is the current message, the whole chat is the history, and the budget is 5% and 10% of
the chat's tokens as the product counts them (gpt-4o's tokenizer, each message's role and
framing included). The figure is evidence recall: the share of a question's evidence messages
inside what is sent, averaged over questions.

Methods, all given the same room (the budget less the question) and paying the same per-message
cost:

- ``smart context``: the product's budget through its request path (``Budgeter.fit``) with its
  default settings: recent messages, hybrid search with turns, offline summaries, importance;
- ``last N``: the most recent messages that fit;
- ``BM25`` (bm25s), ``dense`` (cosine with the product's local model, the question's sentences
  as queries, the best), ``hybrid (RRF)`` (the two fused by reciprocal rank): best first while
  they fit;
- ``hybrid + neighbours``: the same, each message taken bringing the one before and after it;
- ``hybrid in turns``: the same, each message taken bringing its partner in the turn order the
  product keeps (the nearest message of the other role: a question its answer, an answer its
  question), or skipped with it when the pair does not fit. The product sends nothing else:
  this is the plain baseline that pays what the product pays for alternating turns.

Split: settings are tuned on chats 1-5 (``tune``) and the figures reported on chats 6-10
(``report``), never tuned on; both are printed. ``--setting KEY=VALUE`` runs the product with a
setting changed, to try one on the tune part.

Messages and questions are embedded once by the real local model (all-MiniLM-L6-v2 int8) and
kept in ``--cache`` (outside the repository), so a second run embeds nothing.

    PYTHONPATH=. python benchmarks/public/bench_history.py --data /path/to/REALTALK \\
        [--cache /tmp/sc-cache-history] [--part tune|report|both] [--setting KEY=VALUE ...]

(``--data`` may be a checkout or a bare mirror; else ``SMART_CONTEXT_REALTALK``.)
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.budget_recall import ReadyChat, default_settings, ready_chat
from benchmarks.public import baselines
from benchmarks.public.baselines import fill_by_rank, fill_with_partners
from benchmarks.public.snapshot import Snapshot, reported, snapshot
from smart_context.turns import partners, role_codes

SHARES = (0.05, 0.10)
PARTS = {"tune": range(1, 6), "report": range(6, 11)}
METHODS = (
    "smart context",
    "last N",
    "BM25",
    "dense",
    "hybrid (RRF)",
    "hybrid + neighbours",
    "hybrid in turns",
)
CACHE = Path(tempfile.gettempdir()) / "sc-cache-history"
_CHAT_FILE = re.compile(r"data/Chat_(\d+)_[^/]*\.json")
# "D3:18", also as written in a few strings: "D 2:18", "D17;39", a range "D12:3-D12:5"
_ID = re.compile(r"D\s*(\d+)\s*[:;]\s*(\d+)(?:\s*-\s*D\s*(\d+)\s*:\s*(\d+))?")


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[int]  # positions in the history


@dataclass(frozen=True)
class Chat:
    number: int
    messages: list[dict[str, Any]]
    questions: list[Question]
    skipped: int  # questions without evidence found in the chat


def evidence_ids(strings: list[str]) -> list[str]:
    """The dialogue ids named by a question's evidence strings."""
    out: list[str] = []
    for text in strings:
        for session, turn, end_session, end_turn in _ID.findall(str(text)):
            if end_turn and end_session == session:
                out.extend(f"D{session}:{t}" for t in range(int(turn), int(end_turn) + 1))
            else:
                out.append(f"D{session}:{turn}")
    return out


def history_of(number: int, data: dict[str, Any]) -> Chat:
    """One REALTALK chat as a history and its questions (module docstring)."""
    sessions = sorted(
        (k for k in data if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
    )
    user = data["name"]["speaker_1"]
    messages = [
        {
            "id": m["dia_id"],
            "role": "user" if m["speaker"] == user else "assistant",
            "content": m["clean_text"],
        }
        for key in sessions
        for m in data[key]
    ]
    position = {m["id"]: i for i, m in enumerate(messages)}
    questions, skipped = [], 0
    for qa in data["qa"]:
        named = evidence_ids(qa.get("evidence", []))
        found = frozenset(position[e] for e in named if e in position)
        if found:
            questions.append(Question(str(qa["question"]), found))
        else:
            skipped += 1
    return Chat(number, messages, questions, skipped)


def load(source: Snapshot, part: str) -> list[Chat]:
    """The chats of ``part`` (``both``: every chat), in order of their number."""
    wanted = [n for name, numbers in PARTS.items() if part in (name, "both") for n in numbers]
    found = {}
    for path in source.files("data/"):
        match = _CHAT_FILE.fullmatch(path)
        if match and int(match[1]) in wanted:
            found[int(match[1])] = history_of(int(match[1]), source.json(path))
    return [found[n] for n in sorted(found)]


async def run_chat(
    chat: Chat, ready: ReadyChat, cache: Path
) -> dict[tuple[str, float], list[float]]:
    """Every question's evidence recall, per (method, share)."""
    out: dict[tuple[str, float], list[float]] = defaultdict(list)
    n = len(chat.messages)
    bm25 = baselines.BM25([m["content"] for m in chat.messages])
    texts = [q.text for q in chat.questions]
    latest = list(range(n - 1, -1, -1))
    codes = role_codes(chat.messages)
    partner = partners(codes, np.arange(n, dtype=np.intp)).tolist()
    for question, queries in zip(chat.questions, await ready.queries(texts, cache), strict=True):
        lexical = bm25.scores(question.text)
        dense = baselines.dense(ready.vectors, queries) if len(queries) else np.zeros(n)
        orders = {
            "BM25": baselines.rank(lexical).tolist(),
            "dense": baselines.rank(dense).tolist(),
            "hybrid (RRF)": baselines.rank(baselines.rrf(lexical, dense)).tolist(),
        }
        for share in SHARES:
            kept, room = await ready.fit(question.text, int(share * ready.total), queries)
            chosen = {"smart context": kept, "last N": fill_by_rank(latest, ready.tokens, room)}
            for method, order in orders.items():
                chosen[method] = fill_by_rank(order, ready.tokens, room)
            chosen["hybrid + neighbours"] = fill_by_rank(
                orders["hybrid (RRF)"], ready.tokens, room, neighbours=1
            )
            chosen["hybrid in turns"] = fill_with_partners(
                orders["hybrid (RRF)"], ready.tokens, room, partner
            )
            for method, taken in chosen.items():
                recall = len(question.evidence & taken) / len(question.evidence)
                out[(method, share)].append(recall)
    return out


def report(name: str, chats: list[Chat], results: dict[tuple[str, float], list[float]]) -> None:
    questions = sum(len(c.questions) for c in chats)
    skipped = sum(c.skipped for c in chats)
    messages = sum(len(c.messages) for c in chats)
    numbers = ", ".join(str(c.number) for c in chats)
    print(
        f"{name} part (chats {numbers}): {messages:,} messages, {questions} questions "
        f"({skipped} without evidence in the chat, skipped)"
    )
    print(f"  {'method':<22}" + "".join(f"{f'{s:.0%}':>8}" for s in SHARES))
    for method in METHODS:
        row = "".join(f"{statistics.mean(results[(method, s)]):>8.3f}" for s in SHARES)
        print(f"  {method:<22}{row}")


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as settings (numbers read as numbers)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


async def main(source: Snapshot, part: str, cache: Path, changes: dict[str, Any]) -> None:
    from smart_context.embeddings.local import shared_local_model

    chats = load(source, part)
    embedder = shared_local_model()
    settings = default_settings(**changes)
    start = time.perf_counter()
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; REALTALK, "
        f"evidence recall under a budget of a share of the chat's tokens"
        + (f"; settings changed: {changes}" if changes else "; default settings")
    )
    by_part: dict[str, dict[tuple[str, float], list[float]]] = {}
    for chat in chats:
        name = next(p for p, numbers in PARTS.items() if chat.number in numbers)
        async with ready_chat(
            f"realtalk-{chat.number}", chat.messages, cache, embedder, settings
        ) as ready:
            found = await run_chat(chat, ready, cache)
        for key, values in found.items():
            by_part.setdefault(name, defaultdict(list))[key].extend(values)
    for name in PARTS:
        if name in by_part:
            report(name, [c for c in chats if c.number in PARTS[name]], by_part[name])
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="REALTALK: a checkout or a bare mirror")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where vectors are kept")
    parser.add_argument("--part", choices=("tune", "report", "both"), default="both")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.setting and args.part != "tune":
        parser.error("a --setting is tried on the tune part only: add --part tune")
    found = snapshot("realtalk", args.data)
    if found is None:
        sys.exit(0)
    args.cache.mkdir(parents=True, exist_ok=True)
    with reported():
        asyncio.run(main(found, args.part, args.cache, parse_settings(args.setting)))
