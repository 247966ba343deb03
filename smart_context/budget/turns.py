"""The budget's plan with each kept message's partner (:mod:`smart_context.turns`): a question
brings its answer and an answer its question when the room allows, and a message is left out
when it does not, so the history sent alternates user and assistant as the chat does.

The plan's steps take a relevant message's partner (``TURN``), but the recent messages, the
pinned ones and those taken by importance are taken alone. This settles them after the plan, the
most valuable first: recent, pinned, relevant, then the rest, newest first within each reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.budget.plan import (
    IMPORTANT,
    LEFT_OUT,
    PINNED,
    RECENT,
    RELEVANT,
    TURN,
    Plan,
)
from smart_context.turns import Codes, IntArray, Roles, partners, within

# the order in which the kept messages claim the room their turns need (lower first)
_CLAIM = np.full(8, 9, dtype=np.intp)
for _rank, _why in enumerate((RECENT, PINNED, RELEVANT, TURN, IMPORTANT)):
    _CLAIM[_why] = _rank


def in_turns(
    chosen: Plan,
    codes: Codes,
    tokens: npt.NDArray[np.integer[Any]],
    room: int,
    roles: Roles | None = None,
) -> Plan:
    """``chosen`` with every kept message's partner, within ``room`` tokens in all
    (``roles``: :meth:`Roles.of` ``codes``, when the caller has them)."""
    if chosen.whole or not chosen.keep.any():
        return chosen
    free = room - chosen.message_tokens - chosen.summary_tokens
    at = np.flatnonzero(chosen.keep)  # the kept few: a step each, never one per message
    order = at[np.lexsort((-at, _CLAIM[chosen.why[at]]))]
    keep = within(codes, chosen.keep, tokens, free, order, roles)
    if np.array_equal(keep, chosen.keep):
        return chosen
    why = chosen.why.copy()
    why[keep & ~chosen.keep] = TURN
    why[chosen.keep & ~keep] = LEFT_OUT
    used = int(tokens[keep].sum())
    return Plan(keep, why, chosen.summaries, used, chosen.summary_tokens)


def turn_of(codes: Codes, why: npt.NDArray[np.int8], roles: Roles | None = None) -> IntArray:
    """For each message the plan sent as a partner (``TURN``), the kept message it came with;
    -1 elsewhere. Found with the same :func:`~smart_context.turns.partners` that brought it, so
    the record names the right message in a chat with runs too."""
    out = np.full(len(why), -1, dtype=np.intp)
    kept = np.flatnonzero((why != LEFT_OUT) & (why != TURN))
    partner = partners(codes, kept, roles)
    brought = partner >= 0
    brought[brought] = why[partner[brought]] == TURN
    out[partner[brought]] = kept[brought]
    return out
