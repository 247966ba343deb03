"""A request as the plugin hands it to the host (:class:`Prepared`), and which of the topic
rule's messages it sent (:func:`sent_flags`): shared by the per-turn budget
(:mod:`smart_context.context.assemble`) and the cache-stable layout
(:mod:`smart_context.context.stable`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from smart_context.context.topic_filter import Decision
from smart_context.items.request import RequestContext


@dataclass(frozen=True)
class Prepared:
    """A request as sent: ``messages`` (the system message, then the history), the items it
    was built from, the record of both, and the ``tools`` offered to the model."""

    messages: list[dict[str, Any]]
    request: RequestContext
    record: dict[str, Any]
    tools: list[dict[str, Any]]
    message: str | None = None  # the user's message as sent, when the layout put more in it


def sent_flags(decision: Decision, kept: np.ndarray) -> np.ndarray:
    """Which of the rule's ids were sent, when the budget sent only ``kept`` of its history."""
    where = decision.positions
    if where is None:
        where = np.arange(len(decision.history), dtype=np.intp)
    flags = np.zeros(len(decision.all_ids), dtype=bool)
    flags[where[kept]] = True
    return flags
