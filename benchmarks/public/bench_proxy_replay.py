"""Long real chats replayed through ``smart-context proxy``: the tokens it saves, and whether what
it sends still holds the answers.

Data: REALTALK (``data/Chat_*.json``, read as ``bench_history.py`` reads it): each chat is one
conversation, ``speaker_1`` as the user. A stateless client (the ``openai`` way) sends it to the
proxy whole with the chat's first question, then asks the chat's other questions one by one,
each time sending everything again: the chat, the questions so far and the answers. The proxy
runs in process on a fresh vault with the product's defaults (the local model, a budget of
8,000 tokens, offline topics and summaries); the upstream answers "OK" at once. Before each
question the background passes are waited for, as time between a person's messages allows.

Printed per part: the tokens the client sent against those the proxy sent upstream (from its
``X-Smart-Context`` header: the history as the product counts it), and the answer-evidence
recall of what went upstream, beside plain baselines given the same room (the tokens of the
chat's own messages the proxy sent): the last messages that fit, BM25, dense and hybrid (RRF),
best first (benchmarks/public/baselines.py). Nothing is tuned here.

    PYTHONPATH=. python benchmarks/public/bench_proxy_replay.py --data /path/to/REALTALK \\
        [--part report|tune|both] [--chats N] [--cache /tmp/sc-cache-history]
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
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.budget_recall import default_settings, ready_chat
from benchmarks.proxy_in_process import proxy_in_process
from benchmarks.public import baselines
from benchmarks.public.baselines import fill_by_rank
from benchmarks.public.bench_history import CACHE, PARTS, Chat, load
from benchmarks.public.snapshot import Snapshot, reported, snapshot
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.sidecar.runtime import Sidecar

MODEL = "gpt-4o"  # its tokenizer ships offline: the counts are exact
SETTINGS = '[plugins.smart_context]\ntopic_extractor = "offline"\n'
SENT = re.compile(r"sent ([\d,]+) of ([\d,]+) tokens")
METHODS = ("proxy", "last N", "BM25", "dense", "hybrid (RRF)")


class Upstream:
    """Answers "OK" at once, and keeps the messages of each request."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        import json

        self.bodies.append(json.loads(request.content))
        reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}}]}
        return httpx.Response(200, json=reply)


def sent_positions(chat: Chat, messages: list[dict[str, Any]]) -> list[int]:
    """The positions of the chat's own messages among those sent upstream, in order (the
    questions and answers after the chat, and summaries, are not the chat's)."""
    by_text: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(chat.messages):
        by_text[m["content"]].append(i)
    out, at = [], 0
    for message in messages:
        if message.get("role") not in ("user", "assistant"):
            continue
        later = [p for p in by_text.get(str(message.get("content")), []) if p >= at]
        if later:
            out.append(later[0])
            at = later[0] + 1
    return out


async def replay(chat: Chat, cache: Path, embedder: Any) -> dict[str, Any]:
    """One chat through the proxy: per question, the tokens and each method's recall."""
    results: dict[str, Any] = {"client": [], "sent": [], **{m: [] for m in METHODS}}
    async with ready_chat(
        f"realtalk-{chat.number}", chat.messages, cache, embedder, default_settings()
    ) as ready:
        n = len(chat.messages)
        bm25 = baselines.BM25([m["content"] for m in chat.messages])
        latest = list(range(n - 1, -1, -1))
        texts = [q.text for q in chat.questions]
        queries = await ready.queries(texts, cache)
        with tempfile.TemporaryDirectory() as tmp:
            vault = Path(tmp)
            (vault / ".vault.toml").write_text(SETTINGS, encoding="utf-8")
            upstream = Upstream()
            sidecar = Sidecar(vault)
            plugin = sidecar.pm.get_plugin("smart_context")
            history = [{"role": m["role"], "content": m["content"]} for m in chat.messages]
            headers = {"X-Smart-Context-Chat": f"realtalk-{chat.number}"}
            async with proxy_in_process(sidecar, upstream) as (proxy, client):
                assert isinstance(plugin, SmartContextPlugin) and plugin.services is not None
                for k, (question, query) in enumerate(zip(chat.questions, queries, strict=True)):
                    if k == 0:  # the first request stores the chat; its passes run meanwhile
                        await send(client, headers, [*history, _ask("Hello again!")])
                        history += [_ask("Hello again!"), {"role": "assistant", "content": "OK"}]
                    await proxy.settle()
                    await plugin.services.settle(timeout=3600)
                    history.append(_ask(question.text))
                    note = await send(client, headers, history)
                    history.append({"role": "assistant", "content": "OK"})
                    found = SENT.search(note)
                    if found is None:
                        raise RuntimeError(f"the proxy did not rebuild the request: {note}")
                    results["sent"].append(int(found[1].replace(",", "")))
                    results["client"].append(int(found[2].replace(",", "")))
                    kept = set(sent_positions(chat, upstream.bodies[-1]["messages"]))
                    room = int(sum(int(ready.tokens[p]) for p in kept))
                    lexical = bm25.scores(question.text)
                    dense = baselines.dense(ready.vectors, query) if len(query) else np.zeros(n)
                    chosen = {
                        "proxy": kept,
                        "last N": fill_by_rank(latest, ready.tokens, room),
                        "BM25": fill_by_rank(baselines.rank(lexical).tolist(), ready.tokens, room),
                        "dense": fill_by_rank(baselines.rank(dense).tolist(), ready.tokens, room),
                        "hybrid (RRF)": fill_by_rank(
                            baselines.rank(baselines.rrf(lexical, dense)).tolist(),
                            ready.tokens,
                            room,
                        ),
                    }
                    for method, taken in chosen.items():
                        results[method].append(
                            len(question.evidence & taken) / len(question.evidence)
                        )
    return results


def _ask(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


async def send(client: httpx.AsyncClient, headers: dict[str, str], messages: list[Any]) -> str:
    answer = await client.post(
        "/v1/chat/completions", json={"model": MODEL, "messages": messages}, headers=headers
    )
    answer.raise_for_status()
    note: str = answer.headers.get("x-smart-context", "")
    return note


def report(name: str, chats: list[Chat], found: dict[str, list[Any]]) -> None:
    client, sent = sum(found["client"]), sum(found["sent"])
    numbers = ", ".join(str(c.number) for c in chats)
    print(
        f"{name} part (chats {numbers}): {len(found['sent'])} questions; tokens the client sent "
        f"{client:,}, the proxy sent {sent:,} ({1 - sent / client:.1%} saved, "
        f"{client / sent:.1f}x fewer); answer-evidence recall at the same room:"
    )
    for method in METHODS:
        print(f"  {method:<14}{statistics.mean(found[method]):>8.3f}")


async def main(source: Snapshot, part: str, cache: Path, limit: int | None) -> None:
    from smart_context.embeddings.local import shared_local_model

    chats = load(source, part)[:limit]
    embedder = shared_local_model()
    start = time.perf_counter()
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; REALTALK replayed "
        "through the proxy (default settings: budget 8,000 tokens)"
    )
    by_part: dict[str, dict[str, list[Any]]] = {}
    for chat in chats:
        name = next(p for p, numbers in PARTS.items() if chat.number in numbers)
        found = await replay(chat, cache, embedder)
        for key, values in found.items():
            by_part.setdefault(name, defaultdict(list))[key].extend(values)
        took = time.perf_counter() - start
        print(f"  chat {chat.number}: {len(chat.questions)} questions ({took:.0f} s)")
    for name in PARTS:
        if name in by_part:
            report(name, [c for c in chats if c.number in PARTS[name]], by_part[name])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="REALTALK: a checkout or a bare mirror")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where vectors are kept")
    parser.add_argument("--part", choices=("tune", "report", "both"), default="report")
    parser.add_argument("--chats", type=int, default=None, help="only the first N chats")
    args = parser.parse_args()
    found = snapshot("realtalk", args.data)
    if found is None:
        sys.exit(0)
    args.cache.mkdir(parents=True, exist_ok=True)
    with reported():
        asyncio.run(main(found, args.part, args.cache, args.chats))
