"""Build the embedder the settings ask for; heavy libraries load only here, on first use."""

from __future__ import annotations

from smart_context.background import to_thread
from smart_context.config import Settings
from smart_context.embeddings.base import Embedder
from smart_context.embeddings.host import HostEmbedder
from smart_context.host import Host


async def make_embedder(settings: Settings, host: Host) -> Embedder:
    """``host``: the vault's model; ``local``: our own MiniLM; ``openai``: a configured endpoint."""
    if settings.embedder == "local":
        from smart_context.embeddings.local import shared_local_model

        return await to_thread(shared_local_model)
    if settings.embedder == "openai":
        from smart_context.embeddings.openai_api import OpenAIEmbedder

        return OpenAIEmbedder.from_settings(
            base_url=settings.openai_base_url,
            model=settings.openai_embedding_model,
            api_key_env=settings.openai_api_key_env,
            batch_size=settings.embed_batch_size,
        )
    return await HostEmbedder.from_host(host.llm)
