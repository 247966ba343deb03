"""Summaries without a model: the sentences of a stretch that carry the most (extractive).

Used when no fast model is configured or its call fails, so every stretch left out of a request
has *some* summary (its levels, made by picking rather than writing):

- a sentence scores by how central its words are to the stretch (term frequency over the
  stretch, each word counted once per sentence, divided by the sentence's length so long
  sentences do not win by size), plus a bonus for what a later question tends to ask about:
  numbers, names, identifiers, decisions ("we settled on", "use", "chose");
- small talk and questions score low: an answer says more than its question;
- for key facts (``facts_only``) only sentences with a number, a name or an identifier count;
- the best sentences up to ``max_tokens`` (estimated at 4 characters a token) are kept in their
  order in the chat, each under its speaker.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from smart_context.budget.importance import entities
from smart_context.budget.tokens import CHARS_PER_TOKEN
from smart_context.items.lexical import words
from smart_context.topics.offline.talk import is_small_talk

CHARS = int(CHARS_PER_TOKEN)  # the estimate's characters per token

MAX_SENTENCE_WORDS = 40  # a longer sentence is cut: a summary line is a line
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
_CODE = re.compile(r"```.*?(?:```|$)", re.S)
_DECISION = re.compile(
    r"\b(?:decided|settled|chose|chosen|agreed|picked|went with|we'?ll use|use|booked|"
    r"bought|ordered|replaced|fixed|set (?:it )?to|is called|named|costs?|deadline|due)\b",
    re.I,
)


@dataclass(frozen=True)
class Line:
    """One message of a stretch: who said it and what."""

    role: str
    text: str


def summarize(lines: Sequence[Line], max_tokens: int, facts_only: bool = False) -> str:
    """The extractive summary of ``lines`` (module docstring); ``""`` when nothing qualifies."""
    sentences = [
        (order, line.role, sentence)
        for order, (line, sentence) in enumerate(
            (line, s) for line in lines for s in _sentences(line.text)
        )
    ]
    if not sentences:
        return ""
    counts: Counter[str] = Counter()
    bags = [set(words(s)) for _, _, s in sentences]
    for bag in bags:
        counts.update(bag)
    scored = []
    for (order, role, sentence), bag in zip(sentences, bags, strict=True):
        score = _score(sentence, bag, counts, role, facts_only)
        if score > 0:
            scored.append((score, order, role, sentence))
    scored.sort(key=lambda s: (-s[0], s[1]))
    budget = max_tokens * CHARS
    chosen: list[tuple[int, str, str]] = []
    used = 0
    for _, order, role, sentence in scored:
        cost = len(sentence) + len(role) + 3
        if used + cost > budget:
            continue
        chosen.append((order, role, sentence))
        used += cost
    chosen.sort()
    return _render(chosen)


def _sentences(text: str) -> list[str]:
    text = _CODE.sub("\n", text)  # code says little in a summary line; its prose stays
    out = []
    for piece in _SENTENCE.split(text):
        piece = " ".join(piece.split())
        if len(piece) < 12 or is_small_talk(piece):
            continue
        cut = piece.split()
        if len(cut) > MAX_SENTENCE_WORDS:
            piece = " ".join(cut[:MAX_SENTENCE_WORDS]) + "…"
        out.append(piece)
    return out


def _score(
    sentence: str, bag: set[str], counts: Counter[str], role: str, facts_only: bool
) -> float:
    facts = len(entities(sentence))  # the names, numbers and identifiers importance counts
    if facts_only and not facts:
        return 0.0
    if not bag:
        return 0.0
    central = sum(counts[w] - 1 for w in bag) / math.sqrt(len(bag))
    score = 1.0 + central + 1.5 * min(facts, 3) + (2.0 if _DECISION.search(sentence) else 0.0)
    if sentence.rstrip().endswith("?"):
        score *= 0.5
    if role == "user":
        score *= 1.1  # what the person said about themselves is what they ask about later
    return score


def _render(chosen: Sequence[tuple[int, str, str]]) -> str:
    lines: list[str] = []
    last_role = None
    for _, role, sentence in chosen:
        if role != last_role:
            lines.append(f"{role.capitalize()}: {sentence}")
            last_role = role
        else:
            lines[-1] += f" {sentence}"
    return "\n".join(lines)
