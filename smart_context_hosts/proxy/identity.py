"""Which vault chat a proxied request belongs to, and which requests are not chat turns.

A stateless client resends the whole conversation, so the chat must be named by the client. In
order: a header (ours, Open WebUI's, or one the user names, such as a template LibreChat fills
with its conversation id), then ``metadata`` in the body, then ``user`` when asked for.
Without one the request passes through untouched: guessing from the conversation's first
message merged unrelated chats that began alike, so that guess (:func:`prefix_chat`) is only
made when asked for.

An id that is not a valid chat id (``../../etc``, an e-mail address as ``user``) is never used
as a file name: it becomes ``h-`` and a hash of it, the same each time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blake3 import blake3

from smart_context.errors import ChatIdError
from smart_context.paths import check_chat_id
from smart_context_hosts.proxy.conversation import Split, text_of

CHAT_HEADERS = ("x-smart-context-chat", "x-openwebui-chat-id")
TASK_HEADERS = ("x-smart-context-task", "x-openwebui-task")  # templated: {{TASK}}
METADATA_KEYS = ("chat_id", "conversation_id", "session_id")
OPEN_WEBUI_TASK = "### Task:"
MAX_ID_CHARS = 1_000


@dataclass(frozen=True)
class Chat:
    """The chat a request belongs to, and where that was read (for the response header)."""

    chat_id: str
    source: str


def which_chat(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    extra_headers: Sequence[str] = (),
    user_chats: bool = False,
) -> Chat | None:
    """The chat named by the request, or ``None`` when it names none. ``user_chats``: the
    body's ``user`` names a chat too (it names a person: all of theirs become one chat, and
    each conversation then replaces the other's messages, so only on request)."""
    for name in (*CHAT_HEADERS, *(h.lower() for h in extra_headers)):
        value = headers.get(name, "").strip()
        if value:
            return Chat(safe_chat_id(value), f"header {name}")
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        for key in METADATA_KEYS:
            given = metadata.get(key)
            if isinstance(given, str | int) and str(given).strip():
                return Chat(safe_chat_id(str(given).strip()), f"metadata.{key}")
    user = body.get("user")
    if user_chats and isinstance(user, str) and user.strip():
        return Chat(safe_chat_id(user.strip()), "user")
    return None


def safe_chat_id(value: str) -> str:
    """``value`` when it is a valid chat id, else ``h-`` and a hash of it."""
    try:
        return check_chat_id(value)
    except ChatIdError:
        return "h-" + blake3(value[:MAX_ID_CHARS].encode("utf-8", "replace")).hexdigest()[:32]


def prefix_chat(parts: Split) -> Chat:
    """The opt-in guess: one chat per system prompt and first user message. Two conversations
    that begin with the same words ("hi") become one chat: see docs/proxy.md."""
    first = next((m for m in parts.history if m.get("role") == "user"), parts.message)
    key = blake3()
    for message in (*parts.lead, first):
        key.update(str(message.get("role")).encode() + b"\x00")
        key.update(text_of(message.get("content")).encode("utf-8", "replace") + b"\x00")
    return Chat("p-" + key.hexdigest()[:32], "first message")


def background_task(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """Why a request is a client's own background call (a title, tags, follow-up questions)
    and no chat turn, or ``None``: a task header, or Open WebUI's shape of one (no tools, not
    streamed, a single user message that starts ``### Task:``)."""
    for name in TASK_HEADERS:
        if headers.get(name, "").strip():
            return f"{name}: {headers[name].strip()[:40]}"
    messages = body.get("messages")
    if (
        not body.get("tools")
        and not body.get("stream")
        and isinstance(messages, list)
        and len(messages) == 1
        and isinstance(messages[0], dict)
        and messages[0].get("role") == "user"
        and text_of(messages[0].get("content")).lstrip().startswith(OPEN_WEBUI_TASK)
    ):
        return "a background task (### Task:)"
    return None


def lowered(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-case name (the last of a repeated one)."""
    return {k.lower(): v for k, v in headers}
