"""What every host's thirty-turn replay checks of the cache-stable layout (docs/contract.md §9):
request N+1 starts with request N's stable part (all of it but what was chosen for N's message),
except at a cut the record names; the first request and one cut past the budget make the
layout, and at most one request in eight after the first is a cut."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

Messages = list[dict[str, Any]]


def but_the_message(request: Messages) -> Messages:
    """A request's stable part when what was chosen rides inside its user message."""
    return request[:-1]


def cuts_of(
    requests: Sequence[Messages],
    records: Sequence[dict[str, Any]],
    stable: Callable[[Messages], Messages] = but_the_message,
) -> list[str | None]:
    """Assert the layout held between cuts; each request's cut (``None``: none)."""
    cuts = [r.get("layout", {}).get("cut") for r in records]
    broken = [
        i + 1
        for i, (before, after) in enumerate(itertools.pairwise(requests))
        if after[: len(stable(before))] != stable(before)
    ]
    assert len(broken) <= len(requests) // 8, broken
    assert all(cuts[i] is not None for i in broken), (broken, cuts)
    assert cuts[0] == "first request" and "over the budget" in cuts[1:], cuts
    assert sum(cut is not None for cut in cuts[1:]) <= len(requests) // 8, cuts
    return cuts


def longer(chat: Messages, turns: int, times: int = 3) -> Messages:
    """``chat`` with the last ``turns`` turns ``times`` as long: a sitting whose history grows
    faster than its high mark (which rises as the sitting lasts), so the replay meets a cut."""
    out = [dict(m) for m in chat]
    for m in out[-2 * turns :]:
        m["content"] = " ".join([m["content"]] * times)
    return out
