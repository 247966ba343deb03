"""Tool selection quality on a labelled set (issue 10): which parts of the method earn their place.

Run: python benchmarks/bench_tool_selection.py

``benchmarks/data/tools.json`` holds 348 tools of 33 MCP servers, ``tool_queries.json`` 300
chat messages with the tools each needs (98 need two or three). Every tool is embedded with
the local model (all-MiniLM-L6-v2); each message picks 5 tools. Reported: recall@5 (the share
of a message's needed tools among its 5), for single- and multi-tool messages, per variant:

- ``name + description, whole message``: the plain similarity search;
- ``+ server and parameters``: the index text also names the server and the parameters;
- ``+ sentence chunks (max pooling)``: the message is split into sentences, each tool scored by
  its best sentence;
- ``+ each sentence's best first``: the minimum representation of
  :mod:`smart_context.items.select` (the default).
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from smart_context.embeddings.local import shared_local_model
from smart_context.items.chunks import chunk, index_text, query_chunks
from smart_context.items.select import Limits, select
from smart_context.items.tools import tool_item

DATA = Path(__file__).resolve().parent / "data"
TOP = 5


def plain_text(server: dict[str, Any], tool: dict[str, Any]) -> str:
    return f"{tool['name']}: {tool.get('description', '')}"


def tool_chunks(server: dict[str, Any], tool: dict[str, Any]) -> list[str]:
    """The chunks the package indexes for a tool: server, name, description, parameters."""
    item = tool_item(server["name"], tool["name"], tool.get("description"), tool.get("inputSchema"))
    return chunk(index_text(item))


def main() -> None:
    servers = json.loads((DATA / "tools.json").read_text())
    queries = json.loads((DATA / "tool_queries.json").read_text())
    tools = [(s, t) for s in servers for t in s["tools"]]
    keys = [(s["name"], t["name"]) for s, t in tools]
    model = shared_local_model()
    start = time.perf_counter()
    plain = np.asarray(model.embed_sync([plain_text(s, t) for s, t in tools]), dtype=np.float32)
    parts = [tool_chunks(s, t) for s, t in tools]
    rich = np.asarray(model.embed_sync([c for p in parts for c in p]), dtype=np.float32)
    indexing = time.perf_counter() - start
    owner = np.repeat(np.arange(len(tools)), [len(p) for p in parts])
    whole = np.asarray(model.embed_sync([q["query"] for q in queries]), dtype=np.float32)
    split = [query_chunks(q["query"]) or [q["query"]] for q in queries]
    flat = [s for parts in split for s in parts]
    sent_vectors = np.asarray(model.embed_sync(flat), dtype=np.float32)
    bounds = np.cumsum([0] + [len(p) for p in split])
    one_each = np.arange(len(tools))

    def picks(
        index: np.ndarray, owners: np.ndarray, query: np.ndarray, per_query: int
    ) -> list[tuple[str, str]]:
        limits = Limits(top_k=20, top_n=TOP, include_score=2.0, per_query=per_query)
        chosen = select(query @ index.T, owners, len(tools), limits)
        return [keys[c.item] for c in chosen]

    def sentences_of(i: int) -> np.ndarray:
        return sent_vectors[bounds[i] : bounds[i + 1]]

    variants = {
        "name + description, whole message": lambda i: picks(plain, one_each, whole[i : i + 1], 0),
        "+ server and parameters": lambda i: picks(rich, owner, whole[i : i + 1], 0),
        "+ sentence chunks (max pooling)": lambda i: picks(rich, owner, sentences_of(i), 0),
        "+ each sentence's best first": lambda i: picks(rich, owner, sentences_of(i), 1),
    }
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; {len(tools)} tools "
        f"in {len(servers)} servers, {len(queries)} messages "
        f"({sum(q['kind'] == 'multi' for q in queries)} need 2-3 tools); 5 picks each"
    )
    print(f"indexing both texts of every tool: {indexing:.1f} s")
    print(f"  {'variant':<36} {'all':>6} {'single':>7} {'multi':>6}")
    for name, run in variants.items():
        recall: dict[str, list[float]] = {"single": [], "multi": []}
        for i, q in enumerate(queries):
            got = set(run(i))
            need = {tuple(n) for n in q["needed"]}
            recall[q["kind"]].append(len(need & got) / len(need))
        every = recall["single"] + recall["multi"]
        print(
            f"  {name:<36} {statistics.mean(every):6.3f} {statistics.mean(recall['single']):7.3f}"
            f" {statistics.mean(recall['multi']):6.3f}"
        )


def latency(items: int = 1000, chunks: int = 5000, sentences: int = 3) -> None:
    """Selection over 1,000 items in 5,000 chunks for a 3-sentence message, vectors warm."""
    rng = np.random.default_rng(0)
    index = rng.standard_normal((chunks, 384)).astype(np.float32)
    index /= np.linalg.norm(index, axis=1, keepdims=True)
    owner = np.sort(rng.integers(0, items, chunks))
    query = index[rng.integers(0, chunks, sentences)] + 0.1
    times = []
    for _ in range(200):
        start = time.perf_counter()
        select(query @ index.T, owner, items, Limits())
        times.append(time.perf_counter() - start)
    print(
        f"selection, {items} items / {chunks} chunks, {sentences}-sentence message: "
        f"median {statistics.median(times) * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
    latency()
