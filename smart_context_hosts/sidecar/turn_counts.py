"""The chat list's count of each chat's real turns, kept as the chat grows."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from smart_context.messages import conversation


class TurnCounts:
    """Each chat's count of real turns (:func:`~smart_context.messages.conversation`), kept as
    the chat grows: the page lists the chats after every message, and counting a
    10,000-message chat again took 8 ms each time. Only the messages after the last count are
    looked at, when the message it ended on is still there, unchanged; else all of them."""

    MAX_CHATS = 256

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, Any, int]] = {}  # chat -> (messages, last's key, turns)
        self._lock = threading.Lock()  # the chat list is made in worker threads

    def count(self, chat_id: str, data: Mapping[str, Any]) -> int:
        messages = data.get("messages")
        if not isinstance(messages, list):
            return 0
        start, turns = 0, 0
        with self._lock:
            known = self._known.get(chat_id)
        if known is not None:
            n, key, counted = known
            if 0 < n <= len(messages) and _turn_key(messages[n - 1]) == key:
                start, turns = n, counted
        turns += len(conversation(messages[start:]))
        if messages:
            with self._lock:
                if len(self._known) >= self.MAX_CHATS and chat_id not in self._known:
                    self._known.clear()
                self._known[chat_id] = (len(messages), _turn_key(messages[-1]), turns)
        return turns


def _turn_key(message: Any) -> Any:
    """What decides whether a message is a turn, and which message it is."""
    if not isinstance(message, dict):
        return repr(message)
    return (
        message.get("id"),
        message.get("role"),
        repr(message.get("content")),
        "notice" in message,
        "error" in message,
    )
