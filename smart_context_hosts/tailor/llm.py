"""``host.llm`` inside Tailor: its LLM service, by model category.

Tailor configures a model per category in ``.vault.toml`` (``[llm.categories]``); topics and
summaries use ``fast`` (the ``extraction_category`` setting), vectors ``embedding`` when the vault
asks for the host's embeddings (``embedder = "host"``; ``"local"`` keeps them on this machine).
The service is looked up on each call: Tailor creates it while it starts, and again on a vault
restart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from smart_context.errors import SmartContextError

LLMServiceGetter = Callable[[], Any]


def tailor_llm_service() -> Any:
    """Tailor's LLM service (``sidecar.services.llm_service.get_llm_service()``)."""
    try:
        from sidecar.services.llm_service import get_llm_service

        return get_llm_service()
    except (ImportError, RuntimeError) as exc:
        raise SmartContextError(f"Tailor's LLM service is not available: {exc}") from exc


class TailorLLM:
    """``complete`` and ``embed`` through Tailor's ``LLMService``."""

    def __init__(self, service: LLMServiceGetter = tailor_llm_service) -> None:
        self._service = service

    async def complete(
        self, messages: list[dict[str, str]], category: str = "fast", **params: Any
    ) -> str:
        """The reply's text; Tailor answers with an ``LLMResponse`` whose ``content`` it is."""
        params.pop("stream", None)  # we need the whole reply, never Tailor's token generator
        reply = await self._service().complete(messages=messages, category=category, **params)
        content = getattr(reply, "content", reply)
        if not isinstance(content, str):
            raise SmartContextError(f"Tailor's {category!r} model returned no text.")
        return content

    async def embed(self, texts: list[str], category: str = "embedding") -> list[list[float]]:
        """One vector per text from the category's model."""
        vectors = await self._service().embed(list(texts), category=category)
        return list(vectors)

    def model_name(self, category: str) -> str | None:
        """The model configured for ``category``: vectors of another model are never compared
        with this one's (the embedding cache keys on it)."""
        name = self._service().get_model_for_category(category)
        return name if isinstance(name, str) and name else None
