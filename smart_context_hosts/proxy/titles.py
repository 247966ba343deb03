"""The title a client generates for a chat, taken for the vault chat.

Open WebUI names each chat with a background call of its own after the first reply: one user
message starting ``### Task:`` that asks for ``{"title": ...}`` as JSON (its
``DEFAULT_TITLE_GENERATION_PROMPT_TEMPLATE``). The proxy passes that call untouched, reads the
answer on the side, and gives the vault chat the title, unless the chat was renamed: a title
other than the one taken from its first message is the user's, and stays. Pure functions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from smart_context_hosts.proxy.conversation import text_of
from smart_context_hosts.sidecar.pipeline import title_from

TASK = "### Task:"
ASKS_TITLE = re.compile(r'generate a concise.{0,40}title|\{\s*"title"\s*:', re.I | re.S)
MAX_ANSWER_BYTES = 64 * 1024  # a title's answer is a few hundred bytes
ChatData = dict[str, Any]


def asks_title(body: Mapping[str, Any]) -> bool:
    """Whether a background call asks for the chat's title (Open WebUI's shape of one)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) != 1 or not isinstance(messages[0], dict):
        return False
    text = text_of(messages[0].get("content"))
    return text.lstrip().startswith(TASK) and bool(ASKS_TITLE.search(text[:2000]))


def title_in(answer: bytes) -> str | None:
    """The title in an OpenAI chat completion answering :func:`asks_title` (its content is
    ``{"title": "..."}``, perhaps in a code fence or among words), or ``None``."""
    try:
        data = json.loads(answer[:MAX_ANSWER_BYTES])
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, str):
        return None
    found = re.search(r"\{.*\}", content, re.S)
    try:
        said = json.loads(found.group(0)) if found else None
    except ValueError:
        said = None
    title = said.get("title") if isinstance(said, dict) else None
    if not isinstance(title, str):
        return None
    title = title_from(title.strip().strip("\"'“”"))
    return title or None


def titled(title: str) -> Callable[[ChatData], ChatData]:
    """The chat update that takes ``title``: only for a chat with messages whose title is
    still the one its first message gave (or none)."""

    def update(data: ChatData) -> ChatData:
        messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
        first = next((m for m in messages if m.get("role") == "user"), None)
        if first is None:
            return data
        now = str(data.get("title") or "").strip()
        if now and now != title_from(text_of(first.get("content"))):
            return data  # renamed by the user
        return {**data, "title": title}

    return update
