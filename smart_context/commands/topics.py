"""The topic commands of docs/contract.md §3: ``set_filter``, ``get_topics``,
``set_similarity_mode``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smart_context import config
from smart_context.commands.guard import BadArguments, Result, chat_id_argument, topics_argument
from smart_context.context.assemble import included
from smart_context.errors import ConflictError, NotFoundError, SmartContextError
from smart_context.events import FILTER_CHANGED
from smart_context.host import resolve
from smart_context.paths import ChatId, chat_file, set_aside_chat_files
from smart_context.services import Services

MIN_MESSAGES_TO_MAP = 4  # fewer messages have no subjects worth a bubble cloud


async def set_filter(services: Services, topics: Any = None, chat_id: Any = None) -> Result:
    """Select topics for a chat (an empty list clears) and tell the UI what is now in context."""
    chat = chat_id_argument(services, chat_id)
    services.current_chat_id = chat  # the panel acts on the chat it shows: it is the open one
    return await select(services, chat, topics_argument(topics))


async def get_topics(services: Services, chat_id: Any = None) -> Result:
    """The chat's topics and filter state, for the panel.

    A chat with substance but no topics yet (a vault made elsewhere, or before the plugin was
    installed) is mapped in the background now; ``topics_updated`` follows.
    """
    chat = chat_id_argument(services, chat_id)
    services.current_chat_id = chat  # the panel opens the chat it shows: it is the open one
    await services.chats.load(chat)
    view = await services.chats.view(chat)
    ids, how = await included(services, chat, view.messages)
    mapping = not view.topics and len(ids) >= MIN_MESSAGES_TO_MAP
    if mapping:
        services.schedule_refresh(chat)
    return {
        "chat_id": chat,
        "topics": view.topics,
        "total_messages": view.total_messages,
        "active_topics": list(view.active_topics),
        "included_ids": ids,
        **how,
        "embedding_search": services.settings.embedding_search,
        "extracting": mapping or chat in services.background.running,
    }


async def set_similarity_mode(services: Services, enabled: Any = None) -> Result:
    """Turn the topic filter on or off, for this session and in ``.vault.toml``."""
    if not isinstance(enabled, bool):
        raise BadArguments("enabled must be true or false.")
    services.settings = config.replace(services.settings, embedding_search=enabled)
    warning = None
    try:
        await asyncio.to_thread(
            config.write_setting, services.host.vault_path, "embedding_search", enabled
        )
    except (OSError, SmartContextError) as exc:
        warning = (
            "The similarity filter changed for this session, but .vault.toml was not "
            f"updated: {exc}"
        )
    if services.current_chat_id:
        await announce_filter(services, services.current_chat_id)
    return {"embedding_search": enabled} | ({"warning": warning} if warning else {})


async def select(services: Services, chat_id: ChatId, topics: Sequence[str]) -> Result:
    """Select ``topics`` in memory now (saved in the background) and announce the result."""
    view = await services.chats.view(chat_id)
    if not view.messages and not view.topics:
        # a new chat, or a mistyped id: saving a choice would create an empty chat file
        if topics:
            raise nothing_to_filter(services.host.vault_path, chat_id)
        return await announce_filter(services, chat_id)
    services.chats.select(chat_id, topics)
    return await announce_filter(services, chat_id)


def nothing_to_filter(vault: Path, chat_id: ChatId) -> SmartContextError:
    """Why ``chat_id``, read as empty, cannot be filtered: its file was set aside as damaged
    (:class:`ConflictError`, naming the copy), it is empty (also), or it does not exist
    (:class:`NotFoundError`, a mistyped id most likely)."""
    if chat_file(vault, chat_id).exists():
        return ConflictError(f"Chat {chat_id!r} has no messages to filter.")
    aside = set_aside_chat_files(vault, chat_id)
    if aside:
        return ConflictError(
            f"Chat {chat_id!r} has no messages to filter: its file was damaged and set aside as "
            f".memory/{aside[0].name}. Recover what you need from that copy."
        )
    return NotFoundError(f"Chat {chat_id!r} does not exist: it has no messages to filter.")


async def announce_filter(services: Services, chat_id: ChatId) -> Result:
    """Emit ``filter_changed`` for a chat and return its payload (plus the mode)."""
    view = await services.chats.view(chat_id)
    ids, how = await included(services, chat_id, view.messages)
    active = list(view.active_topics) if services.settings.embedding_search else []
    payload = {
        "chat_id": chat_id,
        "active_topics": active,
        "included_ids": ids,
        "total_messages": view.total_messages,
    }
    # the mode (and on a fallback, the note) ride along: a page must never say "N of N in
    # context" for a click that did nothing
    payload |= how
    await resolve(services.host.emit(FILTER_CHANGED, payload))
    return payload
