"""``smart_context.usage_stats``: one chat's token usage for the panel (the figures of
``smart-context stats``, with the last request's budget and a per-reply series)."""

from __future__ import annotations

from typing import Any

from smart_context.commands.guard import Result, chat_id_argument
from smart_context.services import Services
from smart_context.usage_stats import chat_usage, usage_result


async def usage_stats(services: Services, chat_id: Any = None) -> Result:
    """Totals of the chat's replies (tokens sent, the whole history's, the ratio, the server's
    count where known), the budget of its last request, and the last replies one by one."""
    chat = chat_id_argument(services, chat_id)
    data = await services.chats.load(chat)
    return usage_result(chat_usage(chat, data))
