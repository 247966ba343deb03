"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint, through the ``openai`` client.

Works with OpenAI itself and with local servers (Ollama, vLLM, LM Studio, llama.cpp). Texts go out
in batches, one request per batch, and the rows come back unit-length and in input order. Every
failure at this edge becomes an :class:`~smart_context.errors.EmbeddingError` whose message says
what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import numpy as np

from smart_context.errors import EmbeddingError
from smart_context.llm_errors import describe_openai_error, missing_key_message, resolve_api_key
from smart_context.vectors.ops import Matrix, normalize_rows

if TYPE_CHECKING:
    from openai import AsyncOpenAI

# A refused connection should surface in about a second, not after the client's default backoff.
_MAX_RETRIES = 1


class OpenAIEmbedder:
    """An :class:`~smart_context.embeddings.base.Embedder` over an OpenAI-compatible endpoint.

    Takes a ready ``openai.AsyncOpenAI`` client; :meth:`from_settings` builds one from settings.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        model: str,
        batch_size: int = 64,
        api_key_env: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.client = client
        self.model = model
        self.batch_size = batch_size
        self.model_id = f"openai:{model}"
        self.dim: int | None = None  # learnt from the first reply
        self._api_key_env = api_key_env

    @classmethod
    def from_settings(
        cls,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        batch_size: int = 64,
        timeout: float = 30.0,
    ) -> OpenAIEmbedder:
        """An embedder for ``model`` at ``base_url``, its key read from variable ``api_key_env``.

        Loopback servers get a placeholder key when the variable is unset; a remote one raises
        :class:`EmbeddingError` naming the variable.
        """
        if urlsplit(base_url).scheme not in ("http", "https"):
            raise EmbeddingError(
                f"openai_base_url must be an http:// or https:// URL such as "
                f"http://localhost:11434/v1, got {base_url!r}."
            )
        api_key = resolve_api_key(base_url, api_key_env)
        if api_key is None:
            raise EmbeddingError(missing_key_message(base_url, api_key_env, "embedding"))
        import openai  # heavy; only users of this backend pay for it

        client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=_MAX_RETRIES
        )
        return cls(client, model, batch_size=batch_size, api_key_env=api_key_env)

    @property
    def base_url(self) -> str:
        """The endpoint's base URL, as the client uses it."""
        return str(self.client.base_url).rstrip("/")

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text, in order; one request per ``batch_size`` texts."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        # Sequential on purpose: hosted APIs rate-limit bursts and local servers run one at a time.
        batches = [
            await self._embed_batch(items[start : start + self.batch_size])
            for start in range(0, len(items), self.batch_size)
        ]
        dims = {batch.shape[1] for batch in batches}
        if len(dims) != 1:
            raise EmbeddingError(self._bad_reply(f"vectors of different sizes {sorted(dims)}"))
        self.dim = dims.pop()
        return normalize_rows(np.concatenate(batches))

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self.client.close()

    async def _embed_batch(self, batch: list[str]) -> Matrix:
        import openai

        # OpenAI rejects an empty string outright; a blank still gets its (meaningless) row.
        payload = [text if text.strip() else " " for text in batch]
        try:
            response = await self.client.embeddings.create(
                model=self.model, input=payload, encoding_format="float"
            )
        except openai.OpenAIError as exc:
            raise EmbeddingError(self._describe(exc)) from exc
        return self._rows_of(response, expected=len(batch))

    def _rows_of(self, response: object, expected: int) -> Matrix:
        """The reply's vectors ordered by ``index``, checked for count and shape."""
        # The client validates loosely: a web page at the wrong URL arrives here as a plain str.
        data = getattr(response, "data", None)
        if not isinstance(data, list):
            raise EmbeddingError(
                f"The embedding endpoint at {self.base_url} did not answer like an OpenAI API "
                f"(got {type(response).__name__}). Check openai_base_url; it usually ends in /v1."
            )
        try:
            items = sorted(data, key=lambda item: int(item.index))
            indices = [int(item.index) for item in items]
            rows = [np.asarray(item.embedding, dtype=np.float32) for item in items]
        except (TypeError, ValueError, AttributeError) as exc:
            raise EmbeddingError(self._bad_reply(f"unreadable vectors ({exc})")) from exc
        if len(indices) != expected:
            raise EmbeddingError(self._bad_reply(f"{len(indices)} vectors for {expected} texts"))
        if indices != list(range(expected)):
            raise EmbeddingError(self._bad_reply(f"vectors numbered {indices[:10]}"))
        if any(row.ndim != 1 or row.size == 0 for row in rows):
            raise EmbeddingError(self._bad_reply("empty or nested vectors"))
        sizes = sorted({row.size for row in rows})
        if len(sizes) != 1:
            raise EmbeddingError(self._bad_reply(f"vectors of different sizes {sizes}"))
        matrix = np.stack(rows)
        if not np.isfinite(matrix).all():
            raise EmbeddingError(self._bad_reply("vectors containing NaN or infinity"))
        return matrix

    def _describe(self, exc: BaseException) -> str:
        return describe_openai_error(
            exc, self.base_url, "embedding", model=self.model, api_key_env=self._api_key_env
        )

    def _bad_reply(self, problem: str) -> str:
        return (
            f"The embedding endpoint at {self.base_url} sent {problem} for model "
            f"'{self.model}'. Is it an embedding model? Check openai_embedding_model."
        )
