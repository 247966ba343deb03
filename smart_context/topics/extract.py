"""Which extractor runs: the fast model first, the offline extractor when it gives nothing usable.

The offline extractor clusters for seconds on a long chat, so it runs in a worker process
driven from a thread of its own (:mod:`smart_context.topics.worker`); the phrase embedder it may
use lives on the event loop and is called across.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any

from smart_context.background import to_thread
from smart_context.config import Settings
from smart_context.errors import EmbeddingError, ExtractionError, SmartContextError
from smart_context.host import LLM, resolve
from smart_context.topics.model import ExtractedTopics
from smart_context.topics.prompt import build_extraction_messages
from smart_context.topics.reply import parse_extraction_reply
from smart_context.vectors.ops import Matrix

log = logging.getLogger(__name__)

PhraseEmbedder = Callable[[Sequence[str]], Coroutine[Any, Any, Matrix]]
# The offline extractor's own threads. It waits in its thread for phrase vectors that the event
# loop embeds in a worker thread of its own; in the loop's shared pool the two waits could take
# every thread (a team's vaults mapping at once) and leave the embedding queued behind them.
_EXTRACTORS = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="smart-context-topics")
PHRASE_TIMEOUT = 120.0  # seconds; a local model embeds ~80 short phrases in well under one


def reply_text(reply: Any) -> str:
    """Hosts return a string; some return an object with ``content`` (Tailor's LLM service)."""
    if isinstance(reply, str):
        return reply
    content = getattr(reply, "content", None)
    if isinstance(content, str):
        return content
    raise ExtractionError(f"The model returned {type(reply).__name__}, not text.")


async def ask_model(
    llm: LLM, settings: Settings, messages: Sequence[Mapping[str, Any]], previous: Sequence[str]
) -> ExtractedTopics:
    """Topics from the host's fast model; raises on any failure (the caller falls back).
    The prompt and the ids are made in a worker thread: a step per message, 70 ms for a
    10,000-message chat and 0.7 s for 100,000 that held the event loop, and every request of
    the process with it."""
    prompt, user_ids, all_ids = await to_thread(
        _prompt_and_ids, messages, previous, settings.extraction_max_chars
    )
    reply = await asyncio.wait_for(
        resolve(llm.complete(prompt, category=settings.extraction_category, temperature=0.2)),
        timeout=settings.extraction_timeout,
    )
    return parse_extraction_reply(reply_text(reply), user_ids, len(messages), all_ids)


def _prompt_and_ids(
    messages: Sequence[Mapping[str, Any]], previous: Sequence[str], max_chars: int
) -> tuple[list[dict[str, str]], list[str], set[str]]:
    """The extraction prompt, the ids a sticky message may have and those a topic's members
    may have. Only the user's own messages can be standing instructions; an assistant's "I'll
    be brief" must never become sticky."""
    prompt = build_extraction_messages(messages, previous, max_chars)
    user_ids = [str(m.get("id")) for m in messages if m.get("role") == "user"]
    return prompt, user_ids, {str(m.get("id")) for m in messages}


async def has_model(llm: LLM, category: str) -> bool:
    """False only when the host says it has no model for ``category`` (an optional
    ``llm.model_name(category)``); then the offline extractor runs without a failed call."""
    model_name = getattr(llm, "model_name", None)
    if not callable(model_name):
        return True
    try:
        return await resolve(model_name(category)) is not None
    # an optional courtesy of the host: assume the model is there
    except Exception:  # noqa: BLE001
        return True


async def extract(
    llm: LLM,
    settings: Settings,
    messages: Sequence[Mapping[str, Any]],
    vectors: Matrix | None,
    previous_topics: Sequence[Mapping[str, Any]],
    embed_phrases: PhraseEmbedder | None = None,
) -> ExtractedTopics | None:
    """The new topics, or ``None`` to keep the previous ones (nothing usable was found).

    A model's unusable reply keeps the chat's previous topics when it has some: a map the model
    made is better than the offline one, which runs only for a chat with none.

    ``embed_phrases`` (the store's label embedding) lets the offline extractor pick the key
    phrase closest in meaning to each cluster.
    """
    previous = [str(t.get("label")) for t in previous_topics if not t.get("sticky")]
    if settings.topic_extractor == "llm" and await has_model(llm, settings.extraction_category):
        try:
            found = await ask_model(llm, settings, messages, previous)
            for note in found.notes:
                log.info("Smart Context: topic reply: %s", note)
            return found
        except asyncio.CancelledError:
            raise
        # any model failure: the map the chat has stays, or the offline extractor makes one
        except Exception as exc:  # noqa: BLE001
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            if any(not t.get("sticky") for t in previous_topics):
                log.warning(
                    "Smart Context: the model did not extract topics (%s); keeping the chat's "
                    "previous topics",
                    reason,
                )
                return None
            log.warning(
                "Smart Context: the model did not extract topics (%s); using the offline extractor",
                reason,
            )
    if vectors is None:
        return None
    found = await offline(messages, vectors, previous, embed_phrases)
    if not (found.topics or found.sticky_ids) and previous_topics:
        return None  # an empty result would wipe a good map; keep it until there is substance
    return found


async def offline(
    messages: Sequence[Mapping[str, Any]],
    vectors: Matrix,
    previous: Sequence[str],
    embed_phrases: PhraseEmbedder | None,
) -> ExtractedTopics:
    """The offline extractor, from a thread of its own pool, in a worker process
    (:mod:`smart_context.topics.worker`): clustering a long chat takes seconds of CPU that must
    not stall the event loop serving requests, nor hold the interpreter's lock it needs."""
    from smart_context.topics.worker import extract_in_worker

    loop = asyncio.get_running_loop()
    if embed_phrases is None:
        return await loop.run_in_executor(
            _EXTRACTORS, partial(extract_in_worker, messages, vectors, previous)
        )

    def phrase_vectors(phrases: Sequence[str]) -> Matrix:
        # The extractor runs in a thread; the embedder lives on the event loop.
        future = asyncio.run_coroutine_threadsafe(embed_phrases(list(phrases)), loop)
        try:
            vectors: Matrix = future.result(timeout=PHRASE_TIMEOUT)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise EmbeddingError(
                f"Embedding topic phrases took over {PHRASE_TIMEOUT:.0f} s"
            ) from None
        return vectors

    try:
        return await loop.run_in_executor(
            _EXTRACTORS,
            partial(extract_in_worker, messages, vectors, previous, phrase_vectors),
        )
    except SmartContextError as exc:  # phrases could not be embedded: key words alone will do
        log.info("Smart Context: topic labels from key words only (%s)", exc)
        return await loop.run_in_executor(
            _EXTRACTORS, partial(extract_in_worker, messages, vectors, previous)
        )
