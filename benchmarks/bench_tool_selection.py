"""Tool selection quality on a labelled set: which parts of the method earn their place.

Run: python benchmarks/bench_tool_selection.py [--latency]

``benchmarks/data/tools.json`` holds 348 tools of 33 MCP servers, ``tool_queries.json`` 300
chat messages with the tools each needs (98 need two or three). Every tool is embedded with
the local model (all-MiniLM-L6-v2); each message picks 5 tools. Reported per variant: recall@5
(the share of a message's needed tools among its picks) and precision@5 (the share of the picks
that are needed; at most 0.2 for a one-tool message), for single- and multi-tool messages, and
on the two halves of a fixed split: **tune** (messages 0, 1, 3, 4, 6, ...: what the defaults
and the hybrid's weight were chosen on) and **held-out** (every third message, 2, 5, 8, ...:
never looked at to choose anything). A default that only wins on *tune* is overfit.

- ``name + description, whole message``: the plain similarity search;
- ``+ server and parameters``: the index text also names the server and the parameters (dense);
- ``+ sentence chunks (max pooling)``: the message is split into sentences, each tool scored by
  its best sentence (dense + query chunking: the default path);
- ``+ each sentence's best first``: the minimum representation of
  :mod:`smart_context.items.select` (``per_query = 1``);
- ``hybrid``: cosine fused with BM25 (:mod:`smart_context.items.lexical`), whole message and
  sentence chunks; the weight is the best of a sweep on *tune*, printed first; ``RRF`` is
  reciprocal rank fusion instead of the weighted sum;
- ``+ expansion``: the default path, then context expansion (:mod:`smart_context.items.expand`)
  with its documented defaults (one pass, 0.75, 3 items) and a few other settings: the picks are
  then more than 5, and recall and precision are over all of them;
- ``product``: what the request path sends (:mod:`benchmarks.tool_picks`: the tools in a
  scratch vault, :func:`smart_context.items.request.build` with the default settings), which
  may be fewer than 5 or, past ``include_score``, more; recall over its first 5.

Then the dry-run-like latency of a selection over 500 tools (the 348, and 152 of them again
under other server names): one 3-sentence message, warm, median of 50 (``--latency``: only
that).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.tool_picks import CachedEmbedder, Server, ToolVault, measure
from smart_context.embeddings.local import shared_local_model
from smart_context.items.chunks import chunk, query_chunks
from smart_context.items.expand import expand, relationship_graph
from smart_context.items.lexical import SATURATION, LexicalIndex, fuse, reciprocal_rank_fusion
from smart_context.items.model import index_text
from smart_context.items.select import TOOL_FLOOR, Limits, select
from smart_context.items.tools import tool_item
from smart_context.mcp.client import ToolInfo

DATA = Path(__file__).resolve().parent / "data"
TOP = 5
# 5 picks (fewer only past the floors), as the product picks tools
PICK_FIVE = Limits(top_k=20, top_n=TOP, include_score=2.0, absolute_floor=TOOL_FLOOR)
WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
SATURATIONS = (2.0, 4.0, 8.0, 16.0, 32.0)
MESSAGE = (
    "The deploy of the payments service failed again last night. Find the failing pipeline "
    "run and read its logs. Then open an issue for it and let the on-call channel know."
)

Picks = Callable[[int], list[int]]


def held_out(i: int) -> bool:
    """Every third message (2, 5, 8, ...) is held out: never used to choose a setting."""
    return i % 3 == 2


def plain_text(server: dict[str, Any], tool: dict[str, Any]) -> str:
    return f"{tool['name']}: {tool.get('description', '')}"


def tool_chunks(server_name: str, tool: dict[str, Any]) -> list[str]:
    """The chunks the package indexes for a tool: server, name, description, parameters."""
    item = tool_item(server_name, tool["name"], tool.get("description"), tool.get("inputSchema"))
    return chunk(index_text(item))


class Bench:
    """The tool set embedded once, and every variant as a function of a message's number."""

    def __init__(self, servers: list[dict[str, Any]], queries: list[dict[str, Any]]) -> None:
        self.queries = queries
        self.model = CachedEmbedder(None)  # kept in memory: the product's row embeds nothing new
        tools = [(s, t) for s in servers for t in s["tools"]]
        self.keys = [(s["name"], t["name"]) for s, t in tools]
        self.n = len(tools)
        start = time.perf_counter()
        self.plain = self.embed([plain_text(s, t) for s, t in tools])
        parts = [tool_chunks(s["name"], t) for s, t in tools]
        texts = [c for p in parts for c in p]
        self.rich = self.embed(texts)
        self.indexing = time.perf_counter() - start
        self.owner = np.repeat(np.arange(self.n), [len(p) for p in parts])
        self.lexical = LexicalIndex.build(texts)
        self.graph = relationship_graph(self.rich, self.owner, self.n)
        self.whole_text = [[q["query"]] for q in queries]
        self.split_text = [query_chunks(q["query"]) or [q["query"]] for q in queries]
        self.whole = self.embed([q["query"] for q in queries])
        flat = [s for p in self.split_text for s in p]
        vectors = self.embed(flat)
        bounds = np.cumsum([0] + [len(p) for p in self.split_text])
        self.sentences = [vectors[bounds[i] : bounds[i + 1]] for i in range(len(queries))]
        self.lex_whole = [self.lexical.scores(t) for t in self.whole_text]
        self.lex_split = [self.lexical.scores(t) for t in self.split_text]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.embed_sync(texts), dtype=np.float32)

    def dense(self, i: int, split: bool) -> np.ndarray:
        query = self.sentences[i] if split else self.whole[i : i + 1]
        scores: np.ndarray = query @ self.rich.T
        return scores

    def pick(self, scores: np.ndarray, limits: Limits = PICK_FIVE) -> list[int]:
        return [c.item for c in select(scores, self.owner, self.n, limits)]

    def hybrid(self, split: bool, weight: float, saturation: float) -> Picks:
        lex = self.lex_split if split else self.lex_whole
        return lambda i: self.pick(fuse(self.dense(i, split), lex[i], weight, saturation))

    def rrf(self, i: int) -> list[int]:
        scores = reciprocal_rank_fusion(self.dense(i, True), self.lex_split[i])
        return self.pick(scores, replace(PICK_FIVE, absolute_floor=0.0))  # ranks, not scores

    def expanded(self, first: Picks, limits: Limits) -> Picks:
        every = np.ones(self.n, dtype=np.bool_)

        def run(i: int) -> list[int]:
            found = first(i)
            return found + [e.item for e in expand(self.graph, found, every, limits)]

        return run

    def measure(
        self, run: Picks, which: Callable[[int], bool] = lambda i: True, every_pick: bool = False
    ) -> dict[str, float]:
        """Recall and precision of ``run`` over the messages ``which`` keeps, by kind
        (:func:`benchmarks.tool_picks.measure`); recall over the first 5 picks, or over all of
        them with ``every_pick``."""
        rows = [i for i in range(len(self.queries)) if which(i)]
        picks = [[self.keys[p] for p in run(i)] for i in rows]
        needed = [{(s, t) for s, t in self.queries[i]["needed"]} for i in rows]
        kinds = [self.queries[i]["kind"] for i in rows]
        return measure(picks, needed, kinds, k=None if every_pick else TOP)


def tune_hybrid(bench: Bench, split: bool) -> tuple[float, float]:
    """The weight and saturation with the best recall@5 on the *tune* messages."""
    best = max(
        ((w, s) for w in WEIGHTS for s in SATURATIONS),
        key=lambda ws: bench.measure(bench.hybrid(split, *ws), lambda i: not held_out(i))["recall"],
    )
    return best


def report(bench: Bench, variants: dict[str, Picks]) -> None:
    print(
        f"  {'variant':<44} {'R@5':>5} {'P@5':>5} {'R sgl':>5} {'R mlt':>5} {'P sgl':>5} "
        f"{'P mlt':>5} {'R tune':>6} {'R held':>6} {'P held':>6} {'picks':>5}"
    )
    for name, run in variants.items():
        over_all = "expansion" in name  # more than 5 picks: recall over all of them
        every = bench.measure(run, every_pick=over_all)
        tune = bench.measure(run, lambda i: not held_out(i), over_all)
        held = bench.measure(run, held_out, over_all)
        print(
            f"  {name:<44} {every['recall']:5.3f} {every['precision']:5.3f} "
            f"{every['single recall']:5.3f} {every['multi recall']:5.3f} "
            f"{every['single precision']:5.3f} {every['multi precision']:5.3f} "
            f"{tune['recall']:6.3f} {held['recall']:6.3f} {held['precision']:6.3f} "
            f"{every['picks']:5.2f}"
        )


def product(bench: Bench, servers: list[dict[str, Any]]) -> Picks:
    """The request path's picks for each message, as positions in the bench's tool list."""
    vault = ToolVault(
        [
            Server(
                s["name"],
                tuple(
                    ToolInfo(t["name"], t.get("description", ""), t.get("inputSchema") or {})
                    for t in s["tools"]
                ),
            )
            for s in servers
        ],
        bench.model,
    )
    place = {key: i for i, key in enumerate(bench.keys)}
    picks = vault.run([q["query"] for q in bench.queries])
    vault.close()
    return lambda i: [place[key] for key in picks[i]]


def main() -> None:
    servers = json.loads((DATA / "tools.json").read_text())
    queries = json.loads((DATA / "tool_queries.json").read_text())
    bench = Bench(servers, queries)
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; {bench.n} tools "
        f"in {len(servers)} servers, {len(queries)} messages "
        f"({sum(q['kind'] == 'multi' for q in queries)} need 2-3 tools; "
        f"{sum(held_out(i) for i in range(len(queries)))} held out); 5 picks each"
    )
    print(f"indexing both texts of every tool: {bench.indexing:.1f} s")
    whole_ws, split_ws = tune_hybrid(bench, False), tune_hybrid(bench, True)
    print(
        f"hybrid tuned on the tune messages (weight, saturation): whole message {whole_ws}, "
        f"sentence chunks {split_ws}"
    )
    default = replace(Limits(), absolute_floor=TOOL_FLOOR)  # the product's tool limits
    weight = default.lexical_weight
    one_each = np.arange(bench.n)

    def plain(i: int) -> list[int]:
        scores = bench.whole[i : i + 1] @ bench.plain.T
        return [c.item for c in select(scores, one_each, bench.n, PICK_FIVE)]

    chosen = bench.hybrid(True, weight, SATURATION)
    variants: dict[str, Picks] = {
        "name + description, whole message": plain,
        "+ server and parameters (dense)": lambda i: bench.pick(bench.dense(i, False)),
        "+ sentence chunks (dense + query chunking)": lambda i: bench.pick(bench.dense(i, True)),
        "+ each sentence's best first": lambda i: bench.pick(
            bench.dense(i, True), replace(PICK_FIVE, per_query=1)
        ),
        f"hybrid {weight}/{SATURATION:g}, whole message": bench.hybrid(False, weight, SATURATION),
        f"hybrid {weight}/{SATURATION:g} + sentence chunks [default]": chosen,
        f"hybrid {whole_ws[0]}/{whole_ws[1]:g}, whole message": bench.hybrid(False, *whole_ws),
        "RRF (k=60) + sentence chunks": bench.rrf,
    }
    for depth, threshold, top_n in ((1, 0.75, 3), (1, 0.8, 1), (1, 0.7, 3), (2, 0.75, 3)):
        limits = replace(
            default, expansion_depth=depth, expansion_threshold=threshold, expansion_top_n=top_n
        )
        variants[f"default + expansion ({depth}, {threshold}, {top_n})"] = bench.expanded(
            chosen, limits
        )
    variants["dense + chunks + expansion (1, 0.75, 3)"] = bench.expanded(
        lambda i: bench.pick(bench.dense(i, True)), replace(default, expansion_depth=1)
    )
    variants["product (request path, default settings)"] = product(bench, servers)
    report(bench, variants)
    latency(servers)


def latency(servers: list[dict[str, Any]], n_tools: int = 500, runs: int = 50) -> None:
    """A dry run's selection over 500 tools for a 3-sentence message, warm: the message embedded
    with the local model; then cosine only, the default (cosine + BM25) and expansion after it."""
    tools = [(s["name"], t) for s in servers for t in s["tools"]]
    extra = [(f"{s}_mirror", t) for s, t in tools[: n_tools - len(tools)]]
    parts = [tool_chunks(s, t) for s, t in tools + extra]
    texts = [c for p in parts for c in p]
    model = shared_local_model()
    index = np.asarray(model.embed_sync(texts), dtype=np.float32)
    owner = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    start = time.perf_counter()
    lexical = LexicalIndex.build(texts)
    lexical_time = time.perf_counter() - start
    graph = relationship_graph(index, owner, len(parts))
    graph_time = time.perf_counter() - start - lexical_time
    sentences = query_chunks(MESSAGE)
    every = np.ones(len(parts), dtype=np.bool_)
    limits = Limits(expansion_depth=1)
    steps: dict[str, list[float]] = {"embed": [], "cosine": [], "default": [], "expand": []}
    for _ in range(runs + 5):
        t0 = time.perf_counter()
        queries = np.asarray(model.embed_sync(sentences), dtype=np.float32)
        t1 = time.perf_counter()
        select(queries @ index.T, owner, len(parts), limits)
        t2 = time.perf_counter()
        scores = fuse(queries @ index.T, lexical.scores(sentences), limits.lexical_weight)
        found = [c.item for c in select(scores, owner, len(parts), limits)]
        t3 = time.perf_counter()
        expand(graph, found, every, limits)
        t4 = time.perf_counter()
        for name, took in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            steps[name].append(took)
    ms = {k: statistics.median(v[5:]) * 1000 for k, v in steps.items()}
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
        f"dry-run selection, {len(parts)} tools / {len(index)} chunks, {len(sentences)}-sentence "
        f"message, median of {runs} warm:\n  embed the message {ms['embed']:.1f} ms; "
        f"cosine + select {ms['cosine']:.2f} ms; default (cosine + BM25 + select) "
        f"{ms['default']:.2f} ms; expansion after it {ms['expand']:.3f} ms\n"
        f"  built once per catalog: BM25 index {lexical_time * 1000:.0f} ms, "
        f"relationship graph {graph_time * 1000:.0f} ms"
    )


if __name__ == "__main__":
    if "--latency" in sys.argv[1:]:  # the timing alone, to repeat it when the machine is quiet
        latency(json.loads((DATA / "tools.json").read_text()))
    else:
        main()
