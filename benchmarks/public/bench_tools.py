"""Tool selection on ToolLens (COLT, quchangle1/COLT ``datasets/ToolLens/``): the product's picks
against the plain baselines, on queries no one here wrote.

Run: python -m benchmarks.public.bench_tools --data PATH/TO/COLT [--cache /tmp/sc-cache-tools]
     [--tune 300]   (or SMART_CONTEXT_COLT=PATH; no snapshot: it says where to get one, exits 0)

Data: ``corpus.jsonl`` (464 RapidAPI endpoints), ``queries.jsonl``, ``qrels/train.tsv`` and
``qrels/test.tsv`` (1,877 queries; most need 3 tools, some 2 or 1). Each endpoint becomes an MCP
tool as a server would list it: the server is the API (``tool_name`` as an identifier, e.g.
``worldwide_recipes``), the tool its endpoint (``api_name``: ``suggestions``), the description
``api_description``, and the input schema its required and optional parameters. The category
and the return schema are not part of an MCP tool list, so the product never sees them.

Split: **tune**, a fixed sample of ``--tune`` train queries (``random.Random(0)``): every setting
was chosen on it; **test**, every query of ``qrels/test.tsv``: never looked at to choose
anything. Both are printed.

Measured:

- **product**: what :func:`smart_context.items.request.build` (the request path's item step) sends
  with the default settings, run on a scratch vault holding the tools
  (:mod:`benchmarks.tool_picks`). recall@5: per query, the share of the tools it needs among the
  product's first 5 picks (a 3-tool query with 2 of them picked scores 2/3; the product may
  pick fewer than 5), averaged over queries; precision: the share of *all* the product's picks
  that are needed (no pick scores 0), averaged over queries; picks: their mean number;
- **baselines** (:mod:`benchmarks.public.baselines`), top 5, whole query: BM25 (bm25s), dense
  (cosine, one vector per tool, the same local model), hybrid (reciprocal-rank fusion of the
  two); each over two document texts: the corpus text as published (with category and return
  schema) and the MCP fields alone. The target is the best of the six.

On the tune part only: a sweep of the selection's settings through the same path.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.public.baselines import BM25, dense, rank, rrf
from benchmarks.public.snapshot import Snapshot, reported, snapshot
from benchmarks.tool_picks import CachedEmbedder, Key, Server, ToolVault, measure
from smart_context.mcp.client import ToolInfo
from smart_context.mcp.config import MAX_SERVER_NAME

ROOT = "datasets/ToolLens/"
TOP = 5
_HEAD = re.compile(
    r"category_name:(.*?), tool_name:(.*?), api_name:(.*?), api_description:", re.DOTALL
)
_TYPES = {"NUMBER": "number", "STRING": "string"}


@dataclass(frozen=True)
class Endpoint:
    """One corpus document: a RapidAPI endpoint."""

    id: str
    text: str  # as published
    api: str
    name: str
    description: str
    required: tuple[dict[str, Any], ...]
    optional: tuple[dict[str, Any], ...]

    def plain(self) -> str:
        """The MCP fields as one text: API, endpoint, description, parameters."""
        params = "; ".join(
            f"{p.get('name', '')}: {p.get('description', '')}".strip(": ")
            for p in self.required + self.optional
        )
        return f"{self.api} {self.name}: {self.description}" + (f" ({params})" if params else "")


def endpoint(document: dict[str, Any]) -> Endpoint:
    """A corpus line read into its fields (the parameters are JSON inside the text)."""
    text = document["text"]
    head = _HEAD.match(text)
    if head is None:
        raise ValueError(f"corpus document {document['_id']}: unexpected text {text[:80]!r}")
    rest = text[head.end() :]
    description, _, rest = rest.partition(", required_params: ")
    decoder = json.JSONDecoder()
    required, end = decoder.raw_decode(rest)
    optional, _ = decoder.raw_decode(rest[end:].removeprefix(", optional_params: "))
    return Endpoint(
        document["_id"],
        text,
        head.group(2).strip(),
        head.group(3).strip(),
        description.strip(),
        tuple(p for p in required if isinstance(p, dict)),
        tuple(p for p in optional if isinstance(p, dict)),
    )


def identifier(text: str, limit: int) -> str:
    """``text`` as an MCP name: lower-case words joined by ``_``, at most ``limit`` long."""
    words = re.findall(r"[a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text).lower())
    out = ""
    for word in words or ["api"]:
        joined = f"{out}_{word}" if out else word
        if len(joined) > limit:
            break
        out = joined
    return out or (words or ["api"])[0][:limit]


def mcp_servers(endpoints: Sequence[Endpoint]) -> tuple[list[Server], dict[str, Key]]:
    """The endpoints as MCP servers (one per API) and each endpoint's (server, tool) key."""
    by_server: dict[str, list[ToolInfo]] = {}
    keys: dict[str, Key] = {}
    for e in endpoints:
        server = identifier(e.api, MAX_SERVER_NAME)
        tools = by_server.setdefault(server, [])
        name = identifier(e.name, 62 - len(server))  # {server}__{tool}: at most 64
        taken = {t.name for t in tools}
        base, n = name, 2
        while name in taken:
            name, n = f"{base[: 60 - len(server)]}_{n}", n + 1
        properties = {
            str(p.get("name", "")): {
                "type": _TYPES.get(str(p.get("type", "")).upper(), "string"),
                "description": str(p.get("description", "")),
            }
            for p in e.required + e.optional
            if p.get("name")
        }
        schema = {
            "type": "object",
            "properties": properties,
            "required": [str(p["name"]) for p in e.required if p.get("name")],
        }
        tools.append(ToolInfo(name, e.description, schema))
        keys[e.id] = (server, name)
    return [Server(s, tuple(t)) for s, t in by_server.items()], keys


def qrels(data: Snapshot, split: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in data.text(f"{ROOT}qrels/{split}.tsv").splitlines()[1:]:
        query, document, score = line.split("\t")
        if float(score) > 0:
            out.setdefault(query, set()).add(document)
    return out


@dataclass
class Part:
    """The queries of one part: their text and the corpus ids each needs."""

    name: str
    texts: list[str]
    needed: list[set[str]]


def parts(data: Snapshot, tune_size: int) -> tuple[Part, Part]:
    queries = {}
    for line in data.text(f"{ROOT}queries.jsonl").splitlines():
        row = json.loads(line)
        queries[row["_id"]] = row["text"]
    train, test = qrels(data, "train"), qrels(data, "test")
    # a fixed sample, the same on every machine (not a secret: S311 does not apply)
    sample = random.Random(0).sample  # noqa: S311
    tune_ids = sample(sorted(train, key=int), min(tune_size, len(train)))
    test_ids = sorted(test, key=int)
    return (
        Part("tune", [queries[q] for q in tune_ids], [train[q] for q in tune_ids]),
        Part("test", [queries[q] for q in test_ids], [test[q] for q in test_ids]),
    )


Ranker = Callable[[int], list[int]]


def baseline_rankers(
    texts: Sequence[str], embedder: CachedEmbedder, queries: Sequence[str]
) -> dict[str, Ranker]:
    """BM25, dense and their RRF hybrid over ``texts``, each as query number -> top 5."""
    bm25 = BM25(texts)
    documents = embedder.embed_sync(list(texts))
    vectors = embedder.embed_sync(list(queries))

    def scores(i: int) -> tuple[np.ndarray, np.ndarray]:
        return bm25.scores(queries[i]), dense(documents, vectors[i])

    return {
        "BM25": lambda i: rank(scores(i)[0])[:TOP].tolist(),
        "dense": lambda i: rank(scores(i)[1])[:TOP].tolist(),
        "hybrid (RRF)": lambda i: rank(rrf(*scores(i)))[:TOP].tolist(),
    }


def row(name: str, figures: dict[str, dict[str, float]]) -> str:
    cells = "".join(
        f" {f['recall']:6.3f} {f['precision']:6.3f} {f['picks']:5.2f}" for f in figures.values()
    )
    return f"  {name:<46}{cells}"


def header(names: Sequence[str]) -> str:
    cells = "".join(f" {n + ' R@5':>6} {'P':>6} {'picks':>5}" for n in names)
    return f"  {'':<46}{cells}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", help="a checkout or bare mirror of quchangle1/COLT")
    cache = Path(tempfile.gettempdir()) / "sc-cache-tools"
    parser.add_argument("--cache", default=str(cache), help="vectors kept here, outside the repo")
    parser.add_argument("--tune", type=int, default=300, help="train queries to tune on")
    parser.add_argument("--sweep", action="store_true", help="also sweep settings on tune")
    args = parser.parse_args()
    data = snapshot("toollens", args.data)
    if data is None:
        return
    start = time.perf_counter()
    endpoints = [
        endpoint(json.loads(line)) for line in data.text(f"{ROOT}corpus.jsonl").splitlines()
    ]
    servers, keys = mcp_servers(endpoints)
    tune, test = parts(data, args.tune)
    embedder = CachedEmbedder(Path(args.cache))
    print(
        f"ToolLens: {len(endpoints)} tools ({len(servers)} MCP servers); tune {len(tune.texts)} "
        f"train queries, test {len(test.texts)} queries "
        f"({sum(len(n) == 3 for n in test.needed)} need 3 tools, "
        f"{sum(len(n) == 2 for n in test.needed)} 2, {sum(len(n) == 1 for n in test.needed)} 1)"
    )
    vault = ToolVault(servers, embedder)
    names = [p.name for p in (tune, test)]
    print(header(names))
    best = 0.0
    for label, texts in (
        ("published text", [e.text for e in endpoints]),
        ("MCP fields", [e.plain() for e in endpoints]),
    ):
        for name, figures in _baselines(label, texts, embedder, (tune, test), endpoints):
            print(row(name, figures))
            best = max(best, figures["test"]["recall"])
    product = {
        p.name: measure(vault.run(p.texts), [{keys[d] for d in n} for n in p.needed])
        for p in (tune, test)
    }
    print(row("product (request path, default settings)", product))
    print(
        f"test: best baseline {best:.3f}, target {best + 0.05:.3f}, product "
        f"{product['test']['recall']:.3f} ({product['test']['recall'] - best:+.3f})"
    )
    if args.sweep:
        sweep(vault, tune, keys)
    vault.close()
    print(
        f"{embedder.embedded} texts embedded this run (the rest from {args.cache}); "
        f"{time.perf_counter() - start:.0f} s"
    )


def _baselines(
    label: str,
    texts: Sequence[str],
    embedder: CachedEmbedder,
    parts_: Sequence[Part],
    endpoints: Sequence[Endpoint],
) -> list[tuple[str, dict[str, dict[str, float]]]]:
    """Each baseline's name and its figures on each part."""
    ids = [e.id for e in endpoints]
    by_part = {}
    for part in parts_:
        rankers = baseline_rankers(texts, embedder, part.texts)
        keyed = [
            [[ids[j] for j in ranker(i)] for i in range(len(part.texts))]
            for ranker in rankers.values()
        ]
        by_part[part.name] = {
            name: measure(picks, part.needed) for name, picks in zip(rankers, keyed, strict=True)
        }
    return [
        (f"{name}, {label}", {p: by_part[p][name] for p in by_part})
        for name in ("BM25", "dense", "hybrid (RRF)")
    ]


def sweep(vault: ToolVault, tune: Part, keys: dict[str, Key]) -> None:
    base = vault.limits[1]
    needed = [{keys[d] for d in n} for n in tune.needed]
    print("  sweep on tune (tool limits; R@5 P picks):")
    for change in (
        {"lexical_weight": 0.0},
        {"lexical_weight": 0.2},
        {"lexical_weight": 0.4},
        {"lexical_weight": 0.5},
        {"relative_floor": 0.0},
        {"relative_floor": 0.6},
        {"per_query": 1},
        {"absolute_floor": 0.0},
        {"absolute_floor": 0.15},
        {"absolute_floor": 0.25},
    ):
        figures = measure(vault.run(tune.texts, replace(base, **change)), needed)
        recall, precision, picks = figures["recall"], figures["precision"], figures["picks"]
        print(f"    {change}: {recall:.3f} {precision:.3f} {picks:.2f}")


if __name__ == "__main__":
    with reported():
        main()
