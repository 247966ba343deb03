"""The command table: one typed function per command, bound to the running services.

The same table serves every caller (the UI through the host, the command line, and later MCP),
so a command behaves the same wherever it is called from.
"""

from __future__ import annotations

from smart_context.commands import items, memory, topics, usage
from smart_context.commands.guard import Command, Handler, bind
from smart_context.services import Services

COMMANDS: dict[str, Command] = {
    "smart_context.set_filter": topics.set_filter,
    "smart_context.get_topics": topics.get_topics,
    "smart_context.set_similarity_mode": topics.set_similarity_mode,
    "smart_context.list_items": items.list_items,
    "smart_context.add_item": items.add_item,
    "smart_context.remove_item": items.remove_item,
    "smart_context.search_items": items.search_items,
    "smart_context.set_session_settings": items.set_session_settings,
    "smart_context.call_tool": items.call_tool,
    # long memory (docs/contract.md §9)
    "smart_context.store_memory": memory.store_memory,
    "smart_context.retrieve_context": memory.retrieve_context,
    "smart_context.summarize_conversation": memory.summarize_conversation,
    "smart_context.mark_important": memory.mark_important,
    "smart_context.forget_context": memory.forget_context,
    "smart_context.post_direct_message": memory.post_direct_message,
    "smart_context.list_memories": memory.list_memories,
    "smart_context.update_memory": memory.update_memory,
    "smart_context.delete_memory": memory.delete_memory,
    "smart_context.list_marks": memory.list_marks,
    "smart_context.list_direct_messages": memory.list_direct_messages,
    "smart_context.list_summaries": memory.list_summaries,
    # usage you can see (the panel's Budget and usage)
    "smart_context.usage_stats": usage.usage_stats,
}


def make_commands(services: Services) -> dict[str, Handler]:
    """The handlers bound to ``services``, by their contract names."""
    return {name: bind(command, services) for name, command in COMMANDS.items()}
