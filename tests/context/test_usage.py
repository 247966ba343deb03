"""Per-request usage through the real plugin: the tokens sent against the whole history's, with
and without a budget or a topic filter; the server's reported prompt tokens beside ours, and the
estimate of a model without a tokenizer calibrated by them, kept across a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smart_context.budget.calibration import calibration_file
from smart_context.budget.tokens import counter_for, prompt_tokens
from smart_context.record import included_ids
from tests.conftest import Ctx, call, write_chat
from tests.context.test_budgeted import long_chat
from tests.fakes import make_messages
from tests.test_plugin import TEXTS, TOPICS

UNKNOWN = "house-model-7b"  # no offline tokenizer: estimated


def whole_request(chat: list[dict[str, Any]], ctx: Any, model: str) -> int:
    """The request of ``ctx`` with every message of ``chat``, counted apart from the plugin."""
    messages = [*chat, {"role": "user", "content": ctx.message}]
    return prompt_tokens(counter_for(model), messages, ctx.metadata.get("tools") or [])["total"]


async def test_without_a_budget_everything_is_sent_and_the_ratio_is_one(
    start: Any, vault: Path
) -> None:
    chat = long_chat(30)
    write_chat(vault, "c", chat)
    running = await start(settings={"token_model": "gpt-4o"})
    ctx = await running.context("c", chat)
    usage = ctx.metadata["smart_context"]["usage"]
    expected = whole_request(chat, ctx, "gpt-4o")
    assert usage == {
        "sent_tokens": expected,
        "full_tokens": expected,
        "ratio": 1.0,
        "counted_with": "o200k_base",
        "exact": True,
    }


async def test_a_budget_sends_less_than_the_whole_history_and_says_how_much(
    start: Any, vault: Path
) -> None:
    chat = long_chat(400)
    write_chat(vault, "long", chat)
    running = await start(settings={"budget_tokens": 50, "token_model": "gpt-4o"})
    ctx = await running.context("long", chat)
    record = ctx.metadata["smart_context"]
    usage = record["usage"]
    assert usage["sent_tokens"] == record["budget"]["used"] <= 2000
    assert usage["full_tokens"] == whole_request(chat, ctx, "gpt-4o")
    assert usage["ratio"] == round(usage["full_tokens"] / usage["sent_tokens"], 2) > 10


async def test_a_topic_filter_counts_the_kept_messages_against_the_whole_chat(
    start: Any, vault: Path
) -> None:
    chat = make_messages(TEXTS)
    write_chat(vault, "c1", chat, topics=TOPICS)
    running = await start({"similarity_threshold": 0.3, "token_model": "gpt-4o"})
    await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    for _ in range(2):  # the second request reuses the counts of the first
        ctx = await running.context("c1", list(chat))
        usage = ctx.metadata["smart_context"]["usage"]
        assert ctx.metadata["smart_context"]["mode"] == "filtered"
        assert usage["sent_tokens"] == whole_request(ctx.history, ctx, "gpt-4o")
        assert usage["full_tokens"] == whole_request(chat, ctx, "gpt-4o")
        assert usage["ratio"] > 1


async def test_the_reported_prompt_tokens_calibrate_an_estimate_and_survive_a_restart(
    start: Any, vault: Path
) -> None:
    chat = long_chat(40)
    write_chat(vault, "c", chat)
    running = await start(settings={"token_model": UNKNOWN})
    ctx = await running.context("c", chat)
    usage = ctx.metadata["smart_context"]["usage"]
    assert (usage["counted_with"], usage["exact"]) == ("estimate", False)
    before = usage["sent_tokens"]
    # the server counted 2.5 characters per token where we guessed 4
    characters = sum(len(m["content"]) for m in [*ctx.history]) + len(ctx.message)
    tools = ctx.metadata.get("tools") or []
    characters += sum(len(json.dumps(t, ensure_ascii=False)) for t in tools)
    ctx.metadata["usage"] = {"prompt_tokens": int(characters / 2.5) + 3 * 42}
    await call(running.pm.hook.pipeline_post_process, ctx=ctx)
    usage = ctx.metadata["smart_context"]["usage"]
    assert usage["reported_prompt_tokens"] == ctx.metadata["usage"]["prompt_tokens"]
    assert 2.3 < usage["chars_per_token"] < 2.7
    saved = json.loads(calibration_file(vault).read_text())
    assert saved["models"][UNKNOWN]["samples"] == 1

    again = await start(settings={"token_model": UNKNOWN})  # a new process reads it back
    later = (await again.context("c", chat)).metadata["smart_context"]["usage"]
    assert later["sent_tokens"] > before * 1.4  # counted with the corrected figure


async def test_an_exact_count_is_left_alone_and_the_disagreement_is_kept(
    start: Any, vault: Path
) -> None:
    chat = long_chat(10)
    write_chat(vault, "c", chat)
    running = await start(settings={"token_model": "gpt-4o"})
    ctx = await running.context("c", chat)
    ctx.metadata["usage"] = {"prompt_tokens": 9999}
    await call(running.pm.hook.pipeline_post_process, ctx=ctx)
    usage = ctx.metadata["smart_context"]["usage"]
    assert usage["reported_prompt_tokens"] == 9999 and "chars_per_token" not in usage
    assert not calibration_file(vault).exists()


@pytest.mark.parametrize(
    "reported", [None, "120", True, -5, 0, 1.5, {"prompt_tokens": "x"}, ["prompt_tokens"]]
)
async def test_a_strange_report_is_ignored(start: Any, vault: Path, reported: Any) -> None:
    chat = long_chat(6)
    write_chat(vault, "c", chat)
    running = await start(settings={"token_model": UNKNOWN})
    ctx = await running.context("c", chat)
    ctx.metadata["usage"] = (
        reported if isinstance(reported, dict | list) else {"prompt_tokens": reported}
    )
    await call(running.pm.hook.pipeline_post_process, ctx=ctx)
    assert "reported_prompt_tokens" not in ctx.metadata["smart_context"]["usage"]
    assert not calibration_file(vault).exists()


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        (  # the reference sidecar's and the proxy's reading of it
            {"prompt_tokens": 900, "cached_tokens": 768, "cache_write_tokens": 12},
            {"reported_cached_tokens": 768, "reported_cache_write_tokens": 12},
        ),
        (  # a host that hands on the server's own usage: OpenAI's shape
            {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 0}},
            {"reported_cached_tokens": 0},
        ),
        ({"prompt_tokens": 900, "cached_tokens": -1, "cache_write_tokens": "12"}, {}),
        ({"cached_tokens": 640}, {"reported_cached_tokens": 640}),  # and no prompt count
    ],
    ids=["normalised", "openai", "garbage", "cache-only"],
)
async def test_the_servers_cache_counts_are_kept_beside_ours(
    start: Any, vault: Path, said: dict[str, Any], expected: dict[str, int]
) -> None:
    chat = long_chat(6)
    write_chat(vault, "c", chat)
    running = await start(settings={"token_model": "gpt-4o"})
    ctx = await running.context("c", chat)
    ctx.metadata["usage"] = said
    await call(running.pm.hook.pipeline_post_process, ctx=ctx)
    usage = ctx.metadata["smart_context"]["usage"]
    kept = {k: v for k, v in usage.items() if k.startswith("reported_cache")}
    assert kept == expected
    assert usage.get("reported_prompt_tokens") == said.get("prompt_tokens")


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"version": 99, "models": {}}',
        '{"version": 1, "models": {"m": {"chars_per_token": "x", "samples": 1}}}',
        '{"version": 1, "models": {"m": {"chars_per_token": 1e308, "samples": true}}}',
        "[]",
    ],
)
async def test_a_damaged_calibration_file_is_ignored_and_replaced(
    start: Any, vault: Path, text: str
) -> None:
    path = calibration_file(vault)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    chat = long_chat(6)
    write_chat(vault, "c", chat)
    running = await start(settings={"token_model": UNKNOWN})
    ctx = await running.context("c", chat)
    assert ctx.metadata["smart_context"]["usage"]["counted_with"] == "estimate"
    ctx.metadata["usage"] = {"prompt_tokens": 500}
    await call(running.pm.hook.pipeline_post_process, ctx=ctx)
    assert json.loads(path.read_text())["version"] == 1


async def test_a_failed_request_record_has_no_usage_and_post_process_still_passes(
    start: Any, vault: Path
) -> None:
    running = await start()
    ctx = Ctx("../bad", [{"id": "a", "role": "user", "content": "hi"}])
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    assert "usage" not in ctx.metadata["smart_context"]
    ctx.metadata["usage"] = {"prompt_tokens": 10}
    await call(running.pm.hook.pipeline_post_process, ctx=ctx)  # nothing to add to, no raise


async def test_a_filter_then_a_budget_name_exactly_the_messages_sent(
    start: Any, vault: Path
) -> None:
    chat = make_messages(TEXTS)
    write_chat(vault, "c1", chat, topics=TOPICS)
    settings = {
        "similarity_threshold": 0.3,
        "token_model": "gpt-4o",
        "budget_tokens": 50,
        "recent_messages": 1,
        "memory_tools": False,
    }
    running = await start(settings)
    chosen = await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    filtered = chosen["included_ids"]  # what the filter keeps, before any budget
    ctx = await running.context("c1", list(chat))
    record = ctx.metadata["smart_context"]
    sent = [m["id"] for m in ctx.history if m.get("id") is not None]
    assert record["mode"] == "filtered"
    assert 0 < len(sent) < len(filtered) and set(sent) <= set(filtered)  # the budget narrowed it
    assert included_ids(record, [m["id"] for m in chat]) == sent
    # the stored record scores the messages sent, not every one the filter kept: it stays small
    assert list(record["scores"]) == sent
