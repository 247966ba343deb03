"""One plan per request: the message is split into sentences and embedded once, however many
sections search by it (agent items, the vault's notes, the budget's look back)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from smart_context.errors import MemoryDBError
from smart_context.memory.db import MemoryDB
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


async def warm_lease(start: Any, vault: Path) -> tuple[list[dict[str, Any]], Running]:
    """:func:`lease_vault` with its chat embedded and indexed, and a request made."""
    chat, running = await lease_vault(start, vault)
    await running.context("long", chat)
    await call(running.pm.hook.pipeline_output, ctx=Ctx("long", chat))  # the chat embedded
    await running.settle()
    await call(running.pm.hook.pipeline_context, ctx=Ctx("long", chat, MESSAGE))  # all caught up
    return chat, running


def counted_trips(monkeypatch: Any) -> list[str]:
    """The names of the functions run in worker threads from now on."""
    trips: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        trips.append(getattr(func, "__name__", repr(func)))
        return await to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return trips


async def ticks_during(request: Any) -> tuple[Any, int]:
    """``request`` awaited while a ticker counts the loop's turns (every 10 ms)."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.ensure_future(ticker())
    try:
        return await request, ticks
    finally:
        task.cancel()


async def test_a_warm_request_reads_the_store_on_the_loop_when_it_is_free(
    start: Any, vault: Path, monkeypatch: Any
) -> None:
    """The store's reads and the looks at the item and note files take well under a
    millisecond; a trip to a worker thread costs more than that, so a warm request whose store
    is free makes none."""
    chat, running = await warm_lease(start, vault)
    trips = counted_trips(monkeypatch)
    ctx = Ctx("long", chat, MESSAGE)
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    assert record["relevant_ids"] and record["knowledge"], "every section ran"
    assert "look" not in trips


async def test_a_look_that_may_take_long_is_made_in_the_trip(
    start: Any, vault: Path, monkeypatch: Any
) -> None:
    """On the loop only what is quick: a vault with many item or note files to stat is read
    in the trip."""
    chat, running = await warm_lease(start, vault)
    monkeypatch.setattr("smart_context.context.assemble.QUICK_FILES", 0)  # more files to stat
    trips = counted_trips(monkeypatch)
    ctx = Ctx("long", chat, MESSAGE)
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    assert trips.count("look") == 1
    assert (
        ctx.metadata["smart_context"]["relevant_ids"] and ctx.metadata["smart_context"]["knowledge"]
    )


async def test_a_store_another_thread_is_using_is_read_in_one_trip(
    start: Any, vault: Path, monkeypatch: Any
) -> None:
    """While a worker thread of the process uses the store (a background pass writing), the
    request reads it in one trip to a worker thread: the loop never waits for the store."""
    chat, running = await warm_lease(start, vault)
    assert running.plugin.services is not None
    db = running.plugin.services.memory_db
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.at_once() as ready:
            assert ready
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    trips = counted_trips(monkeypatch)
    ctx = Ctx("long", chat, MESSAGE)
    asyncio.get_running_loop().call_later(0.3, release.set)
    _, ticks = await ticks_during(call(running.pm.hook.pipeline_context, ctx=ctx))
    holder.join(5)
    assert trips.count("look") == 1
    assert ticks >= 10, "the loop kept turning while the request waited for the store"
    assert ctx.metadata["smart_context"]["relevant_ids"], "the reads were made after the wait"


async def test_a_read_that_fails_on_the_loop_is_made_again_in_the_trip(
    start: Any, vault: Path, monkeypatch: Any, caplog: Any
) -> None:
    """On the loop a read never waits: one that would (another process holding the database,
    the busy timeout then 0) fails there, and the request makes its reads again in a worker
    thread, where waiting is harmless; nothing is said, since nothing was lost."""
    chat, running = await warm_lease(start, vault)
    marks = MemoryDB.marks

    def busy_on_the_loop(self: MemoryDB, chat_id: str) -> set[str]:
        if threading.current_thread() is threading.main_thread():
            raise MemoryDBError("database is locked")
        return marks(self, chat_id)

    monkeypatch.setattr(MemoryDB, "marks", busy_on_the_loop)
    trips = counted_trips(monkeypatch)
    ctx = Ctx("long", chat, MESSAGE)
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    assert trips.count("look") == 1
    assert ctx.metadata["smart_context"]["relevant_ids"]
    assert "goes on without" not in caplog.text


async def test_the_budget_scores_the_history_once_with_the_plan(
    start: Any, vault: Path, monkeypatch: Any
) -> None:
    """The budget's dense search starts with the plan, before the sections are built, so its
    waits overlap theirs, and the budget uses that one result: the chat's vectors are scored
    once per request."""
    from smart_context.context import assemble
    from smart_context.store import VectorStore

    chat, running = await warm_lease(start, vault)
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


async def test_a_cut_chats_message_goes_to_the_embedder_before_the_reads_on_the_loop(
    start: Any, vault: Path, embedder: FakeEmbedder, monkeypatch: Any
) -> None:
    """With a budget that cuts the chat, the message's embedding starts with the plan: the
    reads made on the loop come after it is sent off, not before, so they do not hold it
    back."""
    from smart_context.context import plan

    chat, running = await warm_lease(start, vault)
    message = "Who signed the lease with Mrs. Okafor, and when?"
    asked: list[bool] = []
    real = plan.look_now

    def looking(what: Any) -> Any:
        asked.append(any("signed the lease" in t for t in embedder.embedded))
        return real(what)

    monkeypatch.setattr(plan, "look_now", looking)
    trips = counted_trips(monkeypatch)
    ctx = Ctx("long", chat, message)
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    assert asked == [True], "the reads, on the loop, once the message was sent to be embedded"
    assert "look" not in trips
    assert ctx.metadata["smart_context"]["relevant_ids"]
