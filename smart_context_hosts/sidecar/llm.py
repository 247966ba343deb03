"""``host.llm``: one OpenAI-compatible endpoint, or the embedded offline default.

With an ``[llm]`` endpoint every call goes through ``openai.AsyncOpenAI`` (so OpenAI, Ollama,
vLLM, LM Studio and llama.cpp servers all work). Without one, ``embed`` runs the local
all-MiniLM-L6-v2 model and ``complete``/``stream`` raise :class:`NoModelConfigured`: the sidecar
never invents a reply. Every failure is an :class:`LLMError` whose message says what to do.
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from smart_context.errors import EmbeddingError, SmartContextError
from smart_context.llm_errors import describe_openai_error, missing_key_message, resolve_api_key
from smart_context.server_usage import cache_report
from smart_context_hosts.sidecar.config import SETTINGS_FILE, LLMConfig

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)

EXAMPLE_LLM_TABLE = (
    '[llm]\nbase_url = "http://127.0.0.1:11434/v1"   # Ollama; or https://api.openai.com/v1\n'
    'api_key_env = "OPENAI_API_KEY"               # only for servers that need a key\n'
    '[llm.models]\nfast = "llama3.2"\nchat = "llama3.2"'
)
NO_MODEL_MESSAGE = (
    f"No chat model is configured: add an [llm] table to {SETTINGS_FILE} in the vault folder "
    "with the base_url of an OpenAI-compatible server (OpenAI, Ollama, vLLM, LM Studio, "
    "llama.cpp) and the model names, then restart. For example:\n\n"
    # indented: set apart as an example in a terminal, and a code block where shown as Markdown
    + textwrap.indent(EXAMPLE_LLM_TABLE, "    ")
)

_TEXT_FALLBACKS = {"chat": ("chat", "fast"), "fast": ("fast", "chat")}


class LLMError(SmartContextError):
    """A model call failed; the message says what went wrong and what to do."""


class LLMEmbeddingError(LLMError, EmbeddingError):
    """``embed`` failed; an :class:`EmbeddingError` too, for callers that expect one."""


class NoModelConfigured(LLMError):
    """``complete``/``stream`` was called but the vault configures no chat model."""

    def __init__(self, message: str = NO_MODEL_MESSAGE) -> None:
        super().__init__(message)


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call as the model streams it: the pieces with the same ``index`` make
    one call (the id and name come once, the arguments JSON in slices)."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(frozen=True)
class TurnUsage:
    """What the server said one model turn cost (the ``usage`` of its stream's last chunk):
    with the prompt tokens it read from its prompt cache and wrote to it, when it said
    (:mod:`smart_context.server_usage`)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


Messages = Sequence[Mapping[str, Any]]
INCLUDE_USAGE = {"include_usage": True}
_REJECTED = frozenset({400, 422})  # what servers answer to an option they do not know


class LLMService:
    """``complete``, ``stream``, ``embed`` and ``model_name`` for one vault's ``[llm]`` table."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._client: AsyncOpenAI | None = None
        # asked for with every stream until a server refuses the option (then never again)
        self._usage_in_stream = True

    @property
    def chat_configured(self) -> bool:
        """True when replies can be generated (an endpoint and a chat or fast model)."""
        return self.model_name("chat") is not None

    @property
    def takes_tools(self) -> bool:
        """True when tools may be offered to the chat model: there is one, and ``[llm]`` does
        not say ``tools = false`` (some local models refuse a request that offers tools)."""
        return self.chat_configured and self.config.tools

    def model_name(self, category: str) -> str | None:
        """The model configured for ``category``; ``chat`` and ``fast`` stand in for each other.

        Other text categories fall back to ``fast``; ``embedding`` has no fallback (``None``
        means the local model embeds).
        """
        if not self.config.configured:
            return None
        models = self.config.models
        if category == "embedding":
            return models.get("embedding")
        for name in _TEXT_FALLBACKS.get(category, (category, "fast", "chat")):
            if name in models:
                return models[name]
        return None

    async def complete(self, messages: Messages, category: str = "fast", **params: Any) -> str:
        """The model's whole reply to ``messages``; ``params`` go to the endpoint as they are."""
        model = self._text_model(category)
        client = self._get_client()
        try:
            reply = await client.chat.completions.create(
                model=model, messages=cast(Any, messages), stream=False, **params
            )
        except Exception as exc:  # openai raises its own family; translated at this edge
            raise self._error(exc, "chat", model) from exc
        if not reply.choices:
            raise LLMError(f"The chat endpoint at {self.config.base_url} sent an empty reply.")
        return reply.choices[0].message.content or ""

    async def stream(
        self, messages: Messages, category: str = "chat", **params: Any
    ) -> AsyncIterator[str]:
        """The reply as it arrives, piece by piece (empty pieces are skipped)."""
        async for piece in self.stream_turn(messages, category, **params):
            if isinstance(piece, str):
                yield piece

    async def stream_turn(
        self, messages: Messages, category: str = "chat", **params: Any
    ) -> AsyncIterator[str | ToolCallDelta | TurnUsage]:
        """One model turn as it arrives: text pieces, and the pieces of any tool calls the
        model asks for (when ``params`` offers ``tools``); assembling them is the caller's.
        Last, what the server says the turn cost, when it says (:class:`TurnUsage`)."""
        model = self._text_model(category)
        chunks = await self._open_stream(model, messages, params)
        usage: TurnUsage | None = None
        try:
            async for chunk in chunks:
                usage = _usage_of(chunk) or usage
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    yield delta.content
                for call in delta.tool_calls or ():
                    function = call.function
                    yield ToolCallDelta(
                        index=call.index,
                        call_id=call.id,
                        name=function.name if function else None,
                        arguments=function.arguments if function else None,
                    )
        except Exception as exc:  # a connection cut mid-reply, a malformed chunk
            raise self._error(exc, "chat", model) from exc
        finally:
            await chunks.close()  # also when the reader stops early: free the connection
        if usage is not None:
            yield usage

    async def _open_stream(self, model: str, messages: Messages, params: dict[str, Any]) -> Any:
        """The stream of one turn, with the usage chunk asked for; a server that refuses the
        option (some OpenAI-compatible ones do) is asked again without it, and from then on."""
        client = self._get_client()
        asked = dict(params, stream_options=INCLUDE_USAGE) if self._usage_in_stream else params
        try:
            return await client.chat.completions.create(
                model=model, messages=cast(Any, messages), stream=True, **asked
            )
        except Exception as exc:  # openai raises its own family; translated at this edge
            if not (asked is not params and getattr(exc, "status_code", None) in _REJECTED):
                raise self._error(exc, "chat", model) from exc
            first = exc
        try:
            chunks = await client.chat.completions.create(
                model=model, messages=cast(Any, messages), stream=True, **params
            )
        except Exception as exc:  # refused for another reason: say the first refusal's
            raise self._error(first, "chat", model) from exc
        log.info("The chat endpoint refused stream_options; streaming without usage figures.")
        self._usage_in_stream = False
        return chunks

    async def embed(self, texts: list[str], category: str = "embedding") -> list[list[float]]:
        """One vector per text: the configured embedding model, else the local model."""
        texts = [str(t) for t in texts]
        if not texts:
            return []
        model = self.model_name(category)
        if model is None:
            return await _embed_locally(texts)
        client = self._get_client()
        try:
            reply = await client.embeddings.create(model=model, input=texts)
        except Exception as exc:  # openai raises its own family; translated at this edge
            raise LLMEmbeddingError(str(self._error(exc, "embedding", model))) from exc
        rows = sorted(reply.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise LLMEmbeddingError(
                f"The embedding endpoint at {self.config.base_url} returned {len(rows)} vectors "
                f"for {len(texts)} texts."
            )
        return [list(map(float, row.embedding)) for row in rows]

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    def missing_model_message(self, category: str) -> str | None:
        """Why ``category`` has no model, in words a person can act on; ``None`` if it has one."""
        if self.model_name(category) is not None:
            return None
        if not self.config.configured:
            return NO_MODEL_MESSAGE
        return (
            f"No model is configured for '{category}': add it under [llm.models] in "
            f'{SETTINGS_FILE}, for example `{category} = "llama3.2"` (then restart).'
        )

    def _text_model(self, category: str) -> str:
        model = self.model_name(category)
        if model is None:
            raise NoModelConfigured(self.missing_model_message(category) or NO_MODEL_MESSAGE)
        return model

    def _get_client(self) -> AsyncOpenAI:
        if self._client is None:
            base_url = self.config.base_url or ""
            key_env = self.config.api_key_env or "OPENAI_API_KEY"
            key = resolve_api_key(base_url, key_env)
            if key is None and self.config.api_key_env is None:
                key = "sk-none"  # no key configured: the server is trusted to need none
            if key is None:
                raise LLMError(missing_key_message(base_url, key_env, "model"))
            from openai import AsyncOpenAI  # heavy import, only once a model is used

            self._client = AsyncOpenAI(
                base_url=base_url,
                api_key=key,
                timeout=self.config.timeout,
                max_retries=self.config.max_retries,
            )
        return self._client

    def _error(self, exc: Exception, what: str, model: str) -> LLMError:
        if isinstance(exc, LLMError):
            return exc
        text = describe_openai_error(
            exc, self.config.base_url or "", what, model=model, api_key_env=self.config.api_key_env
        )
        # The shared wording names the plugin's key; in the sidecar the endpoint is [llm] base_url.
        text = text.replace("openai_base_url", f"[llm] base_url in {SETTINGS_FILE}")
        log.warning("%s", text)
        return LLMError(text)


def _usage_of(chunk: Any) -> TurnUsage | None:
    """A chunk's ``usage``, when it carries counts (most carry none; some servers send it on
    every chunk, and the last one counts)."""
    usage = _plain(getattr(chunk, "usage", None))
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt <= 0:
        return None
    completion = completion if isinstance(completion, int) and completion >= 0 else 0
    cache = cache_report(usage)
    return TurnUsage(prompt, completion, cache.cached_tokens, cache.cache_write_tokens)


def _plain(usage: Any) -> Mapping[str, Any]:
    """The ``usage`` object the ``openai`` client parsed, as the JSON the server sent: with
    the fields the client does not know (Anthropic's and DeepSeek's cache counts)."""
    if isinstance(usage, Mapping):
        return usage
    dump = getattr(usage, "model_dump", None)
    try:
        plain = dump(warnings=False) if callable(dump) else None
    except Exception:  # a server's odd usage must never cost the reply
        log.debug("An unreadable usage: %r", usage, exc_info=True)
        return {}
    return plain if isinstance(plain, Mapping) else {}


async def _embed_locally(texts: list[str]) -> list[list[float]]:
    """Embed with the plugin's offline model (the ``[local]`` extra)."""
    try:
        from smart_context.embeddings.local import shared_local_model

        vectors = await shared_local_model().embed(texts)
    except EmbeddingError as exc:
        raise LLMEmbeddingError(
            f'{exc} Or configure an embedding model: [llm.models] embedding = "..." in '
            f"{SETTINGS_FILE}."
        ) from exc
    rows: list[list[float]] = vectors.tolist()
    return rows
