"""Which vault items a request adds on its own: agent selection, pure numpy.

The inputs are similarities between the message's *query chunks* (its sentences, see
:func:`smart_context.items.chunks.query_chunks`) and every indexed *item chunk*, one row per
query chunk; ``owner[c]`` says which item chunk ``c`` belongs to. The rule, with the
floors added:

1. **Max pooling over query chunks.** A chunk's score is its best similarity to any sentence
   of the message, so a long message does not blur into one average vector.
2. **topK chunk matches, grouped per item.** The ``top_k`` best chunks name the candidate items;
   an item scores its best chunk.
3. **topN, plus every item at or above ``include_score``.**
4. **A floor relative to the best.** A topN place needs at least ``relative_floor`` times the
   best item's score: with few candidates, topN would otherwise fill up with whatever is left
   (a world clock, at 0.04, for a question about dough). Measured on the labelled tool set with
   the default (hybrid) scores, 0.4 of the best costs no recall@5 (0.623, tune and held-out
   unchanged) and drops 2% of the picks, wrong ones (precision@5 0.163 -> 0.174); 0.5 starts to
   cost recall (0.614; on the tune messages 0.597 -> 0.584), so 0.4 it is.
5. **An absolute floor.** Nor is a place given to an item scoring under ``absolute_floor``,
   however it ranks: "hello" scores every item of the example vault between 0.01 and 0.14,
   and the relative floor alone let four of them in. The scores are fused (0.7 cosine + 0.3
   squashed BM25, :mod:`.lexical`) and MiniLM's cosines of unrelated texts sit around
   0-0.15, so an unrelated item stays near 0.1 or under. Over 23 small-talk messages against
   the example vault ("thanks!", "Hello! I have a question.") the best rule or reference
   scored at most 0.18 and the best tool 0.12, while the questions it is made for gave
   their items 0.26-0.67. So rules and references need 0.2 (:data:`DOCUMENT_FLOOR`): they
   are text the model reads, and cost tokens. Tools need 0.15 (:data:`TOOL_FLOOR`): a tool
   the model does not call costs little, one it lacks costs the answer, and tool recall@5
   pays for a higher floor (``benchmarks/``, recall@5 / precision without a floor, at 0.15
   and at 0.2: ToolLens' tune queries 0.343 / 0.181, 0.343 / 0.182, 0.336 / 0.182, its test
   queries 0.360, 0.360, 0.358; our own set 0.606 / 0.172, 0.602 / 0.181, 0.587 / 0.201).
   Models whose unrelated texts score higher (nomic-embed-text, about 0.3-0.45) pass these
   floors; the relative one is what holds for them.
6. **Minimum representation per query chunk.** Max pooling lets the strongest sentence take
   every place: "read the failing test's log, open an issue and tell the team on Slack" would
   get three issue trackers and no Slack. So the topN places go first to each sentence's own
   best ``per_query`` items (when at least ``floor`` close to it), then to the best overall:
   every part of a multi-step request is represented, within the same budget. Measured on the
   labelled tool set (``benchmarks/bench_tool_selection.py``) it gains nothing over max pooling
   alone (recall@5 0.506 vs 0.508), so it is off by default (``per_query = 0``).

Scores are cosine similarities of unit vectors, whatever the model; the defaults
(docs/contract.md §8) are in :class:`Limits`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.intp]

DOCUMENT_FLOOR = 0.2  # the least score that adds a rule or reference (module docstring)
TOOL_FLOOR = 0.15  # ... and a tool


@dataclass(frozen=True)
class Limits:
    """How many items the selection may add: ``context_top_k``, ``context_top_n``,
    ``context_include_score`` and the ``context_expansion_*`` settings of docs/contract.md §8, and
    the per-sentence minimum."""

    top_k: int = 20
    top_n: int = 5
    include_score: float = 0.7
    per_query: int = (
        0  # measured: no gain on the tool set (docs/benchmarks.md), so off unless asked
    )
    floor: float = 0.3
    relative_floor: float = 0.4  # a topN place needs this share of the best item's score
    absolute_floor: float = DOCUMENT_FLOOR  # ... and at least this score (TOOL_FLOOR for tools)
    # context expansion (:mod:`.expand`): passes (0: off), link score, items added per pass
    expansion_depth: int = 0
    expansion_threshold: float = 0.75
    expansion_top_n: int = 3
    # keyword scores fused with the cosine ones (:mod:`.lexical`, measured there); 0: cosine only
    lexical_weight: float = 0.3


@dataclass(frozen=True)
class Chosen:
    """An item the selection added: its index and its score (best chunk, pooled)."""

    item: int
    score: float


def item_scores(scores: Matrix, owner: IntArray, n_items: int) -> Matrix:
    """``(queries, items)``: each item's best chunk per query chunk; ``-1`` for an item
    without chunks. ``owner`` need not be sorted."""
    out = np.full((scores.shape[0], n_items), -1.0, dtype=np.float32)
    if not scores.size:
        return out
    if len(owner) > 1 and (owner[1:] < owner[:-1]).any():
        np.maximum.at(out.T, owner, scores.T)
        return out
    # owner sorted (each item's chunks side by side, as catalogs and note layouts are): one
    # maximum per run of columns, tens of times faster than ``maximum.at`` on thousands
    starts = np.searchsorted(owner, np.arange(n_items))
    ends = np.append(starts[1:], len(owner))
    has = starts < ends
    out[:, has] = np.maximum.reduceat(scores, starts[has], axis=1)
    return out


def select(scores: Matrix, owner: IntArray, n_items: int, limits: Limits) -> list[Chosen]:
    """The items to add for one message, best first (see the module docstring).

    ``scores`` is ``(query chunks, item chunks)``; ``owner`` maps each item chunk to its item.
    """
    if scores.size == 0 or n_items == 0:
        return []
    pooled_chunks = scores.max(axis=0)
    per_item = item_scores(scores, owner, n_items)
    pooled = per_item.max(axis=0)
    k = min(limits.top_k, len(pooled_chunks))
    top_chunks = np.argpartition(-pooled_chunks, k - 1)[:k]
    candidates = np.unique(owner[top_chunks])
    top = max(float(pooled[candidates].max()), 0.0)
    least = max(limits.relative_floor * top, limits.absolute_floor)
    candidates = candidates[pooled[candidates].astype(np.float64) >= least]
    ranked = candidates[np.argsort(-pooled[candidates], kind="stable")].tolist()
    # The topN places: first each sentence's own best, then the best overall.
    places: dict[int, None] = {}
    if limits.per_query > 0 and per_item.shape[0] > 1:
        for rank in range(limits.per_query):
            for row in per_item:
                best = np.argsort(-row, kind="stable")[rank]
                close = row[best] >= max(limits.floor, limits.absolute_floor)
                if close and len(places) < limits.top_n:
                    places.setdefault(int(best))
    for i in ranked:
        if len(places) >= limits.top_n:
            break
        places.setdefault(int(i))
    # an item this close always goes, still over the absolute floor (a caller may set it higher)
    close = pooled >= max(limits.include_score, limits.absolute_floor)
    chosen = set(places) | set(np.flatnonzero(close).tolist())
    order = sorted(chosen, key=lambda i: (-float(pooled[i]), i))
    return [Chosen(i, float(pooled[i])) for i in order]
