"""One plan per request: the message is split into sentences and embedded once, however many
sections search by it (agent items, the vault's notes, the budget's look back)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import Ctx, Running, call, write_chat
from tests.context.test_allocate import item
from tests.context.test_budgeted import long_chat
from tests.fakes import FakeEmbedder

MESSAGE = "When does the lease with Mrs. Okafor end? And what is the deposit?"


async def lease_vault(start: Any, vault: Path) -> tuple[list[dict[str, Any]], Running]:
    """A vault where every section finds something for :data:`MESSAGE`: an agent reference, a
    note, and a 400-message chat under a budget of 2,000 tokens; and the plugin started on it."""
    item(vault / "references", "The Flat", "agent", "Mrs. Okafor owns the flat; the lease ends.")
    (vault / "notes").mkdir()
    (vault / "notes" / "lease.md").write_text(
        "# Lease\n\nThe lease with Mrs. Okafor ends in March. What is the deposit? 950 euros.\n"
    )
    chat = long_chat(400)
    write_chat(vault, "long", chat)
    running = await start(settings={"budget_tokens": 2000, "token_model": "gpt-4o"})
    return chat, running


async def test_every_section_searches_with_the_message_embedded_once(
    start: Any, vault: Path, embedder: FakeEmbedder
) -> None:
    chat, running = await lease_vault(start, vault)
    await running.context("long", chat)  # warm: the chat, the items and the notes embedded
    await running.settle()
    embedder.calls.clear()
    ctx = Ctx("long", chat, MESSAGE)
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    assert record["relevant_ids"], "the budget searched the history"
    assert [i["name"] for i in ctx.metadata["request_context"]["items"]] == ["The Flat"]
    assert [n["path"] for n in record["knowledge"]] == ["notes/lease.md"]
    asked = [batch for batch in embedder.calls if any("Okafor" in t for t in batch)]
    assert asked == [["When does the lease with Mrs. Okafor end?", "And what is the deposit?"]], (
        "one embedding of the message's sentences for all three searches"
    )


async def test_a_blank_message_searches_nothing_and_the_request_goes_through(
    start: Any, vault: Path, embedder: FakeEmbedder
) -> None:
    item(vault / "references", "The Flat", "agent", "Mrs. Okafor owns the flat; the lease ends.")
    chat = long_chat(400)
    write_chat(vault, "long", chat)
    running = await start(settings={"budget_tokens": 2000, "token_model": "gpt-4o"})
    await running.context("long", chat)
    await running.settle()
    embedder.calls.clear()
    ctx = Ctx("long", chat, "   \n ")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    assert "error" not in record and record["budget"]["used"] <= 2000
    assert ctx.metadata["request_context"]["items"] == []
    assert embedder.calls == [], "a blank message is not embedded"


async def test_a_warm_request_makes_one_trip_off_the_loop(
    start: Any, vault: Path, monkeypatch: Any
) -> None:
    """The store's reads and the looks at the item and note files share one worker-thread
    trip: each trip costs the loop a hand-off, far more on a busy machine than the reads."""
    chat, running = await lease_vault(start, vault)
    await running.context("long", chat)
    await call(running.pm.hook.pipeline_output, ctx=Ctx("long", chat))  # the chat embedded
    await running.settle()
    await call(running.pm.hook.pipeline_context, ctx=Ctx("long", chat, MESSAGE))  # all caught up
    trips: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        trips.append(getattr(func, "__name__", repr(func)))
        return await to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    ctx = Ctx("long", chat, MESSAGE)
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    assert record["relevant_ids"] and record["knowledge"], "every section ran"
    assert trips == ["look"]


async def test_the_budget_scores_the_history_once_with_the_plan(
    start: Any, vault: Path, monkeypatch: Any
) -> None:
    """The budget's dense search starts with the plan, before the sections are built, so its
    waits overlap theirs, and the budget uses that one result: the chat's vectors are scored
    once per request."""
    from smart_context.context import assemble
    from smart_context.store import VectorStore

    chat, running = await lease_vault(start, vault)
    await running.context("long", chat)
    await call(running.pm.hook.pipeline_output, ctx=Ctx("long", chat))  # the chat embedded
    await running.settle()
    events: list[str] = []
    known_scores, build = VectorStore.known_scores, assemble.build

    async def scored(self: VectorStore, *args: Any) -> Any:
        events.append("scored")
        return await known_scores(self, *args)

    async def built(*args: Any) -> Any:
        events.append("built")
        return await build(*args)

    monkeypatch.setattr(VectorStore, "known_scores", scored)
    monkeypatch.setattr(assemble, "build", built)
    ctx = Ctx("long", chat, MESSAGE)
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    assert ctx.metadata["smart_context"]["relevant_ids"], "the budget searched the history"
    assert events == ["scored", "built"]
