"""Context-based expansion: the items the found items lead to, pure numpy.

A message does not always name everything its answer needs: "how do I authenticate?" finds
the authentication rule, and the rule says to fetch an endpoint, which the message never
mentioned. After agent selection (the first pass), expansion adds the items whose chunks are
close to the chunks of what was found:

- **The relationship graph** ("pre-computed context relationships"):
  ``graph[a, b]`` is the best cosine between any chunk of item ``a`` and any chunk of item
  ``b`` (max pooling, as the first pass pools query chunks). It is computed once per catalog
  from the chunk vectors the search already holds, block by block so 5,000 chunks never make a
  5,000 x 5,000 matrix, and kept with them (``benchmarks/bench_item_index.py`` times it); a
  request only reads rows of it. Reading row ``a``
  gives exactly what a two-pass search computes for a found item ``a`` (its chunks as
  queries, max-pooled over every other chunk), without scoring a chunk again.
- **Passes**: pass 1 starts from the items the message found; each item not yet chosen scores
  its best link to them; those at or above ``expansion_threshold`` are added, at most
  ``expansion_top_n``, best first. Pass 2 starts from what pass 1 added, and so on for
  ``expansion_depth`` passes (0: off, the default). An item is never added twice, so a cycle
  in the graph ends the walk instead of looping.
- **Who may be added**: the caller says (``candidates``); the catalog offers its enabled
  ``agent`` and ``expansion`` items. An ``expansion`` item is only ever reached this way: it is
  for the tool or reference that matters *because of* another item, not because of the words of
  a message.

Limits are :class:`smart_context.items.select.Limits` (docs/contract.md §8:
``context_expansion_depth`` 0, ``context_expansion_threshold`` 0.75, ``context_expansion_top_n`` 3).
Measured on the
labelled tool set (``benchmarks/bench_tool_selection.py``) after the default selection: one
pass at 0.75 / 3 adds 0.97 tools per message and takes recall 0.623 -> 0.632 (multi-tool
messages 0.498 -> 0.527; held-out third 0.675 -> 0.678) while precision falls 0.163 -> 0.147.
A small gain for its tokens, so it stays off unless a vault asks for it: it is meant for items
that matter because of another item, which that set does not label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smart_context.items.select import IntArray, Limits, Matrix

BoolArray = npt.NDArray[np.bool_]
BLOCK = 1024  # chunk rows per matrix product: 1,024 x 5,000 float32 is 20 MB


@dataclass(frozen=True)
class Expanded:
    """An item expansion added: its index, its link score, the item that led to it (``via``)
    and the pass that added it (1 for the first)."""

    item: int
    score: float
    via: int
    depth: int


def relationship_graph(index: Matrix, owner: IntArray, n_items: int, block: int = BLOCK) -> Matrix:
    """``(items, items)``: the best cosine between a chunk of one item and a chunk of another.

    ``index`` holds unit chunk vectors, ``owner[c]`` the item of chunk ``c`` (in any order). The
    diagonal, and every link of an item without chunks, is ``-1``: an item never leads to
    itself.
    """
    graph = np.full((n_items, n_items), -1.0, dtype=np.float32)
    counts = np.bincount(owner, minlength=n_items)
    if not counts.any():
        return graph
    present, runs, vectors = _by_chunk_count(index, owner, counts)

    def pool_columns(sims: Matrix) -> Matrix:
        """Each item's best column; a run's columns are its items' first chunks, then their
        second chunks...: the max of ``k`` slabs, not of many short rows (10x faster)."""
        return np.concatenate(
            [
                sims[:, col : col + k * (b - a)].reshape(len(sims), k, b - a).max(axis=1)
                for k, a, b, col in runs
            ],
            axis=1,
        )

    links = np.empty((present.size, present.size), dtype=np.float32)
    for k, a, b, col in runs:
        step = max(1, block // k)
        for first in range(a, b, step):
            last = min(b, first + step)
            rows = col + (np.arange(k)[:, None] * (b - a) + np.arange(first - a, last - a)).ravel()
            pooled = pool_columns(vectors[rows] @ vectors.T)
            links[first:last] = pooled.reshape(k, last - first, present.size).max(axis=0)
    graph[np.ix_(present, present)] = links
    np.fill_diagonal(graph, -1.0)
    return graph


def _by_chunk_count(
    index: Matrix, owner: IntArray, counts: IntArray
) -> tuple[IntArray, list[tuple[int, int, int, int]], Matrix]:
    """The items with chunks by chunk count (``present``), in runs of equal count ``k``:
    ``(k, first, end, first column)`` per run, items numbered by their place in ``present``;
    and the chunk vectors in the runs' order, chunk-number-major."""
    present = np.flatnonzero(counts)
    present = present[np.argsort(counts[present], kind="stable")]
    place = np.empty(len(counts), dtype=np.intp)
    place[present] = np.arange(present.size)
    sizes, firsts = np.unique(counts[present], return_index=True)
    ends = [*firsts[1:].tolist(), present.size]
    columns = np.concatenate([[0], np.cumsum(sizes * (np.asarray(ends) - firsts))])
    runs = list(zip(sizes.tolist(), firsts.tolist(), ends, columns[:-1].tolist(), strict=True))
    # where each chunk goes: its run's first column + its number in its item * run length + item
    order = np.argsort(place[owner], kind="stable")
    item = place[owner[order]]
    number = np.arange(len(order)) - np.concatenate([[0], np.cumsum(counts[present])])[item]
    run = np.searchsorted(firsts, item, side="right") - 1
    length = (np.asarray(ends) - firsts)[run]
    column = columns[run] + number * length + (item - firsts[run])
    vectors = np.empty((len(order), index.shape[1]), dtype=np.float32)
    vectors[column] = index[order]
    return present, runs, vectors


def expand(
    graph: Matrix, found: Sequence[int], candidates: BoolArray, limits: Limits
) -> list[Expanded]:
    """The items expansion adds to ``found`` (pass by pass, each pass best first).

    ``candidates[i]`` says whether item ``i`` may be added at all; an item in ``found`` never
    is. See the module docstring for the passes.
    """
    taken = np.zeros(graph.shape[0], dtype=np.bool_)
    frontier = np.asarray(found, dtype=np.intp)
    taken[frontier] = True
    added: list[Expanded] = []
    for depth in range(1, limits.expansion_depth + 1):
        if frontier.size == 0 or limits.expansion_top_n <= 0:
            break
        links = graph[frontier]
        best = links.max(axis=0)
        via = frontier[links.argmax(axis=0)]
        allowed = np.flatnonzero(candidates & ~taken & (best >= limits.expansion_threshold))
        frontier = allowed[np.argsort(-best[allowed], kind="stable")][: limits.expansion_top_n]
        taken[frontier] = True
        added += [Expanded(int(i), float(best[i]), int(via[i]), depth) for i in frontier]
    return added
