"""Anthropic's explicit prompt-cache breakpoints on a rebuilt request (docs/proxy.md).

Claude caches a prefix only up to a block marked ``cache_control``; a request through an
OpenAI-compatible gateway that passes the marks on (LiteLLM, OpenRouter) carries them on text
parts, and Anthropic's own compatibility layer ignores them. Two marks, where the cache-stable
layout (docs/contract.md §9) keeps its bytes from one request to the next: the end of the
leading system messages (the client's prompt and the plugin's stable part), and the end of the
kept history, before what was chosen for this message and the user's message.
"""

from __future__ import annotations

from typing import Any

MARK = {"type": "ephemeral"}


def with_breakpoints(messages: list[dict[str, Any]], user_at: int) -> list[dict[str, Any]]:
    """``messages`` with a cache mark at the end of the leading system messages and at the
    last message of the history before ``user_at`` (the user's message) and any system
    message just before it; the messages marked are copies, the rest as they were."""
    lead = 0
    while lead < user_at and messages[lead].get("role") == "system":
        lead += 1
    kept = user_at - 1
    while kept >= lead and messages[kept].get("role") == "system":
        kept -= 1
    out = list(messages)
    for at in {lead - 1, kept}:
        if at >= 0:
            out[at] = _marked(out[at])
    return out


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with its last text part marked (a text content becomes one part)."""
    content = message.get("content")
    if isinstance(content, str) and content:
        return {**message, "content": [{"type": "text", "text": content, "cache_control": MARK}]}
    if isinstance(content, list):
        texts = [
            k for k, p in enumerate(content) if isinstance(p, dict) and p.get("type") == "text"
        ]
        if texts:
            parts = list(content)
            parts[texts[-1]] = {**parts[texts[-1]], "cache_control": MARK}
            return {**message, "content": parts}
    return message  # nothing to mark (a tool call without text): the mark goes unplaced
