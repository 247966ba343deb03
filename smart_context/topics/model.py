"""The shape of an extraction result, shared by the LLM parser and the offline extractor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STICKY_LABEL = "Instructions & Preferences"
MIN_TOPICS = 2
MAX_TOPICS = 8


@dataclass(frozen=True)
class Topic:
    """A regular topic: a 1-4 word Title Case label, how many messages are about it, and the ids
    of those the extractor assigned to it (its members: a click keeps them, and they give the
    topic its vector)."""

    label: str
    count: int
    message_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExtractedTopics:
    """What one extraction found: regular topics and the ids of sticky instruction messages."""

    topics: tuple[Topic, ...]
    sticky_ids: tuple[str, ...] = ()
    source: str = "llm"  # "llm" or "offline": which extractor produced it
    notes: tuple[str, ...] = field(default=(), compare=False)  # what was dropped, and why

    def to_chat_topics(self) -> list[dict[str, Any]]:
        """The flat ``topics`` list stored on the chat file (docs/contract.md §2)."""
        out: list[dict[str, Any]] = [
            {"label": t.label, "count": t.count}
            | ({"message_ids": list(t.message_ids)} if t.message_ids else {})
            for t in self.topics
        ]
        if self.sticky_ids:
            out.append(
                {
                    "label": STICKY_LABEL,
                    "sticky": True,
                    "message_ids": list(self.sticky_ids),
                    "count": len(self.sticky_ids),
                }
            )
        return out
