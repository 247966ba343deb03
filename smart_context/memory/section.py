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

from smart_context.budget.tokens import CHARS_PER_TOKEN
from smart_context.memory.records import DirectMessage, Memory

CHARS = int(CHARS_PER_TOKEN)  # the estimate's characters per token

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
    room = [max_tokens * CHARS]  # characters left, shared by both lists

    def fit(entries: Sequence[tuple[int, str]]) -> tuple[list[int], list[str]]:
        ids, lines = [], []
        for entry_id, line in entries:
            if len(line) <= room[0]:
                ids.append(entry_id)
                lines.append(line)
                room[0] -= len(line)
        return ids, lines

    direct_ids, lines = fit([(m.id, _direct_line(m)) for m in direct])
    memory_ids, remembered = fit([(m.id, f"- {m.content}") for m in memories])
    left_out = len(direct) + len(memories) - len(direct_ids) - len(memory_ids)
    parts = []
    if lines:
        parts.append("Messages for this conversation:\n" + "\n".join(lines))
    if remembered:
        parts.append("Remembered:\n" + "\n".join(remembered))
    if left_out:
        parts.append(f"({left_out} more stored, not shown: retrieve_context can find them.)")
    text = f"# {TITLE}\n\n" + "\n\n".join(parts) if lines or remembered else ""
    return MemorySection(text, tuple(direct_ids), tuple(memory_ids), left_out)


def _direct_line(message: DirectMessage) -> str:
    source = f" (from {message.source})" if message.source else ""
    return f"- Message{source}, priority {message.priority:.1f}: {message.content}"
