"""What the upstream's own replies say about its prompt cache, learned per chat model
(docs/contract.md §9, "Read the real cache").

The cache a model's family implies (:mod:`smart_context.budget.cache`) is a guess about the
upstream: a gateway may strip the cache, a self-hosted server may carry a provider's model
name, a model this table does not know may be served by a provider that caches. The replies
settle it:

- a reply that says it read or wrote cached tokens: the upstream caches. A model with no known
  cache is then laid out for one (OpenAI's rule, at :data:`LEARNED_READ` of the price, or the
  ``cache_read_price`` setting);
- :data:`MISSES` replies in a row that say they read nothing where the layout expected a cached
  prefix, and no hit ever: it does not. The model then gets the per-turn choice, the cheapest
  where nothing is cached.

A reply that says nothing of its cache teaches nothing, and the ``prompt_cache`` setting, when
it names a cache, is the user's word: nothing learned overrides it. Kept in memory for the
models used last (:data:`MAX_MODELS`): after a restart it is learned again in a few replies.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from smart_context.budget.cache import NO_CACHE, OPENAI, CacheModel
from smart_context.server_usage import CacheReport

MISSES = 4  # replies in a row that read nothing where a hit was expected
LEARNED_READ = 0.5  # the read price of a cache learned from replies (the dearest in use)
MAX_MODELS = 256

CACHES, NO_HITS = "caches", "does not cache"


class CacheSeen:
    """What each chat model's replies said of its upstream's cache (module docstring)."""

    def __init__(self) -> None:
        self._found: OrderedDict[str, str] = OrderedDict()
        self._misses: dict[str, int] = {}

    def found(self, model: str) -> str | None:
        """What the replies showed for ``model``: :data:`CACHES`, :data:`NO_HITS`, or ``None``
        (nothing yet)."""
        return self._found.get(model)

    def observe(self, model: str, expected: int, report: CacheReport) -> None:
        """Take one reply's ``report``, where the layout expected ``expected`` tokens of its
        prompt to be read from the cache."""
        if report.cached_tokens is None and report.cache_write_tokens is None:
            return  # the upstream says nothing of a cache
        if (report.cached_tokens or 0) > 0 or (report.cache_write_tokens or 0) > 0:
            self._misses.pop(model, None)
            self._set(model, CACHES)
        elif expected > 0 and self._found.get(model) != CACHES:
            if len(self._misses) >= MAX_MODELS:
                self._misses.clear()
            misses = self._misses.get(model, 0) + 1
            self._misses[model] = misses
            if misses >= MISSES:
                self._set(model, NO_HITS)

    def adjust(self, model: str, guessed: CacheModel, read_price: float | None) -> CacheModel:
        """The cache ``model``'s requests are laid out for: ``guessed`` (from its family) as
        the replies corrected it (``read_price``: the setting's, when given)."""
        found = self._found.get(model)
        if found == NO_HITS and guessed.caches and not guessed.local:
            return NO_CACHE
        if found == CACHES and not guessed.caches:
            return replace(OPENAI, read=LEARNED_READ if read_price is None else read_price)
        return guessed

    def _set(self, model: str, found: str) -> None:
        self._found.pop(model, None)
        while len(self._found) >= MAX_MODELS:
            gone, _ = self._found.popitem(last=False)
            self._misses.pop(gone, None)
        self._found[model] = found
