"""The importance score and the hybrid relevance it builds on. Pure numpy.

``importance = recency_weight * recency + semantic_weight * relevance + entity_weight *
entities + user_weight * marked``, each part in [0, 1]:

- **recency**: ``0.5 ** (age / half_life)``, age in messages back from the newest;
- **relevance**: the hybrid search score of the message for the current message: the best
  cosine over the message's sentences-as-queries, fused with BM25 the way items are
  (:func:`smart_context.items.lexical.fuse`), so a rare word shared with the question counts;
- **entities**: the share of the current message's names, numbers and identifiers the message
  mentions too ("the Jeep", "10.4.2.17", ``parse_config``), which a paraphrase keeps while its
  other words change;
- **marked**: 1 when the user pinned the message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smart_context.items.lexical import SATURATION

Floats = npt.NDArray[np.float32]
Flags = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]

# Each kind starts where a word does, said once up front: the engine then tries the kinds only
# at a word's start, not at every character (half the time over REALTALK's messages; a long
# chat met first finds its entities in a worker thread that holds the interpreter's lock).
_ENTITY = re.compile(
    r"\b(?=\w)(?:"
    r"\d[\d.,:/-]*\d\b|\d+\b"  # numbers, dates, versions, addresses
    r"|\w+(?:[._]\w+)+\b"  # identifiers: parse_config, app.main
    r"|[a-z]+[A-Z]\w*\b"  # camelCase
    r"|(?<=[a-z,;:] )[A-Z][a-zA-Z]+"  # a capitalised word inside a sentence: a name
    r")"
)
_COMMON = frozenset(["I", "I'm", "OK", "Ok"])


@dataclass(frozen=True)
class Weights:
    """The weights (settings ``importance_*``) and the recency half-life in messages."""

    recency: float = 0.0
    semantic: float = 0.6
    entity: float = 0.15
    user: float = 0.1
    half_life: float = 200.0


def entities(text: str) -> frozenset[str]:
    """The names, numbers and identifiers of a text, lower-cased; "1" and "2" alone are too
    common to say anything and are left out."""
    found = {e.lower() for e in _ENTITY.findall(text) if e not in _COMMON}
    return frozenset(e for e in found if len(e) > 1)


def entity_overlap(query: frozenset[str], mentions: Callable[[str], IntArray], n: int) -> Floats:
    """Per message, the share of ``query``'s entities it mentions (``mentions``: entity -> the
    positions of the messages that mention it)."""
    out = np.zeros(n, dtype=np.float32)
    if not query:
        return out
    for entity in query:
        out[mentions(entity)] += 1.0
    out /= len(query)
    return out


def relevance(dense: Floats, lexical: Floats, lexical_weight: float) -> Floats:
    """Cosine fused with BM25, as items are fused (module docstring)."""
    squashed = lexical / (lexical + SATURATION)
    fused: Floats = ((1 - lexical_weight) * dense + lexical_weight * squashed).astype(np.float32)
    return fused


def recency(n: int, half_life: float) -> Floats:
    """``0.5 ** (age / half_life)`` for positions ``0..n-1`` (the last is age 0)."""
    age = np.arange(n - 1, -1, -1, dtype=np.float32)
    out: Floats = np.power(np.float32(0.5), age / np.float32(max(half_life, 1e-6)))
    return out


def importance(
    relevance_scores: Floats, overlap: Floats, marked: Flags, weights: Weights
) -> Floats:
    """The weighted sum (module docstring)."""
    n = len(relevance_scores)
    score = (
        weights.semantic * np.clip(relevance_scores, 0.0, 1.0)
        + weights.entity * overlap
        + weights.user * marked.astype(np.float32)
    )
    if weights.recency:  # 0 by default: no decay curve over every message then
        score += weights.recency * recency(n, weights.half_life)
    out: Floats = score.astype(np.float32)
    return out


SAMPLED = 16  # top_hits: a long history's cut is read off every n / (SAMPLED * limit)-th score


def top_hits(scores: Floats, limit: int, floor: float) -> IntArray:
    """Positions of the best ``limit`` scores at or above ``floor``, best first, and of equal
    scores the earlier first (the same on every CPU: a partition's order among ties is its
    own, and numpy's differs with the CPU's instructions).

    In a long history the best hundred are a few of many: a sample of every few scores gives
    a cut at least ``limit`` scores reach (its own ``limit`` best are among them), so only
    the scores past it, about ``SAMPLED * limit``, are ranked (0.2 against 2 ms at 100,000:
    a partition of every score was most of a long chat's search)."""
    if limit < 1:
        return np.zeros(0, dtype=np.intp)
    cut = floor
    step = len(scores) // (SAMPLED * limit)
    if step > 1:
        # only the sample's scores at the floor or above: the same cut, and no partition of
        # many equal scores below it (a keyword search's zeros: 0.1 ms at 10,000 messages)
        sample = scores[::step]
        sample = sample[sample >= floor]
        if len(sample) >= limit:
            cut = float(np.partition(sample, len(sample) - limit)[len(sample) - limit])
    candidates = np.flatnonzero(scores >= cut)
    values = scores[candidates]
    if len(candidates) > limit:  # those at or above the limit-th best value, ties whole
        least = np.partition(values, len(values) - limit)[len(values) - limit]
        near = values >= least
        candidates, values = candidates[near], values[near]
    order = np.lexsort((candidates, -values))[:limit]
    out: IntArray = candidates[order].astype(np.intp)
    return out
