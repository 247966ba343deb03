"""What a server says its prompt cache did, read from the ``usage`` of its reply.

Providers report the part of a prompt served from their cache, each in its own words:

- OpenAI (and Gemini's OpenAI-compatible endpoint): ``usage.prompt_tokens_details.cached_tokens``
  (and ``cache_write_tokens`` there, where it reports writes);
- Anthropic's OpenAI-compatible shape and LiteLLM's: ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens`` (tokens written to the cache), at the top of ``usage`` or
  inside ``prompt_tokens_details``;
- DeepSeek: ``prompt_cache_hit_tokens`` (and ``prompt_cache_miss_tokens``, the rest of the
  prompt);
- a host that already read them (the reference sidecar, the proxy): ``cached_tokens`` and
  ``cache_write_tokens`` at the top of ``usage``.

:func:`cache_report` reads any of them into two counts. A ``usage`` is a server's or a
client's word, possibly hostile: a figure that is not a count (negative, a flag, text, a list)
is not read, and nothing here raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DETAILS = "prompt_tokens_details"
# where each figure is said, most specific first: (inside prompt_tokens_details?, key)
READ_KEYS = (
    (False, "cached_tokens"),
    (True, "cached_tokens"),
    (False, "cache_read_input_tokens"),
    (True, "cache_read_input_tokens"),
    (False, "prompt_cache_hit_tokens"),
)
WRITE_KEYS = (
    (False, "cache_write_tokens"),
    (True, "cache_write_tokens"),
    (False, "cache_creation_input_tokens"),
    (True, "cache_creation_input_tokens"),
)


@dataclass(frozen=True)
class CacheReport:
    """The prompt tokens a server read from its cache and wrote to it; ``None`` where it said
    nothing."""

    cached_tokens: int | None = None
    cache_write_tokens: int | None = None

    def as_dict(self) -> dict[str, int]:
        """The figures the server said, under their keys (none for what it did not say)."""
        out = {"cached_tokens": self.cached_tokens, "cache_write_tokens": self.cache_write_tokens}
        return {key: value for key, value in out.items() if value is not None}


def token_count(value: Any) -> int | None:
    """``value`` as a token count, or ``None`` when it is not one (text, a flag, negative, not
    finite)."""
    if type(value) is int:  # what servers and the plugin write: the fast path of a long chat
        return value if value >= 0 else None
    if type(value) is not float:  # absent, text, a flag, a list: no count
        return None
    return int(value) if math.isfinite(value) and value >= 0 else None


def cache_report(usage: Any) -> CacheReport:
    """The cache figures of a ``usage`` object in any of the shapes above."""
    if not usage or not isinstance(usage, dict | Mapping):  # dict first: the quick check
        return CacheReport()
    details = usage.get(DETAILS)
    places = (usage, details if isinstance(details, dict | Mapping) else {})

    def first(keys: tuple[tuple[bool, str], ...]) -> int | None:
        for nested, key in keys:
            value = places[nested].get(key)
            if value is not None and (found := token_count(value)) is not None:
                return found
        return None

    cached = first(READ_KEYS)
    if cached is None:  # DeepSeek may say only what missed: the rest of the prompt hit
        prompt = token_count(usage.get("prompt_tokens"))
        missed = token_count(usage.get("prompt_cache_miss_tokens"))
        if prompt is not None and missed is not None:
            cached = max(prompt - missed, 0)
    return CacheReport(cached, first(WRITE_KEYS))
