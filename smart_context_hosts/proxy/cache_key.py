"""``prompt_cache_key``: which chat a request belongs to, for an upstream that routes its prompt
cache by it.

OpenAI sends requests that share a key to the machines that hold their prefix, so a chat's
turns keep hitting its cache. The key names the vault chat by a short hash of the vault and the
chat id (the id itself never goes upstream); the same chat always gets the same key. It goes to
OpenAI (an ``api.openai.com`` base URL, or a model of OpenAI's family through any server)
when the client's body set none: a client's own key is never replaced.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from smart_context.budget.cache import family_of

KEY = "prompt_cache_key"
OPENAI_HOST = "api.openai.com"


def prompt_cache_key(vault: Path, chat_id: str) -> str:
    """The chat's key: 16 hex characters of a BLAKE2b hash of the vault and the chat id."""
    seed = f"{vault}\n{chat_id}".encode()
    return hashlib.blake2b(seed, digest_size=8, person=b"sc-cache-key").hexdigest()


def takes_cache_key(upstream: str | None, model: Any) -> bool:
    """Whether a request to ``upstream`` for ``model`` goes to OpenAI, which takes a key."""
    try:
        host = urlsplit(upstream).hostname if upstream else None
    except ValueError:  # not a URL the proxy could have sent to anyway
        host = None
    if host == OPENAI_HOST:
        return True
    return isinstance(model, str) and family_of(model).name == "openai"


def with_cache_key(
    body: dict[str, Any], vault: Path, chat_id: str, upstream: str | None
) -> dict[str, Any]:
    """``body`` with the chat's key added where it is wanted and the client set none."""
    if KEY in body or not takes_cache_key(upstream, body.get("model")):
        return body
    return {**body, KEY: prompt_cache_key(vault, chat_id)}
