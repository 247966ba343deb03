"""The prompt caches the cache benchmark bills by, on token ids made up here: OpenAI's steps,
minimum and expiry; Anthropic's reads and writes at breakpoints; vLLM's blocks; llama.cpp's
one slot. And the replay's turns: one speaker's run is one message, a session starts cold."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from benchmarks.public.bench_cache import SYSTEM, _shares, changed, curve, turns_of
from benchmarks.public.bench_history import Chat, Question
from benchmarks.public.prompt_cache import (
    AnthropicCache,
    Hit,
    LlamaCppSlot,
    Scorer,
    billed,
    breakpoints,
    common_prefix,
    openai,
    prefix_hashes,
    vllm,
)


def tokens(n: int, start: int = 0) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.uint32)


def test_a_prefix_hash_depends_only_on_the_prefix() -> None:
    a, b = tokens(300), tokens(300)
    b[200] = 7
    ha, hb = prefix_hashes(a), prefix_hashes(b)
    assert (ha[:200] == hb[:200]).all() and (ha[200:] != hb[200:]).all()
    assert (prefix_hashes(a[:50]) == ha[:50]).all()
    assert common_prefix(a, b) == 200 and common_prefix(a, a[:10]) == 10


@pytest.mark.parametrize(
    ("common", "cached"),
    [(1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (2000, 1920), (5000, 4992)],
)
def test_openai_counts_from_1024_in_steps_of_128(common: int, cached: int) -> None:
    cache = openai()
    assert cache(tokens(6000), now=0.0) == Hit(0)  # cold
    later = np.concatenate([tokens(common), tokens(500, start=90_000)])
    assert cache(later, now=10.0) == Hit(cached)


def test_openai_matches_any_earlier_request_and_forgets_after_five_idle_minutes() -> None:
    cache = openai()
    first, second = tokens(3000), tokens(3000, start=50_000)
    cache(first, now=0.0)
    cache(second, now=100.0)
    assert cache(first, now=250.0).cached == 2944  # not the last request: an earlier one
    assert cache(second, now=401.0).cached == 0  # unused for 301 s: gone
    assert cache(first, now=550.0).cached == 2944  # read at 250 s: alive 300 s more
    assert cache(first, now=851.0).cached == 0


def test_anthropic_reads_at_earlier_breakpoints_and_writes_up_to_its_own() -> None:
    cache = AnthropicCache()
    system, chat = 1500, tokens(6000)
    # system and the history before the last user message: 1,500 and 4,000 tokens
    assert cache(chat[:5000], [system, 4000], now=0.0) == Hit(0, 4000)
    # the next turn repeats 5,000 tokens, but only what was written at a breakpoint is read
    assert cache(chat, [system, 5500], now=30.0) == Hit(4000, 1500)
    assert billed(6000, Hit(4000, 1500), read=0.1, write=1.25) == pytest.approx(500 + 400 + 1875)
    # another history after the same system prompt reads the system prompt's breakpoint
    other = np.concatenate([chat[:system], tokens(3000, start=70_000)])
    assert cache(other, [system, 4000], now=60.0) == Hit(1500, 2500)


def test_anthropic_caches_nothing_below_1024_tokens_and_expires_unread() -> None:
    cache = AnthropicCache()
    chat = tokens(3000)
    assert cache(chat[:1000], [500, 900], now=0.0) == Hit(0, 0)
    assert cache(chat[:2000], [500, 1800], now=10.0) == Hit(0, 1800)
    assert cache(chat, [500, 2500], now=200.0) == Hit(1800, 700)
    assert cache(chat, [500, 2500], now=499.0) == Hit(2500, 0)  # read: refreshed
    assert cache(chat, [500, 2500], now=800.0) == Hit(0, 2500)  # 301 s unread: gone


def test_vllm_reuses_whole_16_token_blocks_for_the_whole_run() -> None:
    cache = vllm()
    cache(tokens(1000), now=0.0)
    changed = tokens(1000)
    changed[100] = 5
    assert cache(changed, now=1e6) == Hit(96)
    assert cache(tokens(40), now=2e6) == Hit(32)


def test_llama_cpp_prefills_what_differs_from_the_slots_last_request() -> None:
    slot = LlamaCppSlot()
    first, second = tokens(500), tokens(700)
    second[450] = 1
    assert slot(first) == Hit(0)
    assert slot(second) == Hit(450)
    assert slot(first) == Hit(450)  # only the last request is kept
    assert 500 - slot(tokens(10, start=9000)).cached == 500


def test_the_turns_of_a_chat_alternate_and_each_session_starts_a_day_later() -> None:
    def said(role: str, dia_id: str, text: str) -> dict[str, str]:
        return {"id": dia_id, "role": role, "content": text}

    messages = [
        said("user", "D1:1", "hi"),
        said("user", "D1:2", "there"),
        said("assistant", "D1:3", "hello"),
        said("user", "D1:4", "bye"),
        said("assistant", "D2:1", "back"),
        said("user", "D2:2", "yes"),
    ]
    chat = Chat(1, messages, [Question("q", frozenset({1}))], 0)
    conversation, turns = turns_of(chat)
    assert [m["content"] for m in conversation] == ["hi\nthere", "hello", "bye", "back", "yes"]
    assert [(t.at_message, t.reply) for t in turns] == [(0, "hello"), (2, "back"), (4, "OK")]
    assert [t.session_start for t in turns] == [True, False, True]
    assert turns[1].time - turns[0].time == 30.0
    assert turns[2].time - turns[1].time >= 86_400


def test_a_request_is_scored_by_every_rule_with_its_breakpoints() -> None:
    scorer = Scorer()
    system = {"role": "system", "content": "You are a helpful assistant."}
    long = " ".join(f"word{i}" for i in range(1500))
    first = [system, {"role": "user", "content": long}]
    second = [*first, {"role": "assistant", "content": "fine"}, {"role": "user", "content": "x"}]
    one, two = scorer.score(first, 0.0), scorer.score(second, 30.0)
    assert one.openai == 0 and one.anthropic == Hit(0, 0)  # breakpoints: system, nothing
    assert two.openai >= 1024 and two.llama_cpp > 1500 and two.vllm >= two.llama_cpp - 15
    assert two.anthropic.written > 1500  # the history before the last user message, new


def test_a_request_continues_the_last_when_it_starts_with_all_but_its_user_message() -> None:
    def ask(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    before = {"messages": [SYSTEM, ask("a"), {"role": "assistant", "content": "b"}, ask("c")]}
    after = {"messages": [*before["messages"][:3], ask("c, and what was chosen"), ask("d")]}
    assert not changed(before, after)
    assert changed(before, {"messages": [SYSTEM, ask("summary"), ask("d")]})
    assert changed(before, {**after, "tools": [{"type": "function"}]})


def test_anthropic_marks_follow_the_system_prompt_and_the_history_before_the_user() -> None:
    messages = [SYSTEM, SYSTEM, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    ends = np.array([5, 10, 15, 20, 25])  # the tools' piece first
    assert breakpoints(messages, ends, head=1) == [15, 20]
    assert breakpoints(messages[2:], ends[2:] - 10, head=0) == [0, 5]


def test_the_curve_takes_shares_from_0_to_0_9_and_makes_a_local_server_of_each() -> None:
    assert _shares("0.1, 0.25,0.4") == [0.1, 0.25, 0.4]
    for bad in ("x", "2", "", "0.1,-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            _shares(bad)
    assert curve([0.1, 0.3]) == ["local@0.1", "local@0.3"]
