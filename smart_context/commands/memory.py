"""Long memory commands (docs/contract.md §9): stored memories, pins, direct messages, and looking
back further than a request's budget reached. The MCP server serves the same functions as tools.

Stored memories are user data: listed, edited and deleted here, never dropped by the plugin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Set
from dataclasses import asdict
from datetime import datetime
from typing import Any

import numpy as np

from smart_context.commands.guard import BadArguments, Result, chat_id_argument
from smart_context.errors import NotFoundError
from smart_context.events import MEMORY_CHANGED
from smart_context.host import resolve
from smart_context.items.lexical import LexicalIndex
from smart_context.memory.records import DirectMessage, Memory
from smart_context.memory.refresh import refresh_memory
from smart_context.memory.unsent import Unsent
from smart_context.messages import History, Message, message_text
from smart_context.paths import ChatId, check_chat_id
from smart_context.services import Services
from smart_context.shorten import shorten
from smart_context.turns import Codes, partners

MAX_QUERY_CHARS = 4000
DEFAULT_LIMIT = 8
MAX_LIMIT = 50
MESSAGE_CHARS = 1500  # a retrieved message is shortened to this


async def store_memory(
    services: Services, content: Any = None, chat_id: Any = None, importance: Any = None
) -> Result:
    """Remember ``content`` for one chat (``chat_id``) or for every chat (none given)."""
    return {
        "memory": memory_row(await remember(services, content, _optional_chat(chat_id), importance))
    }


async def remember(
    services: Services, content: Any, chat: ChatId | None, importance: Any, source: str = "user"
) -> Memory:
    """Store a memory and tell the pages; the store refuses bad values as :class:`BadArguments`.
    ``source`` says who wrote it (the command: the user; the chat model's tool: the model)."""
    memory: Memory = await _db(
        services.memory_db.add_memory,
        content,
        chat,
        0.5 if importance is None else importance,
        source,
    )
    await _changed(services, chat, "memories")
    return memory


async def list_memories(services: Services, chat_id: Any = None) -> Result:
    """The memories a chat's requests are sent with (its own and the global ones); without a
    chat, every stored memory."""
    chat = _optional_chat(chat_id)
    db = services.memory_db
    found = await (
        asyncio.to_thread(db.memories, chat) if chat else asyncio.to_thread(db.all_memories)
    )
    return {"memories": [memory_row(m) for m in found]}


async def update_memory(
    services: Services, memory_id: Any = None, content: Any = None, importance: Any = None
) -> Result:
    """Edit a stored memory's text or importance."""
    memory = await _db(services.memory_db.update_memory, _memory_id(memory_id), content, importance)
    await _changed(services, memory.chat_id, "memories")
    return {"memory": memory_row(memory)}


async def delete_memory(services: Services, memory_id: Any = None) -> Result:
    """Delete one stored memory."""
    deleted = await _db(services.memory_db.delete_memory, _memory_id(memory_id))
    if not deleted:
        raise NotFoundError(f"There is no memory {memory_id}; it may have been deleted already.")
    await _changed(services, None, "memories")
    return {"deleted": True}


async def forget_context(
    services: Services, memory_id: Any = None, chat_id: Any = None, before: Any = None
) -> Result:
    """Forget one memory (``memory_id``), or a chat's memories stored before ``before`` (epoch
    seconds or an ISO 8601 time)."""
    if memory_id is not None:
        return {"forgotten": int((await delete_memory(services, memory_id))["deleted"])}
    if chat_id is None or before is None:
        raise BadArguments("Pass memory_id, or chat_id and before (a time).")
    chat = chat_id_argument(services, chat_id)
    count = await _db(services.memory_db.forget, chat, _time(before))
    await _changed(services, chat, "memories")
    return {"forgotten": count}


async def mark_important(
    services: Services, chat_id: Any = None, message_id: Any = None, important: Any = True
) -> Result:
    """Pin a message (``important`` true) or unpin it: a pinned message is sent while it fits."""
    chat = chat_id_argument(services, chat_id)
    if not isinstance(message_id, str) or not message_id:
        raise BadArguments("message_id is required: the id of a message of the chat.")
    if not isinstance(important, bool):
        raise BadArguments("important must be true or false.")
    data = await services.chats.load(chat)
    if not any(
        isinstance(m, dict) and m.get("id") == message_id for m in data.get("messages") or []
    ):
        raise BadArguments(f"Chat {chat} has no message {message_id!r}.")
    await _db(services.memory_db.set_mark, chat, message_id, important)
    await _changed(services, chat, "marks")
    return {"message_id": message_id, "important": important}


async def list_marks(services: Services, chat_id: Any = None) -> Result:
    """The ids of the chat's pinned messages."""
    chat = chat_id_argument(services, chat_id)
    return {"important_ids": sorted(await _db(services.memory_db.marks, chat))}


async def post_direct_message(
    services: Services,
    chat_id: Any = None,
    content: Any = None,
    priority: Any = 0.5,
    ttl_seconds: Any = None,
    source: Any = None,
) -> Result:
    """A note for the chat's next requests from another plugin or agent: sent in the
    memory section by priority until ``ttl_seconds`` pass."""
    chat = chat_id_argument(services, chat_id)
    message = await _db(
        services.memory_db.post_direct, chat, content, priority, ttl_seconds, source
    )
    await _changed(services, chat, "direct_messages")
    return {"direct_message": direct_row(message)}


async def list_direct_messages(services: Services, chat_id: Any = None) -> Result:
    """The chat's live direct messages, highest priority first."""
    chat = chat_id_argument(services, chat_id)
    found = await _db(services.memory_db.live_direct, chat)
    return {"direct_messages": [direct_row(m) for m in found]}


async def summarize_conversation(services: Services, chat_id: Any = None) -> Result:
    """Bring the chat's summaries and text index up to date now; the summaries, oldest first."""
    chat = chat_id_argument(services, chat_id)
    await refresh_memory(services.memory_pass, chat, force=True)
    return await list_summaries(services, chat)


async def list_summaries(services: Services, chat_id: Any = None) -> Result:
    """The chat's stored summaries as they are now, oldest first, without making any (View
    context shows the text of those a reply was sent with)."""
    chat = chat_id_argument(services, chat_id)
    stored = await _db(services.memory_db.summaries, chat)
    return {
        "summaries": [
            {
                "from_id": s.from_id,
                "to_id": s.to_id,
                "level": s.level,
                "size": s.size,
                "source": s.source,
                "text": s.text,
            }
            for s in sorted(stored, key=lambda s: (-s.level, s.created_at))
        ]
    }


async def retrieve_context(
    services: Services, query: Any = None, chat_id: Any = None, limit: Any = None
) -> Result:
    """What the store knows about ``query``: the best stored memories, and the chat's messages
    closest to it (each with the other half of its turn), however old."""
    query, limit = search_arguments(query, limit, MAX_LIMIT, DEFAULT_LIMIT)
    # without a chat_id: every stored memory, never "the chat some earlier call named" (over
    # MCP no chat is open, and another tool's chat_id must not narrow this search)
    return await look_back(services, _optional_chat(chat_id), query, limit)


async def look_back(
    services: Services,
    chat: ChatId | None,
    query: str,
    limit: int,
    unsent: Unsent | None = None,
) -> Result:
    """``memories`` and ``messages`` about ``query`` (see :func:`retrieve_context`); with
    ``unsent``, only the messages and memories a request left out of its prompt."""
    db = services.memory_db
    memories = await _db(db.memories, chat) if chat else await _db(db.all_memories)
    if unsent is not None:
        memories = [m for m in memories if m.id not in unsent.memory_ids]
    out: dict[str, Any] = {
        "memories": [memory_row(m) for m in _best_memories(memories, query, limit)]
    }
    among = None if unsent is None else unsent.message_ids
    out["messages"] = await _best_messages(services, chat, query, limit, among) if chat else []
    return out


# --- helpers ------------------------------------------------------------------------------


def search_arguments(query: Any, limit: Any, max_limit: int, default: int) -> tuple[str, int]:
    """A look back's ``query`` and ``limit`` (``default`` when none), checked."""
    if not isinstance(query, str) or not query.strip():
        raise BadArguments("query is required: what to look for.")
    if len(query) > MAX_QUERY_CHARS:
        raise BadArguments(f"query is longer than {MAX_QUERY_CHARS} characters.")
    if limit is None:
        limit = default
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= max_limit:
        raise BadArguments(f"limit must be a whole number from 1 to {max_limit}.")
    return query, limit


def memory_row(memory: Memory) -> dict[str, Any]:
    """A stored memory as commands answer it: its fields, JSON-ready."""
    return asdict(memory)


def direct_row(message: DirectMessage) -> dict[str, Any]:
    """A direct message as commands answer it: its fields, JSON-ready."""
    return asdict(message)


def _best_memories(memories: list[Memory], query: str, limit: int) -> list[Memory]:
    """Memories sharing words with ``query`` first (BM25), then by importance."""
    if not memories:
        return []
    scores = LexicalIndex.build([m.content for m in memories]).scores([query])[0]
    order = sorted(range(len(memories)), key=lambda i: (-scores[i], -memories[i].importance))
    return [memories[i] for i in order[:limit]]


async def _best_messages(
    services: Services, chat: ChatId, query: str, limit: int, among: Set[str] | None = None
) -> list[dict[str, Any]]:
    """The chat's messages closest to ``query``, each with the other half of its turn, in
    order of time; with ``among``, only messages whose id it holds."""
    data = await services.chats.load(chat)
    messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        return []
    history = History(messages)
    scores = await services.budget.relevance(chat, history, query, services.store, None)
    allowed = np.array([among is None or m.get("id") in among for m in messages], dtype=bool)
    chosen = look_back_hits(scores, history.codes, limit, allowed)
    return [_message_row(messages[i], float(scores[i])) for i in chosen]


def look_back_hits(scores: np.ndarray, codes: Codes, limit: int, allowed: np.ndarray) -> list[int]:
    """Positions a look back returns, in order of time: the ``limit`` best-scoring messages
    among ``allowed`` (score above 0), each with its partner (:func:`turns.partners`: a
    question its answer, an answer its question) when allowed. ``codes``: each message's role
    (:func:`turns.role_codes`)."""
    scores = np.where(allowed, scores, 0.0)
    best = [i for i in np.argsort(-scores, kind="stable")[:limit].tolist() if scores[i] > 0]
    partner = partners(codes, np.asarray(best, dtype=np.intp)).tolist()
    return sorted({*best, *(j for j in partner if j >= 0 and allowed[j])})


def _message_row(message: Message, score: float) -> dict[str, Any]:
    """A retrieved message: who said it, when (when the chat file says), and what."""
    row = {
        "id": message.get("id"),
        "role": message.get("role"),
        "content": shorten(message_text(message), MESSAGE_CHARS),
        "score": round(score, 3),
    }
    if isinstance(message.get("created_at"), str):
        row["created_at"] = message["created_at"]
    return row


def _optional_chat(chat_id: Any) -> ChatId | None:
    return None if chat_id is None or chat_id == "" else check_chat_id(chat_id)


def _memory_id(memory_id: Any) -> int:
    if isinstance(memory_id, bool) or not isinstance(memory_id, int) or memory_id < 1:
        raise BadArguments("memory_id must be the whole-number id of a stored memory.")
    return memory_id


def _time(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass
    raise BadArguments("before must be a time: epoch seconds or ISO 8601 (2026-11-23T10:00).")


async def _db(call: Any, *args: Any) -> Any:
    """A store call off the event loop; its refusal of a value is the caller's bad argument."""
    try:
        return await asyncio.to_thread(call, *args)
    except ValueError as exc:
        raise BadArguments(str(exc)) from None


async def _changed(services: Services, chat_id: str | None, what: str) -> None:
    payload = {"chat_id": chat_id, "what": what, "at": time.time()}
    await resolve(services.host.emit(MEMORY_CHANGED, payload))
