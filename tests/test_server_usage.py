"""What a server says its prompt cache did, in each provider's shape of ``usage``; a hostile
``usage`` is read as silence, never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest

from smart_context.server_usage import CacheReport, cache_report
from smart_context_hosts.proxy.replies import StreamReader, whole_reply

OPENAI = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
}
# Anthropic's OpenAI-compatible endpoint and LiteLLM: read and written, at the top of usage
ANTHROPIC = {
    "prompt_tokens": 3000,
    "completion_tokens": 20,
    "cache_read_input_tokens": 2048,
    "cache_creation_input_tokens": 512,
}
# LiteLLM puts them in prompt_tokens_details too (and its cached_tokens is the read)
LITELLM = {
    "prompt_tokens": 3000,
    "prompt_tokens_details": {"cache_read_input_tokens": 2048, "cache_creation_input_tokens": 9},
}
DEEPSEEK = {
    "prompt_tokens": 1200,
    "completion_tokens": 5,
    "prompt_cache_hit_tokens": 1152,
    "prompt_cache_miss_tokens": 48,
}


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (OPENAI, CacheReport(1920, None)),
        (OPENAI | {"prompt_tokens_details": {"cached_tokens": 0}}, CacheReport(0, None)),
        (ANTHROPIC, CacheReport(2048, 512)),
        (LITELLM, CacheReport(2048, 9)),
        (DEEPSEEK, CacheReport(1152, None)),
        ({"prompt_tokens": 1200, "prompt_cache_miss_tokens": 200}, CacheReport(1000, None)),
        ({"cached_tokens": 7, "cache_write_tokens": 3}, CacheReport(7, 3)),  # a host's own
        ({"prompt_tokens": 10, "completion_tokens": 2}, CacheReport()),  # said nothing
    ],
    ids=["openai", "openai-none", "anthropic", "litellm", "deepseek", "deepseek-miss", "ours", "-"],
)
def test_each_providers_shape_reads_into_the_same_two_counts(
    usage: dict[str, Any], expected: CacheReport
) -> None:
    assert cache_report(usage) == expected


@pytest.mark.parametrize(
    "garbage",
    [-5, True, "1920", 1.5e400, float("nan"), None, [1920], {"n": 1}, "</script>"],
)
def test_a_figure_that_is_not_a_count_is_not_read(garbage: Any) -> None:
    usage = {
        "prompt_tokens": garbage,
        "prompt_tokens_details": {"cached_tokens": garbage, "cache_write_tokens": garbage},
        "cache_read_input_tokens": garbage,
        "cache_creation_input_tokens": garbage,
        "prompt_cache_hit_tokens": garbage,
        "prompt_cache_miss_tokens": garbage,
    }
    assert cache_report(usage) == CacheReport()
    assert cache_report({"prompt_tokens_details": garbage}) == CacheReport()
    assert cache_report(garbage) == CacheReport()


def test_nested_garbage_is_silence() -> None:
    deep: Any = {}
    for _ in range(10_000):
        deep = {"prompt_tokens_details": deep, "cached_tokens": [deep]}
    assert cache_report(deep) == CacheReport()
    assert cache_report({"prompt_tokens_details": [OPENAI["prompt_tokens_details"]]}) == (
        CacheReport()
    )


def test_the_proxy_reads_them_from_a_whole_reply_and_from_a_streams_last_chunk() -> None:
    choice = {"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    whole = whole_reply(_json({"model": "claude-x", "choices": [choice], "usage": ANTHROPIC}))
    assert (whole.prompt_tokens, whole.cached_tokens, whole.cache_write_tokens) == (3000, 2048, 512)
    reader = StreamReader()
    delta = {"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}
    reader.feed(b"data: " + _json(delta) + b"\n\n")
    reader.feed(b"data: " + _json({"choices": [], "usage": DEEPSEEK}) + b"\n\ndata: [DONE]\n\n")
    answer = reader.close()
    assert (answer.prompt_tokens, answer.cached_tokens, answer.cache_write_tokens) == (
        1200,
        1152,
        None,
    )
    hostile = whole_reply(_json({"choices": [choice], "usage": {"prompt_tokens_details": "x"}}))
    assert hostile.text == "ok" and hostile.cached_tokens is None


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
