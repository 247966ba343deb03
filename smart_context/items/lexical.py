"""Keyword scores for item chunks (BM25) and their fusion with the embedding scores:
"hybrid search", pure numpy.

- :func:`words`: a text as lower-case words; ``createIssue``, ``create_issue`` and
  ``create-issue`` all give ``create issue``, a plural loses its ``s``, and a few English
  function words are dropped.
- :class:`LexicalIndex`: Okapi BM25 (``k1`` 1.2, ``b`` 0.75) over the chunks of a catalog,
  built once per catalog like the chunk vectors. Each posting holds its finished BM25 weight,
  so scoring a message is a gather and one ``bincount`` per sentence.
- :func:`fuse`: ``(1 - weight) * cosine + weight * bm25 / (bm25 + saturation)``. The BM25 part
  is squashed into [0, 1) by a fixed curve, not divided by the message's best score, so a
  message whose words match nothing well adds little, and a score stays comparable with
  ``include_score``. :func:`reciprocal_rank_fusion` is the rank-only alternative measured
  beside it.

**On by default** (``Limits.lexical_weight`` 0.3, saturation 8: the best of a sweep on the
*tune* two thirds of the labelled tool set, ``benchmarks/bench_tool_selection.py``): recall@5
0.508 -> 0.623 over the 300 messages, 0.495 -> 0.675 on the held-out third, multi-tool
messages 0.422 -> 0.498; precision@5 0.133 -> 0.163. Likely because a short message names
the very words of a tool ("merge", "calendar", "kubectl") that a small model blurs. Reciprocal
rank fusion gains less (0.567). Only tools are labelled: rules and references were not
measured, and the example vault's test still finds what it found. The cost is under 1 ms per
message at 500 tools. With it, a score (``similarity_score``, ``include_score``) is the fused
one: a chunk needs close meaning *and* shared words to reach 0.7.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smart_context.vectors.int8 import Coded

Matrix = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.intp]

K1 = 1.2
B = 0.75
SATURATION = 8.0  # a BM25 score of 8 (three or four good rare words) counts half

CAMEL = re.compile(r"([a-z0-9])([A-Z])")  # faster than a look-behind at every position
_WORD = re.compile(r"[a-z0-9]+")
# fmt: off
_STOP = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "for", "from", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of",
    "on", "or", "our", "please", "so", "that", "the", "their", "them", "then", "there", "these",
    "this", "to", "up", "us", "was", "we", "what", "when", "which", "will", "with", "would",
    "you", "your",
])
# fmt: on


STOP_WORDS = _STOP  # public: other indexes drop the same function words


def words(text: str) -> list[str]:
    """``text`` as the words BM25 counts (see the module docstring)."""
    return [w for w in map(_term, _tokens(text)) if w]


def _tokens(text: str) -> list[str]:
    return _WORD.findall(CAMEL.sub(r"\1 \2", text).lower())


def _term(token: str) -> str:
    """The word ``token`` counts as; ``""`` for a function word."""
    if token in _STOP:
        return ""
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


@dataclass(frozen=True)
class LexicalIndex:
    """BM25 postings of ``n_docs`` chunks: term ``t``'s are ``docs[starts[t]:starts[t + 1]]``
    with their weights."""

    vocabulary: dict[str, int]
    starts: IntArray
    docs: IntArray
    weights: Matrix
    n_docs: int

    @classmethod
    def build(cls, texts: Sequence[str], k1: float = K1, b: float = B) -> LexicalIndex:
        """The index of ``texts`` (one document each)."""
        # no Python code per token: each distinct token gets the number of its first place in
        # the corpus (map, setdefault and count run in C), and is made a term once
        seen: dict[str, int] = {}
        place = itertools.count()
        tokens: list[int] = []
        counts = np.zeros(len(texts), dtype=np.intp)
        for doc, text in enumerate(texts):
            found = _tokens(text)
            tokens.extend(map(seen.setdefault, found, place))
            counts[doc] = len(found)
        vocabulary: dict[str, int] = {}
        term_of = np.full(len(tokens), -1, dtype=np.int64)
        term_of[np.fromiter(seen.values(), dtype=np.intp, count=len(seen))] = [
            vocabulary.setdefault(w, len(vocabulary)) if w else -1 for w in map(_term, seen)
        ]
        all_terms = term_of[np.asarray(tokens, dtype=np.intp)]
        all_docs = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
        kept = all_terms >= 0
        terms, owners = all_terms[kept], all_docs[kept]
        lengths = np.bincount(owners, minlength=len(texts)).astype(np.float32)
        n = max(len(texts), 1)
        pairs, tf = np.unique(terms * n + owners, return_counts=True)
        term, docs = (pairs // n).astype(np.intp), (pairs % n).astype(np.intp)
        df = np.bincount(term, minlength=len(vocabulary))
        idf = np.log1p((len(texts) - df + 0.5) / (df + 0.5))
        average = max(float(lengths.mean()), 1.0) if len(texts) else 1.0
        norm = k1 * (1 - b + b * lengths[docs] / average)
        weights = (idf[term] * tf * (k1 + 1) / (tf + norm)).astype(np.float32)
        starts = np.searchsorted(term, np.arange(len(vocabulary) + 1)).astype(np.intp)
        return cls(vocabulary, starts, docs, weights, len(texts))

    def scores(self, queries: Sequence[str]) -> Matrix:
        """``(queries, docs)`` BM25 scores; a word counts once per query."""
        out = np.zeros((len(queries), self.n_docs), dtype=np.float32)
        for row, query in enumerate(queries):
            known = [
                self.vocabulary[w] for w in dict.fromkeys(words(query)) if w in self.vocabulary
            ]
            if not known:
                continue
            picks = np.concatenate([np.arange(self.starts[t], self.starts[t + 1]) for t in known])
            out[row] = np.bincount(self.docs[picks], self.weights[picks], minlength=self.n_docs)
        return out


def fuse(dense: Matrix, lexical: Matrix, weight: float, saturation: float = SATURATION) -> Matrix:
    """Cosine and BM25 scores of the same ``(queries, chunks)`` in one (module docstring)."""
    if weight <= 0:
        return dense
    squashed = lexical / (lexical + saturation)
    return ((1 - weight) * dense + weight * squashed).astype(np.float32)


def hybrid_scores(
    queries: Matrix,
    index: Matrix | Coded,
    sentences: Sequence[str],
    lexical: LexicalIndex | None,
    weight: float,
    rows: IntArray | None = None,
) -> Matrix:
    """``(queries, chunks)``: the cosine of each query vector (one per sentence of the message,
    ``sentences`` in the same order) with each chunk vector of ``index``, fused with the
    chunks' BM25 scores when ``weight`` > 0. ``rows`` limits the chunks to those rows (in that
    order). A zero row of ``index`` (a chunk not embedded yet) scores by its words alone.
    The cosines are the int8 kernel's (:mod:`smart_context.vectors.int8`), the same on every
    CPU; give ``index`` as :class:`Coded` to encode it once for many searches."""
    dense = (index if isinstance(index, Coded) else Coded.of(index)).scores(queries)
    if rows is not None:
        dense = dense[:, rows]  # cheaper than copying the rows of ``index`` first
    if weight <= 0 or lexical is None:
        return dense
    keywords = lexical.scores(sentences)
    if rows is not None:
        keywords = keywords[:, rows]
    return fuse(dense, keywords, weight)


def reciprocal_rank_fusion(dense: Matrix, lexical: Matrix, k: float = 60.0) -> Matrix:
    """``1 / (k + rank)`` summed over both rankings, per query row (rank 1 is the best). The
    scores say only the order: ``include_score`` means nothing for them."""
    return (_rrf(dense, k) + _rrf(lexical, k)).astype(np.float32)


def _rrf(scores: Matrix, k: float) -> Matrix:
    ranks = np.empty_like(scores, dtype=np.float32)
    order = np.argsort(-scores, axis=1, kind="stable")
    positions = np.arange(1, scores.shape[1] + 1, dtype=np.float32)
    np.put_along_axis(ranks, order, np.broadcast_to(positions, scores.shape), axis=1)
    return 1.0 / (k + ranks)
