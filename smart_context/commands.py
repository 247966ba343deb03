"""The commands of CONTRACT.md §3: argument checks, then one engine call each.

Handlers take keyword arguments and always return a dict: ``{"status": "success", ...}`` or
``{"status": "error", "error": "<what to do>"}``. Nothing raises out of a handler.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from smart_context.engine import Engine
from smart_context.errors import SmartContextError

log = logging.getLogger(__name__)

Result = dict[str, Any]
MAX_TOPICS = 16
MAX_LABEL = 100


class BadArguments(SmartContextError):
    """A command was called with arguments it cannot use."""


def _error(message: str) -> Result:
    return {"status": "error", "error": message}


def guarded(fn: Callable[..., Awaitable[Result]]) -> Callable[..., Awaitable[Result]]:
    """Turn every failure into an error result: the UI shows it; the host never sees a raise."""

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    async def handler(**kwargs: Any) -> Result:
        try:
            signature.bind(**kwargs)
        except TypeError as exc:  # unexpected or missing keyword arguments
            return _error(f"{fn.__name__.replace('_', ' ')}: {exc}")
        try:
            return {"status": "success"} | await fn(**kwargs)
        except SmartContextError as exc:
            return _error(str(exc))
        except Exception as exc:  # a handler must never raise into the host's command bus
            log.exception("Smart Context: command %s failed", fn.__name__)
            return _error(f"Smart Context could not complete the command: {exc}")

    return handler


def _chat_id(engine: Engine, chat_id: Any) -> str:
    if chat_id is None or chat_id == "":
        if engine.current_chat_id is None:
            raise BadArguments("No chat is open: pass chat_id.")
        return engine.current_chat_id
    return engine.remember_chat(chat_id)


def _topics(topics: Any) -> list[str]:
    if topics is None:
        return []
    if isinstance(topics, str) or not isinstance(topics, list):
        raise BadArguments(
            "topics must be a list of topic labels (an empty list clears the filter)."
        )
    if len(topics) > MAX_TOPICS:
        raise BadArguments(f"Select at most {MAX_TOPICS} topics at once.")
    labels = []
    for topic in topics:
        if not isinstance(topic, str) or not topic.strip() or len(topic) > MAX_LABEL:
            raise BadArguments(
                f"Each topic must be a non-empty label of at most {MAX_LABEL} characters."
            )
        labels.append(topic.strip())
    return labels


def make_commands(engine: Engine) -> dict[str, Callable[..., Awaitable[Result]]]:
    """The command handlers bound to ``engine``, by their contract names."""

    @guarded
    async def set_filter(topics: Any = None, chat_id: Any = None) -> Result:
        return await engine.set_filter(_chat_id(engine, chat_id), _topics(topics))

    @guarded
    async def get_topics(chat_id: Any = None) -> Result:
        return await engine.topics(_chat_id(engine, chat_id))

    @guarded
    async def set_similarity_mode(enabled: Any = None) -> Result:
        if not isinstance(enabled, bool):
            raise BadArguments("enabled must be true or false.")
        warning = await engine.set_search(enabled)
        return {"embedding_search": enabled} | ({"warning": warning} if warning else {})

    return {
        "smart_context.set_filter": set_filter,
        "smart_context.get_topics": get_topics,
        "smart_context.set_similarity_mode": set_similarity_mode,
    }
