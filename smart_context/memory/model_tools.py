"""The chat model's memory tools as it sees them: their definitions, written for the model, and
the text it reads back from a look back, compact and bounded (:data:`RESULT_CHARS`). Running
them is :mod:`smart_context.commands.memory_tools`'s job; this module is pure, so the request
path (which counts the definitions in the budget) needs nothing of the commands.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from smart_context.mcp.config import PLUGIN_SERVER
from smart_context.shorten import shorten

RETRIEVE = "retrieve_context"
STORE = "store_memory"
MAX_LIMIT = 20  # hits the model may ask for (each brings the other half of its turn)
DEFAULT_LIMIT = 6
MAX_MEMORY_CHARS = 1000  # one fact, not a transcript: every later request carries it
RESULT_CHARS = 6000  # under the 8,000 characters of a result the reference sidecar passes on
MIN_ITEM_CHARS = 200  # a retrieved message is never cut shorter than this
MODEL_SOURCE = "chat model"  # who stored a memory, as the panel shows it

# Written for the model, and short: both definitions go with every request, inside the budget.
RETRIEVE_DESCRIPTION = (
    "Search the older parts of this chat that are not in your prompt (a long chat is sent to "
    "you only in part) and this chat's stored memories. Use it when the user refers to "
    "something said earlier that you cannot see, before answering that you do not know. "
    "Returns the matching messages, oldest first, with who said each and when."
)
STORE_DESCRIPTION = (
    "Remember one fact for the rest of this chat: a decision, preference, name or number the "
    "user will expect you to know later. Memories go with every later request; the user can "
    "see and delete them. Store one short sentence that stands on its own, not what you "
    "already remember."
)

PARAMETERS: dict[str, dict[str, Any]] = {
    RETRIEVE: {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words the earlier messages would hold."},
            "limit": {
                "type": "integer",
                "description": f"Most matches, 1-{MAX_LIMIT} (default {DEFAULT_LIMIT}).",
            },
        },
        "required": ["query"],
    },
    STORE: {
        "type": "object",
        "properties": {
            "content": {
                "type": "string",
                "description": f"The fact, at most {MAX_MEMORY_CHARS} characters.",
            },
            "importance": {"type": "number", "description": "0-1 (default 0.5)."},
        },
        "required": ["content"],
    },
}
_DESCRIPTIONS = {RETRIEVE: RETRIEVE_DESCRIPTION, STORE: STORE_DESCRIPTION}


def memory_tool_definitions() -> list[dict[str, Any]]:
    """The two tools as OpenAI function definitions, named ``smart_context__{tool}``."""
    return [
        {
            "type": "function",
            "function": {
                "name": f"{PLUGIN_SERVER}__{name}",
                "description": _DESCRIPTIONS[name],
                "parameters": parameters,
            },
        }
        for name, parameters in PARAMETERS.items()
    ]


def retrieved_text(
    query: str,
    messages: list[dict[str, Any]],
    memories: list[dict[str, Any]],
    whole: bool = False,
) -> str:
    """What the model reads of a look back, within :data:`RESULT_CHARS`: the messages (oldest
    first, each ``[when] who: text``), then the memories. ``whole``: the prompt held the whole
    chat, so no message could be found."""
    room = max(MIN_ITEM_CHARS, RESULT_CHARS // max(1, len(messages) + len(memories)) - 40)
    lines: list[str] = []
    if whole:
        lines.append("Every message of this chat is already in your prompt.")
    if messages:
        lines.append("Earlier messages of this chat, not in your prompt (oldest first):")
        lines += [
            f"[{_when(m.get('created_at'))}] {m.get('role')}: {shorten(str(m['content']), room)}"
            for m in messages
        ]
    if memories:
        lines.append("Stored memories:")
        lines += [
            f"- [{_when(m.get('created_at'))}] {shorten(str(m['content']), room)}" for m in memories
        ]
    if not messages and not memories:
        lines.append(f"Nothing found for {shorten(query, 200)!r}.")
    return _within("\n".join(lines), RESULT_CHARS)


def _within(text: str, limit: int) -> str:
    """A safety net under the per-item share: whole lines only, saying how many were left."""
    if len(text) <= limit:
        return text
    kept = text[:limit].rsplit("\n", 1)[0]
    left = text[len(kept) :].count("\n")
    return f"{kept}\n[… {left} more lines not shown]"


def _when(value: Any) -> str:
    """A message's ISO time or a memory's epoch seconds as ``2026-01-02 10:03 UTC``."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, UTC)
        elif isinstance(value, str):
            moment = datetime.fromisoformat(value)
            moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
        else:
            return "time unknown"
    except (ValueError, OverflowError, OSError):
        return "time unknown"
    return moment.strftime("%Y-%m-%d %H:%M UTC")
