"""The rows the memory database hands out, and the checks on what callers put in.

Records are frozen dataclasses so a caller can keep one without it changing under them. The
checks raise ``ValueError`` with a message that names the field, the value and the allowed range,
because the text usually comes from a person (a command) or another plugin.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

MAX_MEMORY_CHARS = 20_000
MAX_DIRECT_CHARS = 4_000
MAX_SOURCE_CHARS = 200


@dataclass(frozen=True)
class Summary:
    """A summary of the messages ``from_id``..``to_id`` of a chat at one level of the hierarchy.

    Derived data: it can be rebuilt from the chat, so dropping it never loses anything.
    """

    chat_id: str
    level: int
    from_id: str
    to_id: str
    covers: str
    size: int
    text: str
    tokens: int
    source: str
    created_at: float = field(default_factory=time.time)

    @property
    def key(self) -> tuple[int, str, str]:
        """``(level, from_id, to_id)``: what makes a summary unique within its chat."""
        return (self.level, self.from_id, self.to_id)


@dataclass(frozen=True)
class Memory:
    """Something to remember, for one chat (``chat_id``) or for every chat (``chat_id`` None)."""

    id: int
    content: str
    chat_id: str | None
    importance: float
    source: str
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class DirectMessage:
    """A note another plugin posted for a chat's context, live until ``expires_at`` (None: ever)."""

    id: int
    chat_id: str
    content: str
    priority: float
    source: str | None
    created_at: float
    expires_at: float | None


def check_text(what: str, content: object, limit: int) -> str:
    """``content`` if it is a non-blank string of at most ``limit`` characters."""
    if not isinstance(content, str) or not content.strip():
        raise ValueError(f"The {what} must be non-empty text; got {_show(content)}.")
    if len(content) > limit:
        raise ValueError(
            f"The {what} is {len(content):,} characters long; the limit is {limit:,}. "
            "Shorten it or split it into several."
        )
    return content


def check_fraction(what: str, value: object) -> float:
    """``value`` as a float if it is a number from 0 to 1 (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"The {what} must be a number from 0 to 1; got {_show(value)}.")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"The {what} must be from 0 to 1; got {value}.")
    return float(value)


def check_ttl(ttl_seconds: object) -> float | None:
    """``ttl_seconds`` as a float if it is None (never expires) or a positive, finite number."""
    if ttl_seconds is None:
        return None
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise ValueError(
            f"ttl_seconds must be a number of seconds or None; got {_show(ttl_seconds)}."
        )
    if not (ttl_seconds > 0 and math.isfinite(ttl_seconds)):
        raise ValueError(
            f"ttl_seconds must be more than 0 (or None for no expiry); got {ttl_seconds}."
        )
    return float(ttl_seconds)


def check_source(source: object) -> str:
    """``source`` if it is a short non-empty label such as ``"user"`` or a plugin's name."""
    return check_text("source", source, MAX_SOURCE_CHARS)


def _show(value: object) -> str:
    """A short, safe picture of a rejected value for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
