"""The events Smart Context sends with ``host.emit`` (docs/contract.md §4)."""

from __future__ import annotations

TOPICS_UPDATED = "smart_context.topics_updated"  # chat_id, topics, total_messages
FILTER_CHANGED = (
    "smart_context.filter_changed"  # chat_id, active_topics, included_ids, total_messages
)
ITEMS_CHANGED = "smart_context.items_changed"  # chat_id, items (the session, docs/contract.md §8)
# chat_id, what ("summaries"), done, total: a long chat's first summaries being made
# (docs/contract.md §9)
MEMORY_PROGRESS = "smart_context.memory_progress"
# chat_id (None: every chat), what ("memories", "marks", "direct_messages"), at
MEMORY_CHANGED = "smart_context.memory_changed"
