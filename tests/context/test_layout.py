"""The cache-stable layout through the real plugin (docs/contract.md §9, "The layout"): a chat
replayed turn by turn as a stateless client sends it, with a model whose upstream caches
prompts. Outside cuts each request starts with the previous one's messages; a cut happens
once, in one step, when the bill would pass the budget, and when the cache is cold."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smart_context.budget.cache import cache_model, family_of
from smart_context.budget.plan import Inputs, cut_start, recall
from smart_context.budget.tokens import counter_for
from smart_context.context.layout import Costs, Frames, high_mark
from tests.conftest import Ctx, call, write_chat
from tests.context.test_budgeted import long_chat


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def long_chat_with_clock(
    start: Any, vault: Path, n: int, **settings: Any
) -> tuple[list[dict[str, Any]], Any, Clock]:
    """A chat "long" of ``n`` messages in the vault, the plugin started with ``settings`` and
    reading a clock the test moves."""
    chat = long_chat(n)
    write_chat(vault, "long", chat)
    running = await start(settings=settings)
    clock = Clock()
    running.plugin.services.clock = clock
    return chat, running, clock


async def turn(running: Any, history: list[dict[str, Any]], message: str, model: str) -> Ctx:
    ctx = Ctx("long", list(history), message)
    ctx.metadata["model"] = model
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    return ctx


def sent(ctx: Ctx) -> list[dict[str, Any]]:
    """What the upstream gets: the plugin's history, then the message as the plugin left it."""
    return [{"role": m["role"], "content": m["content"]} for m in ctx.history] + [
        {"role": "user", "content": ctx.message}
    ]


async def replay(
    running: Any, chat: list[dict[str, Any]], turns: int, model: str, clock: Clock, gap: float = 30
) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """``turns`` turns after the chat's start, as a stateless client sends them; each request
    and its record."""
    out = []
    start = len(chat) - 2 * turns
    for k in range(turns):
        history = chat[: start + 2 * k]
        message = chat[start + 2 * k]["content"]
        clock.now += gap
        ctx = await turn(running, history, message, model)
        out.append((sent(ctx), ctx.metadata["smart_context"]))
    return out


@pytest.mark.parametrize("recalled_in", ["user", "system"])
async def test_thirty_turns_start_with_the_previous_request_outside_cuts(
    start: Any, vault: Path, recalled_in: str
) -> None:
    chat, running, clock = await long_chat_with_clock(
        start, vault, 400, budget_tokens=2000, recalled_in=recalled_in, summarizer="offline"
    )
    requests = await replay(running, chat, 30, "gpt-5", clock)
    cuts = [r["layout"]["cut"] for _, r in requests]
    assert cuts[0] == "first request"
    tail = 1 if recalled_in == "user" else 2  # the chosen part rides in (or before) the message
    changed = 0
    for (before, _), (after, record) in itertools.pairwise(requests):
        if record["layout"]["cut"] is None:
            assert after[: len(before) - tail] == before[:-tail]
            assert record["cache"]["cached_estimate"] > 0
        else:
            changed += 1
    assert changed <= 30 // 8
    for request, record in requests:
        assert [m["role"] for m in request].count("system") <= (1 if recalled_in == "user" else 2)
        assert request[-1]["role"] == "user"
        assert record["layout"]["recalled_in"] == recalled_in
        assert record["cache"]["kind"] == "openai" and record["cache"]["read"] == 0.1


async def test_a_cut_happens_once_past_the_high_mark_and_keeps_a_low_mark(
    start: Any, vault: Path
) -> None:
    chat, running, clock = await long_chat_with_clock(
        start, vault, 400, budget_tokens=3000, prompt_cache="local"
    )
    requests = await replay(running, chat, 30, "llama3.1:8b", clock)
    records = [r for _, r in requests]
    cuts = [r["layout"]["cut"] for r in records]
    assert cuts[0] == "first request"
    assert "over the budget" in cuts  # 30 turns of ~60 tokens pass a 3,000-token window
    for record in records:
        assert record["budget"]["used"] <= 3000  # a local server's window is the budget
    at = cuts.index("over the budget")
    assert records[at]["budget"]["used"] <= 0.75 * 3000  # cut down to the low mark
    assert records[at]["layout"]["start_id"] != records[at - 1]["layout"]["start_id"]


async def test_a_cold_cache_makes_the_frame_again_and_a_dry_run_keeps_nothing(
    start: Any, vault: Path
) -> None:
    chat, running, clock = await long_chat_with_clock(start, vault, 300, budget_tokens=2000)
    first = await turn(running, chat[:-3], chat[-3]["content"], "claude-sonnet-4-5")
    assert first.metadata["smart_context"]["layout"]["cut"] == "first request"
    clock.now += 10
    dry = Ctx("long", chat[:-1], chat[-1]["content"])
    dry.metadata.update(model="claude-sonnet-4-5", dry_run=True)
    await call(running.pm.hook.pipeline_context, ctx=dry)
    clock.now += 10
    warm = await turn(running, chat[:-1], chat[-1]["content"], "claude-sonnet-4-5")
    assert warm.metadata["smart_context"]["layout"]["cut"] is None  # the dry run changed nothing
    assert warm.metadata["smart_context"]["cache"]["kind"] == "anthropic"
    clock.now += 301  # past Anthropic's five minutes
    cold = await turn(running, chat, "And now?", "claude-sonnet-4-5")
    assert cold.metadata["smart_context"]["layout"]["cut"] == "cache cold"
    assert cold.metadata["smart_context"]["cache"]["cached_estimate"] == 0
    other = await turn(running, chat, "And now?", "gpt-5")
    assert other.metadata["smart_context"]["layout"]["cut"] == "model or filter changed"


async def test_a_chat_whose_bill_fits_is_sent_whole_and_unknown_models_keep_the_per_turn_budget(
    start: Any, vault: Path
) -> None:
    chat = long_chat(150)  # about 9,000 tokens: at a read price of 0.1 its bill fits 4,000
    write_chat(vault, "long", chat)
    running = await start(settings={"budget_tokens": 4000})
    ctx = await turn(running, chat[:-1], chat[-1]["content"], "gpt-5")
    record = ctx.metadata["smart_context"]
    assert record["layout"]["kept_messages"] == 149
    assert [m["id"] for m in ctx.history[-149:]] == [m["id"] for m in chat[:-1]]
    plain = await turn(running, chat[:-1], chat[-1]["content"], "some-model-we-do-not-know")
    assert "layout" not in plain.metadata["smart_context"]
    assert plain.metadata["smart_context"]["budget"]["used"] <= 4000


def test_the_cache_models_by_family_and_their_rules() -> None:
    assert family_of("gpt-5.1").read == 0.1
    assert family_of("openai/gpt-4.1-mini").read == 0.25
    assert family_of("gpt-4o-2024-08-06").read == 0.5
    assert family_of("claude-opus-4-1").write == 1.25 and family_of("claude-3-5-haiku").breakpoints
    assert family_of("llama3.2:3b").local and family_of("deepseek-r1:7b").local
    assert family_of("deepseek-chat").name == "deepseek"
    assert family_of("who-knows").name == "none" and not family_of(None).caches
    openai = family_of("gpt-4o")
    assert openai.cached(1023) == 0 and openai.cached(1024) == 1024
    assert openai.cached(1151) == 1024 and openai.cached(1152) == 1152
    assert openai.billed(2000, 1024) == pytest.approx(976 + 512)
    assert cache_model("gpt-4o", "none").caches is False
    assert cache_model("gpt-4o", "auto", 0.2).read == 0.2
    assert cache_model("whatever", "local").local


def test_a_cut_starts_at_a_user_message_within_its_room() -> None:
    tokens = np.full(10, 10, dtype=np.intp)
    users = np.arange(0, 10, 2, dtype=np.intp)
    assert cut_start(tokens, 1000, users) == 0
    assert cut_start(tokens, 35, users) == 8  # 7.. would fit 30; the next user message is 8
    assert cut_start(tokens, 40, users) == 6
    assert cut_start(tokens, 5, users) == 8  # the last turn goes whatever it costs
    assert cut_start(np.zeros(0, dtype=np.intp), 5, users[:0]) == 0


def test_the_high_mark_spreads_a_cold_write_over_the_chats_sittings() -> None:
    gpt5, local = family_of("gpt-5"), family_of("llama3.1:8b")
    long_runs = high_mark(gpt5, 8000, 400_000, 1000, run=1000)
    short_runs = high_mark(gpt5, 8000, 400_000, 1000, run=5)
    assert short_runs < long_runs <= 1000 + 7000 / 0.1
    assert high_mark(gpt5, 8000, 30_000, 1000, run=1000) == 30_000  # the window first
    assert high_mark(local, 8000, 8000, 1000, run=1) == 8000  # a local server never goes cold


def test_the_budget_a_chat_left_unspent_is_spread_over_its_next_sitting_up_to_a_warm_turn() -> None:
    gpt5 = family_of("gpt-5")
    spent = high_mark(gpt5, 8000, 400_000, 1000, run=7)
    saved = high_mark(gpt5, 8000, 400_000, 1000, run=7, credit=20_000)
    owed = high_mark(gpt5, 8000, 400_000, 1000, run=7, credit=-20_000)
    assert owed < spent < saved
    # however much was saved, a warm turn is billed within the budget
    assert high_mark(gpt5, 8000, 400_000, 1000, run=7, credit=10**9) == 1000 + int(7000 / 0.1)
    gpt4o = family_of("gpt-4o")
    assert high_mark(gpt4o, 8000, 400_000, 1000, run=7, credit=10**9) == 1000 + int(7000 / 0.5)


async def test_a_chat_that_spent_little_keeps_its_history_whole_where_a_new_one_is_cut(
    start: Any, vault: Path
) -> None:
    """The bill is judged over the chat: sittings of two turns write the cache often, which a
    new chat's high mark counts against it; a chat whose earlier turns cost little spends what
    they saved instead of cutting."""
    chat, running, clock = await long_chat_with_clock(start, vault, 300, budget_tokens=4000)
    frames = running.plugin.services.frames
    for _ in range(6):  # sittings of two requests, the cache cold between them
        clock.now += 3600
        ctx = await turn(running, chat[:-1], chat[-1]["content"], "gpt-5")
        clock.now += 30
        ctx = await turn(running, chat[:-1], chat[-1]["content"], "gpt-5")
        record = ctx.metadata["smart_context"]
        assert record["layout"]["credit"] == round(frames.get("long").credit)
    assert record["layout"]["kept_messages"] < 299  # sittings this short: the write is dear
    frame = frames.get("long")
    # a cut chat's sittings keep to the budget, whatever it saved before
    frames.put("long", replace(frame, credit=8 * 4000.0))
    clock.now += 3600
    ctx = await turn(running, chat[:-1], chat[-1]["content"], "gpt-5")
    assert ctx.metadata["smart_context"]["layout"]["kept_messages"] < 299
    # a chat still whole that spent little so far spends what it saved rather than cut
    frames.put("long", replace(frame, start_id=None, credit=8 * 4000.0))
    clock.now += 3600
    ctx = await turn(running, chat[:-1], chat[-1]["content"], "gpt-5")
    assert ctx.metadata["smart_context"]["layout"]["kept_messages"] == 299
    assert ctx.metadata["smart_context"]["layout"]["credit"] < 8 * 4000


def test_the_recalled_part_takes_the_best_hits_before_the_cut_alone_within_its_room() -> None:
    tokens = np.array([30, 30, 100, 30, 30, 30], dtype=np.intp)
    scores = np.array([0.9, 0.1, 0.8, 0.7, 0.0, 0.95], dtype=np.float32)
    hits = np.array([5, 0, 2, 3, 1], dtype=np.intp)  # best first; 5 is in the kept history
    inputs = Inputs(tokens, np.zeros(6, dtype=bool), scores, scores, hits)
    kept = recall(inputs, before=4, room=70, limit=10).keep
    assert kept.tolist() == [True, False, False, True, False, False]  # 2 does not fit: 3 does
    assert not recall(inputs, before=4, room=70, limit=1).keep.any()  # only hit 5, kept anyway


async def test_a_pin_before_the_cut_restates_the_stable_part_and_says_so(
    start: Any, vault: Path
) -> None:
    chat, running, clock = await long_chat_with_clock(start, vault, 300, budget_tokens=2000)
    first = await turn(running, chat[:-3], chat[-3]["content"], "gpt-5")
    layout = first.metadata["smart_context"]["layout"]
    assert layout["start_id"] is not None  # the chat does not fit whole: the early part is cut
    await running.command("mark_important", chat_id="long", message_id="m0002")
    clock.now += 10
    pinned = await turn(running, chat[:-1], chat[-1]["content"], "gpt-5")
    assert pinned.metadata["smart_context"]["layout"]["cut"] == "pins or session items changed"
    assert "m0002" not in [m.get("id") for m in pinned.history]  # quoted in the stable part
    assert chat[2]["content"].strip() in pinned.history[0]["content"]
    clock.now += 10
    after = await turn(running, chat, "And now?", "gpt-5")
    assert after.metadata["smart_context"]["layout"]["cut"] is None  # stable again


async def test_a_host_word_on_the_placement_that_is_not_one_falls_back_to_the_setting(
    start: Any, vault: Path
) -> None:
    chat = long_chat(300)
    write_chat(vault, "long", chat)
    running = await start(settings={"budget_tokens": 2000})
    for said in ("tool", 42, None):
        ctx = Ctx("long", chat[:-1], chat[-1]["content"])
        ctx.metadata.update(model="gpt-5", recalled_in=said)
        await call(running.pm.hook.pipeline_context, ctx=ctx)
        assert ctx.metadata["smart_context"]["layout"]["recalled_in"] == "user"
        assert ctx.message.endswith(chat[-1]["content"])


def test_the_tools_cost_is_kept_for_equal_tools_and_counted_again_when_they_change() -> None:
    frames, counter = Frames(), counter_for("gpt-4o")
    tool = {"type": "function", "function": {"name": "f", "description": "short"}}
    first = Costs(counter, frames.costs, frames.tools_json).tools([tool])
    tool["function"]["description"] = "a much longer description, of many more tokens than before"
    # the next request's tools, equal to what it counted last: the JSON kept is a copy, so the
    # caller's change above is a change
    changed = Costs(counter, frames.costs, frames.tools_json).tools([tool])
    assert changed > first
    again = Costs(counter, frames.costs, frames.tools_json).tools([dict(tool)])
    assert again == changed
    assert Costs(counter, {}, []).tools([tool]) == changed  # as counted afresh
