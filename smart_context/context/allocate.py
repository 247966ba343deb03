"""What gives way when a request's fixed parts do not fit its token budget (docs/contract.md §9).

Rules, references and tools come in two kinds: those the user asked for (``always`` and
``manual`` items: the session's) and those the search chose for this message (``agent`` items and
what expansion added to them). When the fixed parts with the last turn of the history exceed the
budget, the chosen ones give way, the lowest score first, until they fit; what the user asked for
is always sent. When even that does not fit, the request goes over its budget and the record
says by how much and why (:func:`over_note`), so neither the panel nor the log shows a budget
that silently does not hold. Pure: the caller counts the tokens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from smart_context.budget.tokens import Counter
from smart_context.items.request import Chosen, RequestContext

TRIMMABLE = frozenset({"agent", "expansion"})  # the modes of the items a search chose


@dataclass(frozen=True)
class Candidate:
    """An item the search chose: its key, what it costs in the prompt, its score."""

    key: str
    tokens: int
    score: float


def give_way(candidates: Sequence[Candidate], over: int) -> frozenset[str]:
    """The keys of the candidates to leave out so that ``over`` tokens are freed: the lowest
    score first (on equal scores the larger first), and no more than needed; all of them when
    even that is not enough."""
    if over <= 0:
        return frozenset()
    dropped: list[str] = []
    freed = 0
    for candidate in sorted(candidates, key=lambda c: (c.score, -c.tokens, c.key)):
        if freed >= over:
            break
        dropped.append(candidate.key)
        freed += candidate.tokens
    return frozenset(dropped)


def chosen_by_search(request: RequestContext, counter: Counter) -> list[Candidate]:
    """The items of ``request`` that may give way, with what each adds to the prompt as
    ``counter`` counts it (a rule or reference: its part of the system message; a tool: its
    definition), in one count call."""
    found = [(k, c) for k, c in enumerate(request.items) if c.mode in TRIMMABLE]
    texts = [_prompt_text(c) for _, c in found]
    counts = counter.count(texts) if texts else []
    return [
        Candidate(str(k), n, c.score if c.score is not None else 0.0)
        for (k, c), n in zip(found, counts, strict=True)
    ]


def without(request: RequestContext, keys: frozenset[str]) -> RequestContext:
    """``request`` less the items :func:`give_way` named."""
    kept = tuple(c for k, c in enumerate(request.items) if str(k) not in keys)
    return replace(request, items=kept)


def _prompt_text(chosen: Chosen) -> str:
    item = chosen.item
    if item.type == "tool":
        definitions = RequestContext((chosen,)).tools()
        return json.dumps(definitions[0], ensure_ascii=False) if definitions else ""
    return f"## {item.name}\n{item.text.strip()}"


def over_note(used: int, limit: int, sections: dict[str, int]) -> str:
    """Words for a request that went over its budget, naming the biggest parts sent."""
    names = {"system": "rules", "knowledge": "references and notes", "tools": "tools"}
    biggest = sorted(
        ((n, names[k]) for k, n in sections.items() if k in names and n > 0), reverse=True
    )
    parts = ", ".join(f"{name} {n}" for n, name in biggest) or "the message"
    return (
        f"Over the token budget by {used - limit}: what is always sent ({parts} tokens) does "
        f"not fit in {limit}. Raise budget_tokens, or send fewer rules, references or tools "
        "with every message."
    )
