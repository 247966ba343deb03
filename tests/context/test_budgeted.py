"""The token budget through the real plugin: a long chat on real files, the fake embedder and
the real SQLite store. What is sent never passes the budget, keeps the recent, pinned and
relevant messages, and carries the stored summaries of the rest after the background pass."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from smart_context.budget.parts import summary_message
from smart_context.budget.tokens import PER_REPLY, Estimate, counter_for, prompt_tokens
from smart_context.memory.db import MemoryDB
from smart_context.memory.records import Summary
from tests.conftest import Ctx, call, write_chat

SUBJECTS = [
    "the sourdough starter needs rye flour and a warm kitchen",
    "the garden beds get tomatoes, basil and a drip line",
    "the Python parser reads TOML files with tomlkit",
    "the trip to Lisbon in May needs a hotel near Alfama",
]


def long_chat(n: int) -> list[dict[str, Any]]:
    messages = []
    for i in range(n):
        subject = SUBJECTS[(i // 6) % len(SUBJECTS)]
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Message {i} about {subject}. " + "More words about it, and detail. " * 4
        messages.append({"id": f"m{i:04d}", "role": role, "content": text})
    if n <= 123:
        return messages
    messages[123]["content"] = (
        "The landlord, Mrs. Okafor, said the lease ends on 14 March and the deposit is 950 euros."
    )
    return messages


class CountingDB(MemoryDB):
    """The real store, counting its summary reads."""

    reads = 0

    def summaries(self, chat_id: str) -> Any:
        self.reads += 1
        return super().summaries(chat_id)


def sent_tokens(ctx: Any) -> int:
    from smart_context_hosts.sidecar.pipeline import PipelineContext, prompt_messages

    pc = PipelineContext(message=ctx.message, original_message=ctx.message, history=ctx.history)
    tools = ctx.metadata.get("tools") or []
    return prompt_tokens(counter_for("gpt-4o"), prompt_messages(pc), tools)["total"]


@pytest.fixture
def chat(vault: Path) -> list[dict[str, Any]]:
    messages = long_chat(400)
    write_chat(vault, "long", messages)
    return messages


async def test_a_chat_that_fits_is_sent_whole_and_the_record_says_what_it_cost(
    start: Any, vault: Path
) -> None:
    messages = long_chat(20)
    write_chat(vault, "short", messages)
    running = await start(settings={"budget_tokens": 8000})
    ctx = await running.context("short", messages)
    assert [m["id"] for m in ctx.history] == [m["id"] for m in messages]
    budget = ctx.metadata["smart_context"]["budget"]
    assert budget["limit"] == 8000 and 0 < budget["used"] <= 8000
    assert budget["by_section"]["history"] > 0 and budget["by_section"]["summaries"] == 0


async def test_a_long_chat_is_cut_to_the_budget_keeping_recent_and_relevant_turns(
    start: Any, chat: list[dict[str, Any]]
) -> None:
    running = await start(
        settings={"budget_tokens": 2000, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    ctx = Ctx("long", chat, "When does the lease with Mrs. Okafor end?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    ids = [m.get("id") for m in ctx.history]
    assert sent_tokens(ctx) <= 2000
    assert record["budget"]["used"] <= 2000
    # the newest messages, in order: at least the last turn, fewer than ten in so small a room
    recent = len(record["recent_ids"])
    assert 2 <= recent < 10 and ids[-recent:] == [m["id"] for m in chat[-recent:]]
    assert set(record["recent_ids"]) == {m["id"] for m in chat[-recent:]}
    assert "m0123" in ids and "m0123" in record["relevant_ids"]
    assert "m0122" in ids  # the question before the answer that matched
    assert len(record["included_ids"]) == len(ids)  # the record names what was sent
    assert alternates(ctx.history)


def alternates(history: list[dict[str, Any]]) -> bool:
    """The turns sent go user, assistant, user... (summaries, system messages, aside)."""
    roles = [m["role"] for m in history if m["role"] != "system"]
    return all(a != b for a, b in itertools.pairwise(roles))


async def test_a_relevant_message_among_the_last_ten_a_small_room_leaves_out_is_searched(
    start: Any, vault: Path
) -> None:
    messages = long_chat(400)
    messages[393]["content"] = "The landlord, Mrs. Okafor, said the deposit is 950 euros."
    write_chat(vault, "late", messages)
    running = await start(
        settings={"budget_tokens": 1000, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    ctx = Ctx("late", messages, "What deposit did Mrs. Okafor ask for?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    assert "m0393" not in record["recent_ids"]  # a small room sends fewer than ten
    assert "m0393" in record["relevant_ids"]  # but the search still finds it


async def test_a_small_room_sends_a_relevant_message_in_a_run_with_the_answer_after_it(
    start: Any, vault: Path
) -> None:
    messages = long_chat(300)
    for i, message in enumerate(messages):  # two people writing two messages in a row
        message["role"] = "user" if (i // 2) % 2 == 0 else "assistant"
    messages[120]["content"] = "The landlord, Mrs. Okafor, said the deposit is 950 euros."
    write_chat(vault, "runs", messages)
    running = await start(
        settings={"budget_tokens": 800, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    ctx = Ctx("runs", messages, "What deposit did Mrs. Okafor ask for?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    ids = [m.get("id") for m in ctx.history]
    assert "m0120" in ctx.metadata["smart_context"]["relevant_ids"]
    assert "m0120" in ids and "m0122" in ids  # the user's message and the answer to its run


async def test_pinned_messages_are_sent_and_named(
    start: Any, vault: Path, chat: list[dict[str, Any]]
) -> None:
    MemoryDB(vault).set_mark("long", "m0007", True)
    running = await start(settings={"budget_tokens": 1500})
    ctx = await running.context("long", chat)
    assert "m0007" in [m.get("id") for m in ctx.history]
    assert ctx.metadata["smart_context"]["important_ids"] == ["m0007"]
    # the pinned answer brings its question: the turns sent still alternate
    assert "m0006" in [m.get("id") for m in ctx.history] and alternates(ctx.history)


async def test_after_the_background_pass_summaries_stand_in_for_what_is_left_out(
    start: Any, vault: Path, chat: list[dict[str, Any]]
) -> None:
    running = await start(settings={"budget_tokens": 2500, "summarizer": "offline"})

    await call(running.pm.hook.pipeline_output, ctx=Ctx("long", chat))
    await running.settle()
    db = MemoryDB(vault)
    stored = db.summaries("long")
    assert stored and {s.level for s in stored} >= {1, 2}
    assert all(s.text for s in stored if s.level == 1)
    ctx = await running.context("long", chat)
    record = ctx.metadata["smart_context"]
    assert record["summaries"], record["budget"]
    assert record["budget"]["by_section"]["summaries"] > 0
    summaries = [m for m in ctx.history if "earlier messages" in m["content"]]
    assert len(summaries) == len(record["summaries"])
    assert sent_tokens(ctx) <= 2500
    progress = [e for e in running.host.events if e[0] == "smart_context.memory_progress"]
    assert progress and progress[-1][1]["done"] == progress[-1][1]["total"]


async def test_an_edited_message_drops_the_summaries_over_it_and_they_are_made_again(
    start: Any, vault: Path, chat: list[dict[str, Any]]
) -> None:
    running = await start(settings={"budget_tokens": 2500, "summarizer": "offline"})
    services = running.plugin.services
    assert services is not None
    from smart_context.memory.refresh import refresh_memory
    from smart_context.paths import ChatId

    await refresh_memory(services.memory_pass, ChatId("long"))
    before = {s.key: s.covers for s in MemoryDB(vault).summaries("long")}
    chat[15]["content"] = "An edited message about something else entirely."
    write_chat(vault, "long", chat)
    await refresh_memory(services.memory_pass, ChatId("long"))
    after = {s.key: s.covers for s in MemoryDB(vault).summaries("long")}
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == {(1, "m0010", "m0019"), (2, "m0000", "m0049"), (3, "m0000", "m0249")}


async def test_no_budget_sends_the_history_as_the_topic_rule_leaves_it(
    start: Any, chat: list[dict[str, Any]]
) -> None:
    running = await start(settings={"budget_tokens": 0})
    ctx = await running.context("long", chat)
    assert len(ctx.history) == len(chat) and "budget" not in ctx.metadata["smart_context"]


async def test_a_broken_database_never_costs_the_reply(
    start: Any, vault: Path, chat: list[dict[str, Any]]
) -> None:
    (vault / ".memory" / "smart_context.sqlite").write_bytes(b"not a database at all" * 100)
    running = await start(settings={"budget_tokens": 2000})
    ctx = await running.context("long", chat)
    assert 10 <= len(ctx.history) < len(chat)
    assert sent_tokens(ctx) <= 2000
    assert list((vault / ".memory").glob("smart_context.sqlite.corrupt-*"))
    json.dumps(ctx.metadata["smart_context"])  # the record stays JSON


async def test_a_store_that_fails_mid_session_costs_only_its_part_of_the_budget(
    start: Any, chat: list[dict[str, Any]]
) -> None:
    from smart_context.errors import MemoryDBError

    running = await start(
        settings={"budget_tokens": 2000, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    services = running.plugin.services
    assert services is not None

    def locked(*_: Any) -> Any:
        raise MemoryDBError("The memory store is locked by another process.")

    for name in ("marks", "summaries"):
        setattr(services.memory_db, name, locked)
    ctx = Ctx("long", chat, "When does the lease with Mrs. Okafor end?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    assert "error" not in ctx.metadata["smart_context"]
    assert 10 <= len(ctx.history) < len(chat) and sent_tokens(ctx) <= 2000


def test_summary_counts_are_kept_within_bounds(
    monkeypatch: pytest.MonkeyPatch, vault: Path
) -> None:
    from smart_context.budget import budgeter as budgeted
    from smart_context.config import Settings

    monkeypatch.setattr(budgeted, "MAX_COUNTED", 3)
    budgeter = budgeted.Budgeter(Settings(), MemoryDB(vault))
    counter = counter_for("gpt-4o")
    rows = [
        Summary("c", 1, f"m{i}", f"m{i + 9}", "h", 10, f"summary number {i}", 5, "offline")
        for i in range(5)
    ]
    first = budgeter._count_summaries(counter, rows)
    again = budgeter._count_summaries(counter, rows)  # over the bound: counted afresh, same
    assert first == again and all(n > 3 for n in first)
    sent = [prompt_tokens(counter, [summary_message(row)])["messages"] for row in rows]
    assert first == [n - PER_REPLY for n in sent]  # each as the message that is sent
    for step in range(3 * budgeted.MAX_COUNTERS):  # an estimate calibrating: a key a step
        estimate = Estimate(chars_per_token=3.0 + step / 10, name="some-model")
        budgeter._count_summaries(estimate, rows)
        assert len(budgeter._summary_tokens) <= budgeted.MAX_COUNTERS


async def test_a_message_that_shares_nothing_with_the_question_is_never_called_relevant(
    start: Any, vault: Path
) -> None:
    filler = "Tomatoes basil drip line mulch compost watering schedule beds. " * 6
    messages = [
        {"id": f"g{i:03d}", "role": "user" if i % 2 == 0 else "assistant", "content": filler}
        for i in range(80)
    ]
    messages[20]["content"] = "Okafor lease ends in March; deposit 950 euros."
    write_chat(vault, "garden", messages)
    running = await start(settings={"budget_tokens": 3000, "search_limit": 100})
    ctx = Ctx("garden", messages, "Okafor lease?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    # the hit and its turn's answer, not the older messages that scored zero
    assert record["relevant_ids"] == ["g020", "g021"]


async def test_a_long_chat_met_first_is_searched_by_its_words_with_no_pass(
    start: Any, vault: Path
) -> None:
    """The words of a chat are read with its other facts, on the request that meets it: an old
    message sharing a rare word with the question is found at once, before any background pass
    (a text index kept by the pass found nothing until the pass had run)."""
    messages = long_chat(2100)
    write_chat(vault, "big", messages)
    running = await start(settings={"budget_tokens": 2000, "summarization_threshold": 10_000})
    ctx = Ctx("big", messages, "When does the lease with Mrs. Okafor end?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    assert "m0123" in ctx.metadata["smart_context"]["relevant_ids"]


async def test_the_stored_summaries_are_read_once_while_messages_are_added(vault: Path) -> None:
    from smart_context.budget.budgeter import Budgeter
    from smart_context.budget.facts import MessageFacts
    from smart_context.config import Settings
    from smart_context.memory.refresh import summarize_chat
    from smart_context.messages import History

    messages = long_chat(200)
    db = CountingDB(vault)
    await summarize_chat(db, "long", messages, Settings(summarizer="offline"), None)
    db.reads = 0
    budgeter = Budgeter(Settings(), db)
    counter = counter_for("gpt-4o")
    facts = MessageFacts(counter)
    spans, _ = await budgeter._spans_of("long", facts.update(History(messages)), counter)
    assert spans and db.reads == 1
    longer = facts.update(History([*messages, *long_chat(203)[200:]]))  # three new messages
    assert (await budgeter._spans_of("long", longer, counter))[0] == spans and db.reads == 1
    edited = [{**messages[0], "content": "an edit"}, *messages[1:]]
    # an edit: the facts are read afresh, and the summaries
    await budgeter._spans_of("long", facts.update(History(edited)), counter)
    assert db.reads == 2


async def test_summaries_found_valid_are_not_hashed_again_while_the_chat_only_grows(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new summary stored (the pass says so) plans the spans again: the summaries found
    valid over the same messages before keep their check; after an edit every one is checked."""
    from smart_context.budget.budgeter import Budgeter
    from smart_context.config import Settings
    from smart_context.memory import tree
    from smart_context.memory.refresh import summarize_chat
    from smart_context.messages import History

    hashed: list[tuple[int, int]] = []
    hash_of = tree.covers

    def counted(keys: Any, start: int, end: int) -> str:
        hashed.append((start, end))
        return hash_of(keys, start, end)

    messages = long_chat(260)
    db = CountingDB(vault)
    await summarize_chat(db, "long", messages[:200], Settings(summarizer="offline"), None)
    budgeter = Budgeter(Settings(), db)
    counter = counter_for("gpt-4o")
    facts = budgeter.facts("long", counter).update(History(messages[:200]))
    monkeypatch.setattr(tree, "covers", counted)
    spans, _ = await budgeter._spans_of("long", facts, counter)
    first = len(hashed)
    assert spans and first == len(spans)  # each stored summary checked once
    await summarize_chat(db, "long", messages, Settings(summarizer="offline"), None)
    hashed.clear()
    longer = budgeter.facts("long", counter).update(History(messages))
    await budgeter.summaries_changed("long", len(messages))
    spans, _ = await budgeter._spans_of("long", longer, counter)
    assert 0 < len(hashed) < first and len(spans) == first + len(hashed)  # the new ones only
    hashed.clear()
    edited = [{**messages[0], "content": "an edit"}, *messages[1:]]
    await budgeter._spans_of(
        "long", budgeter.facts("long", counter).update(History(edited)), counter
    )
    assert len(hashed) >= len(spans)  # every one checked again (those over the edit fail)


async def test_a_calibration_step_keeps_the_chats_facts_and_recounts_its_spans(
    vault: Path,
) -> None:
    """An estimated model's figure moving a step (the servers' reports calibrate it) neither
    reads the chat's facts again (a 10,000-message chat: half a second of entities) nor keeps
    the summaries' counts of the old figure."""
    from smart_context.budget.budgeter import Budgeter
    from smart_context.config import Settings
    from smart_context.memory.refresh import summarize_chat
    from smart_context.messages import History

    messages = long_chat(200)
    db = CountingDB(vault)
    await summarize_chat(db, "long", messages, Settings(summarizer="offline"), None)
    budgeter = Budgeter(Settings(), db)
    estimate = Estimate()  # a model no tokenizer ships for, calibrated in place
    kept = budgeter.facts("long", estimate)
    before = kept.update(History(messages))
    spans, _ = await budgeter._spans_of("long", before, estimate)
    while not estimate.calibrate(10_000, 4_000):
        pass
    assert budgeter.facts("long", estimate) is kept
    after = kept.update(History(messages))
    assert after.resets == before.resets and int(after.tokens.sum()) > int(before.tokens.sum())
    recounted, _ = await budgeter._spans_of("long", after, estimate)
    assert [s.tokens for s in recounted] != [s.tokens for s in spans]
    assert [(s.start, s.end) for s in recounted] == [(s.start, s.end) for s in spans]


async def test_a_turn_is_searched_by_its_words_from_the_next_request_on(
    start: Any, vault: Path
) -> None:
    """Each request reads the words of the messages added since the last one only: a turn
    that has gone out of the recent messages is still found by a rare word it said."""
    messages = long_chat(400)
    write_chat(vault, "long", messages)
    running = await start(settings={"budget_tokens": 2000})
    await running.context("long", messages)
    turn = [
        {"id": "t1", "role": "user", "content": "The locker code at the pool is 4417, zebra."},
        {"id": "t2", "role": "assistant", "content": "Noted: locker 4417."},
    ]
    longer = [*messages, *turn, *long_chat(440)[400:]]
    ctx = Ctx("long", longer, "What was the zebra locker code again?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    assert "t1" in record["relevant_ids"] and "t1" not in record["recent_ids"]


async def test_new_summaries_are_planned_in_the_background_not_by_the_next_request(
    vault: Path,
) -> None:
    from smart_context.budget.budgeter import Budgeter
    from smart_context.config import Settings
    from smart_context.memory.refresh import summarize_chat
    from smart_context.messages import History

    messages = long_chat(200)
    db = CountingDB(vault)
    budgeter = Budgeter(Settings(), db)
    counter = counter_for("gpt-4o")
    facts = budgeter.facts("long", counter).update(History(messages))
    assert await budgeter._spans_of("long", facts, counter) == ([], [])
    await summarize_chat(db, "long", messages, Settings(summarizer="offline"), None)
    db.reads = 0
    await budgeter.summaries_changed("long", len(messages))  # the pass that stored them says so
    assert db.reads == 1
    spans, rows = await budgeter._spans_of("long", facts, counter)  # the next request
    assert spans and rows and db.reads == 1
    # a pass over more messages than the last request had: planned over that shorter history,
    # the newest summaries would be left out; the next request plans them instead
    other = Budgeter(Settings(), db)
    short = other.facts("long", counter).update(History(messages[:60]))
    await other.summaries_changed("long", len(messages))
    assert db.reads == 1
    longer = other.facts("long", counter).update(History(messages))
    assert (await other._spans_of("long", longer, counter))[0] == spans and db.reads == 2
    assert short.n == 60


async def test_the_pass_that_makes_summaries_plans_them_for_the_next_request(
    start: Any, vault: Path, chat: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the plugin: a request first (the budget knows the chat's history), then the pass
    after its reply makes the summaries and plans them, so the next request reads none."""
    running = await start(settings={"budget_tokens": 2500, "summarizer": "offline"})
    await running.context("long", chat)
    await call(running.pm.hook.pipeline_output, ctx=Ctx("long", chat))
    await running.settle()
    services = running.plugin.services
    assert services is not None and services.memory_db.summaries("long")
    reads: list[str] = []
    real = services.memory_db.summaries

    def counted(chat_id: str) -> Any:
        reads.append(chat_id)
        return real(chat_id)

    monkeypatch.setattr(services.memory_db, "summaries", counted)
    ctx = await running.context("long", chat)
    assert ctx.metadata["smart_context"]["summaries"] and reads == []
