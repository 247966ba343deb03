"""Why each message a token budget kept is sent: the record's ``reasons`` (docs/contract.md §9), so
that View context can say it in words instead of guessing.

``reasons`` maps a message id to ``{"why": ...}`` for every kept message that is not one of the
last ``recent_messages`` (``recent_ids`` names those):

- ``"pinned"``: the user marked it important; ``"sticky"``: a standing instruction;
- ``"relevant"`` with ``score``: the search's relevance to the current message;
- ``"turn"`` with ``of``: the other half of the turn of a relevant message (its question or
  answer), so an answer keeps its question;
- ``"important"`` with ``score``: the importance score filled the room that was left.

Only the kept messages are named and scores are rounded to three decimals, so the record stays
as small as the budget, however long the chat grows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.budget.plan import IMPORTANT, PINNED, RELEVANT, TURN

Reason = dict[str, Any]


def reasons(
    why: npt.NDArray[np.int8],
    ids: Sequence[str] | Mapping[int, str],
    marked: npt.NDArray[np.bool_],
    relevance: npt.NDArray[np.float32],
    importance: npt.NDArray[np.float32],
    partner: npt.NDArray[np.intp],
) -> dict[str, Reason]:
    """The ``reasons`` of a plan's ``why`` codes (module docstring), per message position."""
    out: dict[str, Reason] = {}
    at = np.flatnonzero(why >= PINNED)  # the kept few, not every message
    # each array read in one go, then walked as Python values
    rows = zip(
        at.tolist(),
        why[at].tolist(),
        marked[at].tolist(),
        relevance[at].tolist(),
        importance[at].tolist(),
        partner[at].tolist(),
        strict=True,
    )
    for i, code, mark, relevant, score, j in rows:
        if code == PINNED:
            out[ids[i]] = {"why": "pinned" if mark else "sticky"}
        elif code == RELEVANT:
            out[ids[i]] = {"why": "relevant", "score": round(relevant, 3)}
        elif code == TURN:
            out[ids[i]] = {"why": "turn", "of": ids[j]} if j >= 0 else {"why": "turn"}
        elif code == IMPORTANT:
            out[ids[i]] = {"why": "important", "score": round(score, 3)}
    return out
