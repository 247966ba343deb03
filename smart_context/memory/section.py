"""The memory section of a request (CONTRACT §9's order: system, **memory**, knowledge, tools,
history, message): direct messages other plugins posted for the chat, then stored memories.

- Live direct messages first, highest priority first (seed 004: "prioritized in L1 context");
  expired ones are never read.
- Then stored memories, the chat's and the vault's global ones, most important first.
- Within ``max_tokens`` (estimated at 4 characters a token; the budget counts the section again
  with the model's tokenizer): what does not fit is left out, lowest first, and the count of
  what was left out is said, so a model knows there is more to ``retrieve_context``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from smart_context.memory.records import DirectMessage, Memory

CHARS_PER_TOKEN = 4
TITLE = "Memory"


@dataclass(frozen=True)
class MemorySection:
    """What the section holds and its text (``""``: nothing to send)."""

    text: str
    direct_ids: tuple[int, ...]
    memory_ids: tuple[int, ...]
    left_out: int


def memory_section(
    direct: Sequence[DirectMessage], memories: Sequence[Memory], max_tokens: int
) -> MemorySection:
    """The section (module docstring); ``direct`` and ``memories`` in the store's order."""
    budget = max_tokens * CHARS_PER_TOKEN
    lines: list[str] = []
    direct_ids: list[int] = []
    memory_ids: list[int] = []
    left_out = 0
    used = 0
    for message in direct:
        source = f" (from {message.source})" if message.source else ""
        line = f"- Message{source}, priority {message.priority:.1f}: {message.content}"
        if used + len(line) > budget:
            left_out += 1
            continue
        lines.append(line)
        direct_ids.append(message.id)
        used += len(line)
    remembered: list[str] = []
    for memory in memories:
        line = f"- {memory.content}"
        if used + len(line) > budget:
            left_out += 1
            continue
        remembered.append(line)
        memory_ids.append(memory.id)
        used += len(line)
    parts = []
    if lines:
        parts.append("Messages for this conversation:\n" + "\n".join(lines))
    if remembered:
        parts.append("Remembered:\n" + "\n".join(remembered))
    if left_out:
        parts.append(f"({left_out} more stored, not shown: retrieve_context can find them.)")
    text = f"# {TITLE}\n\n" + "\n\n".join(parts) if lines or remembered else ""
    return MemorySection(text, tuple(direct_ids), tuple(memory_ids), left_out)
