"""Token counts as the model counts them: exact offline for known models, a calibrated estimate
for the rest, and the chat format's framing."""

from __future__ import annotations

import pytest

from smart_context.budget.tokens import (
    BATCH,
    CHARS_PER_TOKEN,
    Estimate,
    context_window,
    counter_for,
    encoding_of,
    prompt_tokens,
)


@pytest.mark.parametrize(
    ("model", "encoding", "window"),
    [
        ("gpt-4o-mini", "o200k_base", 128_000),
        ("openai/gpt-4o-2024-08-06", "o200k_base", 128_000),
        ("o3-mini", "o200k_base", 200_000),
        ("gpt-4-turbo", "cl100k_base", 128_000),
        ("gpt-4", "cl100k_base", 8_192),
        ("llama3.2", "llama3", 131_072),  # Ollama's names, with a tag
        ("llama3.2:3b", "llama3", 131_072),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3", 131_072),
        ("qwen2.5:7b", "qwen3", 32_768),
        ("mistral", None, 32_768),
        ("nomic-embed-text", None, None),
        ("gpt-4oops", None, None),  # a prefix is a whole name part, never half a word
        ("", None, None),
    ],
)
def test_models_map_to_their_tokenizer_and_window(
    model: str, encoding: str | None, window: int | None
) -> None:
    assert encoding_of(model) == encoding
    assert context_window(model) == window


def test_a_name_past_the_kept_length_is_looked_up_each_time_and_not_kept() -> None:
    from smart_context.budget import tokens

    long = "gpt-4o-" + "x" * tokens.KEPT_NAME_CHARS  # a client's own text, not a model's name
    before = tokens._kept.cache_info().currsize
    assert encoding_of(long) == "o200k_base" and context_window(long) == 128_000
    assert tokens._kept.cache_info().currsize == before
    assert context_window("gpt-4o") == context_window("gpt-4o") == 128_000  # kept: the same


def test_known_tokenizers_count_exactly_offline() -> None:
    # ids as tiktoken gives them: "hello world" is two tokens in each
    for model in ("gpt-4o", "gpt-4", "llama3.2"):
        counter = counter_for(model)
        assert counter.exact and counter.count(["hello world", ""]) == [2, 0]
    assert counter_for("gpt-4o").count(["naïve café 東京"])[0] > 3  # not one token per word


def test_a_few_texts_and_a_batch_count_alike() -> None:
    """A request's few texts are counted one call each, many in quicktok's threads: the same."""
    texts = ["hello world", "", "naïve café 東京", "<|endoftext|> is text here", "x" * 5000]
    many = texts * (BATCH // len(texts) + 1)
    assert len(many) >= BATCH
    for model in ("gpt-4o", "gpt-4", "llama3.2"):
        counter = counter_for(model)
        assert counter.count(many) == counter.count(texts) * (BATCH // len(texts) + 1)
        assert counter.count(texts)[3] > 1  # a special token's text counts as text


def test_an_unknown_model_is_estimated_and_learns_from_what_servers_report() -> None:
    estimate = Estimate()
    assert not estimate.exact and estimate.count(["a" * 40]) == [10]
    estimate.calibrate(4000, 800)  # the server said 5 characters per token
    assert estimate.chars_per_token == 5.0 and estimate.count(["a" * 40]) == [8]
    estimate.calibrate(4000, 0)  # nonsense is ignored
    estimate.calibrate(100, 10_000)  # and a wild ratio is bounded
    assert 1.0 <= estimate.chars_per_token <= CHARS_PER_TOKEN + 1
    assert counter_for("some-model") is counter_for("some-model:latest")  # one per model


def test_a_prompt_costs_its_texts_and_the_chat_formats_framing() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello world"},
    ]
    # OpenAI's formula: 3 per message, the role and content, 3 to prime the reply
    assert prompt_tokens(counter_for("gpt-4o"), messages) == {
        "messages": 16,
        "tools": 0,
        "total": 16,
    }
    tool = {"type": "function", "function": {"name": "files__read", "parameters": {}}}
    with_tools = prompt_tokens(counter_for("gpt-4o"), messages, [tool])
    assert with_tools["tools"] > 5 and with_tools["total"] == 16 + with_tools["tools"]
    assert prompt_tokens(counter_for("gpt-4o"), []) == {"messages": 0, "tools": 0, "total": 0}


def test_without_the_bundled_tokenizers_every_model_is_estimated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from smart_context.budget import tokens

    monkeypatch.setitem(sys.modules, "quicktok", None)  # as if the wheel were missing
    tokens.exact_available.cache_clear()
    try:
        counter = counter_for("gpt-4o")
        assert not counter.exact and counter.name == "estimate"
        assert counter.count(["hello world"]) == [3]
    finally:
        monkeypatch.undo()
        tokens.exact_available.cache_clear()
    assert counter_for("gpt-4o").exact  # and back once it loads


def test_the_figure_counts_use_moves_in_steps_so_kept_counts_stay_valid() -> None:
    estimate = Estimate()
    keys = {estimate.key}
    moves = sum(estimate.calibrate(4100, 1000) for _ in range(50))  # 4.1: within a step of 4
    assert moves == 0 and estimate.key in keys and estimate.count(["a" * 40]) == [10]
    assert estimate.observed is not None and abs(estimate.observed - 4.1) < 1e-9
    moved = [estimate.calibrate(3000, 1000) for _ in range(60)]  # now 3 characters per token
    assert 1 <= sum(moved) <= 12 and abs(estimate.chars_per_token - 3.0) < 0.1
    assert estimate.key != "estimate@4.0000" and estimate.samples == 20
    restored = Estimate()
    restored.restore(99.0, 500)  # a saved value out of range is bounded
    assert restored.chars_per_token == 8.0 and restored.samples == 20


def test_a_vaults_estimates_are_its_own() -> None:
    mine: dict[str, Estimate] = {}
    counter = counter_for("house-model:7b", mine)
    assert isinstance(counter, Estimate) and mine == {"house-model": counter}
    assert counter_for("house-model") is not counter  # the process's own table
    assert counter_for("gpt-4o", mine).exact and len(mine) == 1
