"""The memory section of a request (docs/contract.md §9's order: system, **memory**, knowledge,
tools, history, message): direct messages other plugins posted for the chat, then stored memories.

- Live direct messages first, highest priority first (they are the most current word);
  expired ones are never read.
- Then stored memories, the chat's and the vault's global ones, most important first.
- Within ``max_tokens``, each line counted by the chat model's ``counter`` (as the notes and the
  budget count; a plain estimate when none is given): what does not fit is left out, lowest
  first, and the count of what was left out is said, so a model knows there is more to
  ``retrieve_context``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from smart_context.budget.tokens import Counter, Estimate
from smart_context.memory.records import DirectMessage, Memory

TITLE = "Memory"
T = TypeVar("T")


@dataclass(frozen=True)
class MemorySection:
    """What the section holds and its text (``""``: nothing to send)."""

    text: str
    direct_ids: tuple[int, ...]
    memory_ids: tuple[int, ...]
    left_out: int


def memory_section(
    direct: Sequence[DirectMessage],
    memories: Sequence[Memory],
    max_tokens: int,
    counter: Counter | None = None,
) -> MemorySection:
    """The section (module docstring); ``direct`` and ``memories`` in the store's order."""
    lines = [_direct_line(m) for m in direct] + [f"- {m.content}" for m in memories]
    costs = (counter or Estimate()).count(lines)  # one call for every line
    room = max_tokens  # shared by both lists, direct messages first
    kept: list[bool] = []
    for cost in costs:
        kept.append(cost <= room)
        if kept[-1]:
            room -= cost
    split = len(direct)
    sent_direct, shown = _kept(direct, kept[:split]), _kept(lines[:split], kept[:split])
    sent_memories, remembered = _kept(memories, kept[split:]), _kept(lines[split:], kept[split:])
    left_out = len(direct) + len(memories) - len(sent_direct) - len(sent_memories)
    parts = []
    if shown:
        parts.append("Messages for this conversation:\n" + "\n".join(shown))
    if remembered:
        parts.append("Remembered:\n" + "\n".join(remembered))
    if left_out:
        parts.append(f"({left_out} more stored, not shown: retrieve_context can find them.)")
    text = f"# {TITLE}\n\n" + "\n\n".join(parts) if shown or remembered else ""
    return MemorySection(
        text, tuple(m.id for m in sent_direct), tuple(m.id for m in sent_memories), left_out
    )


def _kept(items: Sequence[T], flags: Sequence[bool]) -> list[T]:
    return [item for item, keep in zip(items, flags, strict=True) if keep]


def _direct_line(message: DirectMessage) -> str:
    source = f" (from {message.source})" if message.source else ""
    return f"- Message{source}, priority {message.priority:.1f}: {message.content}"
