"""The knowledge section of a request (docs/contract.md §9's order: system, memory, **knowledge**,
tools, history, message): the notes agent selection finds for the message, as their best passages,
each under its path in the vault so the model can cite it.

- :func:`find` is the references' search on the notes' passages: the message's sentences
  against every passage, max pooled, cosine fused with BM25 (:func:`~smart_context.items.
  lexical.hybrid_scores`), then the items' top-k / top-n / include score / relative floor
  (:func:`~smart_context.items.select.select`), with one more rule: a note under ``min_score``
  is never sent (a message about nothing in particular gets no notes).
- :func:`knowledge_section` writes the text within a token allowance: each note with its best
  ``passages`` passages (in the note's own order), else with its single best one, else left
  out; ``fits`` counts the whole text, so what it says fits is what is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from smart_context.items.lexical import hybrid_scores
from smart_context.items.select import Limits, select
from smart_context.knowledge.index import Layout
from smart_context.vectors.int8 import Coded
from smart_context.vectors.ops import Matrix

TITLE = "Notes from the vault"
INTRO = (
    "Passages of the user's own notes that may bear on this message. When you use one, cite "
    "the note by its path."
)
GAP = "\n\n[…]\n\n"  # between passages of one note that are not next to each other


@dataclass(frozen=True)
class Cited:
    """A note the search found: its path, score, and best passages as ``(place in the note,
    text)``, best first."""

    source: str
    score: float
    passages: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class KnowledgeSection:
    """The section's text (``""``: nothing to send) and the record of the notes in it."""

    text: str = ""
    notes: tuple[dict[str, Any], ...] = ()
    left_out: int = 0


def find(
    layout: Layout,
    index: Matrix | Coded,
    queries: Matrix,
    sentences: Sequence[str],
    limits: Limits,
    min_score: float,
    passages: int,
) -> list[Cited]:
    """The notes for a message whose ``sentences`` have the vectors ``queries``, best first.
    ``index`` holds the passages' vectors (zero rows: not embedded yet); when it has no
    vectors at all, or of another size than ``queries``, the search is by words alone (BM25,
    squashed into [0, 1) as fusion does)."""
    if not layout.chunks or not sentences:
        return []
    weight = limits.lexical_weight
    if index.shape[1] == 0 or len(queries) != len(sentences) or queries.shape[1] != index.shape[1]:
        # words alone, on the scale of fused scores: a note must still earn ``min_score``
        index = np.zeros((len(layout.chunks), 1), dtype=np.float32)
        queries = np.zeros((len(sentences), 1), dtype=np.float32)
        weight = 1.0
    scores = hybrid_scores(
        queries, index, sentences, layout.lexical() if weight > 0 else None, weight
    )
    best = scores.max(axis=0)  # each passage's best sentence
    out = []
    # the notes' own floor is ``min_score`` (a setting), not the documents' absolute floor
    floored = replace(limits, absolute_floor=min_score)
    for chosen in select(scores, layout.owner, len(layout.notes), floored):
        start, end = int(layout.starts[chosen.item]), int(layout.starts[chosen.item + 1])
        top = np.argsort(-best[start:end], kind="stable")[:passages] + start
        picked = tuple((int(i) - start, layout.chunks[i]) for i in top.tolist())
        out.append(Cited(layout.notes[chosen.item].source, chosen.score, picked))
    return out


def knowledge_section(cited: Sequence[Cited], fits: Callable[[str], bool]) -> KnowledgeSection:
    """The section for ``cited`` (best first), as much of it as ``fits`` allows."""
    blocks: list[str] = []
    notes: list[dict[str, Any]] = []
    for note in cited:
        for kept in (note.passages, note.passages[:1]):
            block = _block(note.source, kept)
            if fits(_text([*blocks, block])):
                blocks.append(block)
                row = {"path": note.source, "score": round(note.score, 3), "passages": len(kept)}
                notes.append(row)
                break
    left_out = len(cited) - len(notes)
    return KnowledgeSection(_text(blocks) if blocks else "", tuple(notes), left_out)


def _block(source: str, passages: Sequence[tuple[int, str]]) -> str:
    parts: list[str] = []
    last = None
    for place, text in sorted(passages):  # as the note has them
        if parts:
            parts.append("\n\n" if last is not None and place == last + 1 else GAP)
        parts.append(text.strip())
        last = place
    return f"## {source}\n\n" + "".join(parts)


def _text(blocks: Sequence[str]) -> str:
    return f"# {TITLE}\n\n{INTRO}\n\n" + "\n\n".join(blocks)
