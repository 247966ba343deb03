"""Background topic extraction: which extractor runs, and one run in flight per chat.

A run loads the latest chat, brings its embedding cache up to date (so the next filter click
is warm), asks the fast model for topics (or uses the offline extractor when no model answers
usefully), and writes the topics with ``update_chat`` so messages appended meanwhile survive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import numpy as np

from smart_context.config import Settings
from smart_context.errors import EmbeddingError, ExtractionError, SmartContextError
from smart_context.host import resolve
from smart_context.topic_types import ExtractedTopics
from smart_context.topics import build_extraction_messages, parse_extraction_reply
from smart_context.vectors import Matrix

log = logging.getLogger(__name__)

PhraseEmbedder = Callable[[Sequence[str]], Coroutine[Any, Any, Matrix]]
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
    llm: Any, settings: Settings, messages: Sequence[Mapping[str, Any]], previous: Sequence[str]
) -> ExtractedTopics:
    """Topics from the host's fast model; raises on any failure (the caller falls back)."""
    prompt = build_extraction_messages(messages, previous, settings.extraction_max_chars)
    reply = await asyncio.wait_for(
        resolve(llm.complete(prompt, category=settings.extraction_category, temperature=0.2)),
        timeout=settings.extraction_timeout,
    )
    # Only the user's own messages can be standing instructions; an assistant's "I'll be brief"
    # must never become sticky.
    user_ids = [str(m.get("id")) for m in messages if m.get("role") == "user"]
    return parse_extraction_reply(reply_text(reply), user_ids, len(messages))


async def has_model(llm: Any, category: str) -> bool:
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
    llm: Any,
    settings: Settings,
    messages: Sequence[Mapping[str, Any]],
    vectors: Matrix | None,
    previous_topics: Sequence[Mapping[str, Any]],
    embed_phrases: PhraseEmbedder | None = None,
) -> ExtractedTopics | None:
    """The new topics, or ``None`` to keep the previous ones (nothing usable was found).

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
        # any model failure: the offline extractor still gives topics
        except Exception as exc:  # noqa: BLE001
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
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
    """The offline extractor, in a worker thread: clustering a long chat takes a few hundred
    milliseconds of CPU that must not stall the event loop serving requests."""
    from smart_context.offline_topics import extract_offline

    if embed_phrases is None:
        return await asyncio.to_thread(extract_offline, messages, vectors, previous)
    loop = asyncio.get_running_loop()

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
        return await asyncio.to_thread(
            extract_offline, messages, vectors, previous, phrase_vectors=phrase_vectors
        )
    except SmartContextError as exc:  # phrases could not be embedded: key words alone will do
        log.info("Smart Context: topic labels from key words only (%s)", exc)
        return await asyncio.to_thread(extract_offline, messages, vectors, previous)


class Coalescer:
    """At most one run in flight per key; requests during a run yield exactly one more run."""

    def __init__(self, run: Callable[[str], Awaitable[None]]) -> None:
        self._run = run
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    def request(self, key: str) -> None:
        """Schedule a run for ``key`` and return at once."""
        if key in self._tasks:
            self._again.add(key)
            return
        self._tasks[key] = asyncio.get_running_loop().create_task(self._loop(key))

    async def _loop(self, key: str) -> None:
        try:
            while True:
                self._again.discard(key)
                try:
                    await self._run(key)
                except asyncio.CancelledError:
                    raise
                except Exception:  # background work: log and keep serving later requests
                    log.exception("Smart Context: background update of %s failed", key)
                if key not in self._again:
                    break
        finally:
            self._tasks.pop(key, None)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    @property
    def running(self) -> frozenset[str]:
        """The keys with a run in flight."""
        return frozenset(self._tasks)

    async def drain(self, timeout: float = 10.0) -> None:
        """Let running work finish for up to ``timeout`` seconds, then cancel what is left."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


def rows_or_none(vectors: Matrix | None) -> Matrix | None:
    """Vectors usable by the offline extractor (non-empty 2-D), else ``None``."""
    if vectors is None or vectors.ndim != 2 or vectors.shape[1] == 0:
        return None
    return np.asarray(vectors, dtype=np.float32)
