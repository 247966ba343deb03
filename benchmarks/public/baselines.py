"""The plain baselines every quality figure is printed beside, computed by the same script.

- BM25 (the ``bm25s`` package, English stop words): words only;
- dense: cosine to the query with the same embedding model the product uses;
- hybrid: the two rankings fused by reciprocal rank (k = 60), the usual way to combine them;
- neighbours: a retrieved message brings the messages next to it, as a plain chat retriever does.

Each takes and returns plain arrays, one score per document, so any benchmark can rank, fill a
budget by rank, or take the top k from them.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np
import numpy.typing as npt

Scores = npt.NDArray[np.float64]
RRF_K = 60


class BM25:
    """A BM25 index over ``documents``."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.n = len(documents)
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize(list(documents), stopwords="en", show_progress=False)
        self.retriever.index(tokens, show_progress=False)
        self.vocab = tokens.vocab

    def scores(self, query: str) -> Scores:
        words = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        known = [w for w in words if w in self.vocab]
        if not known:
            return np.zeros(self.n)
        return np.asarray(self.retriever.get_scores(known), dtype=np.float64)


def dense(documents: npt.NDArray[np.float32], query: npt.NDArray[np.float32]) -> Scores:
    """Cosine of each document row to ``query`` (unit vectors; several query rows: the best)."""
    sims = documents.astype(np.float64) @ np.atleast_2d(query).astype(np.float64).T
    return np.asarray(sims.max(axis=1) if sims.size else np.zeros(len(documents)))


def rank(scores: Scores) -> npt.NDArray[np.intp]:
    """Positions best first; ties by position, so every CPU gives the same order."""
    return np.lexsort((np.arange(len(scores)), -np.round(scores, 9)))


def rrf(*scores: Scores) -> Scores:
    """Reciprocal-rank fusion of several score arrays over the same documents."""
    fused = np.zeros(len(scores[0]))
    for s in scores:
        fused[rank(s)] += 1.0 / (RRF_K + 1 + np.arange(len(s)))
    return fused


def fill_by_rank(
    order: Sequence[int], tokens: npt.NDArray[np.integer], room: int, neighbours: int = 0
) -> set[int]:
    """Take documents in ``order`` while they fit ``room`` tokens; with ``neighbours``, each
    taken document brings the ones that many places before and after it, paid for too."""
    taken: set[int] = set()
    used = 0
    n = len(tokens)
    for i in order:
        group = [j for j in range(i - neighbours, i + neighbours + 1) if 0 <= j < n]
        new = [j for j in group if j not in taken]
        cost = int(sum(int(tokens[j]) for j in new))
        if not new or used + cost > room:
            continue
        taken.update(new)
        used += cost
    return taken


def fill_with_partners(
    order: Sequence[int], tokens: npt.NDArray[np.integer], room: int, partner: Sequence[int]
) -> set[int]:
    """Take documents in ``order`` while they fit ``room`` tokens, each with its ``partner``
    (-1: none), paid for too; a document whose pair does not fit is skipped whole. What a chat
    retriever that must keep the history's turn order (a question with its answer) can send."""
    taken: set[int] = set()
    used = 0
    for i in order:
        new = [j for j in (i, partner[i]) if j >= 0 and j not in taken]
        cost = sum(int(tokens[j]) for j in new)
        if not new or used + cost > room:
            continue
        taken.update(new)
        used += cost
    return taken
