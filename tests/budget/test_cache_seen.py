"""What the upstream's replies teach about its prompt cache (smart_context.budget.cache_seen):
a hit makes a model with no known cache laid out for one; replies that keep reading nothing
where a hit was expected make a caching family's model go back to the per-turn choice; a reply
that says nothing teaches nothing, and the user's ``prompt_cache`` setting is never overridden.
"""

from __future__ import annotations

import pytest

from smart_context.budget.cache import NO_CACHE, cache_model
from smart_context.budget.cache_seen import CACHES, MAX_MODELS, MISSES, NO_HITS, CacheSeen
from smart_context.config import Settings
from smart_context.context.stable import request_cache
from smart_context.server_usage import CacheReport

HIT, MISS, SILENT = CacheReport(cached_tokens=2048), CacheReport(cached_tokens=0), CacheReport()


def test_a_reply_that_read_from_the_cache_lays_an_unknown_model_out_for_one() -> None:
    seen = CacheSeen()
    assert seen.adjust("house-model", NO_CACHE, None) is NO_CACHE
    seen.observe("house-model", 0, HIT)
    assert seen.found("house-model") == CACHES
    learned = seen.adjust("house-model", NO_CACHE, None)
    assert learned.caches and learned.read == 0.5 and learned.min_prefix == 1024
    assert seen.adjust("house-model", NO_CACHE, 0.2).read == 0.2  # the setting's price
    # a write alone says so too (Anthropic's first request of a sitting)
    seen.observe("other", 0, CacheReport(cached_tokens=0, cache_write_tokens=900))
    assert seen.found("other") == CACHES


def test_replies_that_keep_missing_an_expected_hit_turn_the_cache_off() -> None:
    seen, gpt5 = CacheSeen(), cache_model("gpt-5")
    for _ in range(MISSES - 1):
        seen.observe("gpt-5", 4096, MISS)
    assert seen.adjust("gpt-5", gpt5, None) is gpt5  # not yet: a provider's cache is best effort
    seen.observe("gpt-5", 0, MISS)  # no hit expected (a cold sitting): not a miss
    assert seen.found("gpt-5") is None
    seen.observe("gpt-5", 4096, MISS)
    assert seen.found("gpt-5") == NO_HITS
    assert seen.adjust("gpt-5", gpt5, None) is NO_CACHE
    # a hit later settles it the other way, for good
    seen.observe("gpt-5", 4096, HIT)
    assert seen.adjust("gpt-5", gpt5, None) is gpt5
    for _ in range(3 * MISSES):
        seen.observe("gpt-5", 4096, MISS)
    assert seen.found("gpt-5") == CACHES


def test_a_hit_between_misses_starts_the_count_again() -> None:
    seen = CacheSeen()
    for report in [MISS] * (MISSES - 1) + [SILENT, HIT] + [MISS] * (MISSES - 1):
        seen.observe("gpt-4o", 2048, report)
    assert seen.found("gpt-4o") == CACHES


def test_a_reply_that_says_nothing_of_a_cache_teaches_nothing() -> None:
    seen = CacheSeen()
    for _ in range(3 * MISSES):
        seen.observe("gpt-5", 4096, SILENT)
    assert seen.found("gpt-5") is None


def test_a_local_server_is_never_turned_off() -> None:
    seen, local = CacheSeen(), cache_model("llama3.1:8b")
    for _ in range(MISSES):
        seen.observe("llama3.1:8b", 4096, MISS)
    assert seen.adjust("llama3.1:8b", local, None) is local


def test_the_prompt_cache_setting_is_the_users_word() -> None:
    seen = CacheSeen()
    seen.observe("house-model", 0, HIT)
    for _ in range(MISSES):
        seen.observe("gpt-5", 4096, MISS)
    assert request_cache(Settings(), "house-model", seen).caches
    assert not request_cache(Settings(), "gpt-5", seen).caches
    assert not request_cache(Settings(prompt_cache="none"), "house-model", seen).caches
    assert request_cache(Settings(prompt_cache="openai"), "gpt-5", seen).caches


@pytest.mark.parametrize("models", [MAX_MODELS + 10])
def test_what_is_kept_is_bounded(models: int) -> None:
    seen = CacheSeen()
    for k in range(models):
        seen.observe(f"model-{k}", 0, HIT)
        seen.observe(f"other-{k}", 2048, MISS)
    assert seen.found("model-0") is None and seen.found(f"model-{models - 1}") == CACHES
    assert len(seen._found) <= MAX_MODELS and len(seen._misses) <= MAX_MODELS
