"""The next request's topic click, made between the reply and the next message: the pass after a
reply makes it over the chat as stored, so the request that follows finds it made, even when the
turn joined a selected topic and moved its vector."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

import smart_context.context.topic_scores as topic_scores
from smart_context.context.assemble import included
from smart_context.errors import SmartContextError
from smart_context.messages import History
from smart_context.paths import ChatId
from tests.conftest import Ctx, Running, call, read_chat, write_chat
from tests.context.test_budgeted import SUBJECTS, long_chat

CHAT = "long"


def topics_of(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A topic per subject of :func:`long_chat`, its messages its members (as a map has them)."""
    found: dict[str, list[str]] = {s: [] for s in SUBJECTS}
    for i, message in enumerate(chat):
        found[SUBJECTS[(i // 6) % len(SUBJECTS)]].append(message["id"])
    return [{"label": s.title(), "count": len(ids), "message_ids": ids} for s, ids in found.items()]


async def a_turn_later(start: Any, vault: Path) -> tuple[Running, list[dict[str, Any]]]:
    """A 300-message chat under a budget, a topic selected, a request made; then the host
    stores a turn that joins the selected topic (as the map's pass would let it), the plugin is
    told (``pipeline_output``) and its pass has run. Returns the chat as now stored."""
    chat = long_chat(300)
    write_chat(vault, CHAT, chat, topics=topics_of(chat))
    running = await start(settings={"budget_tokens": 2000, "token_model": "gpt-4o"})
    label = SUBJECTS[0].title()
    assert (await running.command("set_filter", topics=[label], chat_id=CHAT))["status"] == (
        "success"
    )
    await running.context(CHAT, list(chat))
    await running.settle()
    turn = [
        {"id": "t1", "role": "user", "content": f"One more question about {SUBJECTS[0]}."},
        {"id": "t2", "role": "assistant", "content": f"One more answer about {SUBJECTS[0]}."},
    ]
    stored = read_chat(vault, CHAT)
    topics = [
        {**t, "message_ids": [*t["message_ids"], "t1", "t2"], "count": t["count"] + 2}
        if t["label"] == label
        else t
        for t in stored["topics"]
    ]
    write_chat(vault, CHAT, [*chat, *turn], topics=topics, smart_context=stored["smart_context"])
    await call(running.pm.hook.pipeline_output, ctx=Ctx(CHAT, [*chat, *turn]))
    await running.settle()
    return running, [*chat, *turn]


async def test_the_next_request_finds_the_topic_click_made(
    start: Any, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running, chat = await a_turn_later(start, vault)
    scored: list[int] = []  # the rows each click scored
    clicked = topic_scores._clicked

    def counted(vectors: Any, rows: Any, *args: Any) -> Any:
        scored.append(len(rows))
        return clicked(vectors, rows, *args)

    monkeypatch.setattr(topic_scores, "_clicked", counted)
    ctx = await running.context(CHAT, list(chat))
    assert scored == [0], "the turn's new topic members were scored after the reply, not now"
    record = ctx.metadata["smart_context"]
    assert record["mode"] == "filtered", record
    sent = {m.get("id") for m in ctx.history}
    assert {"t1", "t2"} <= sent, "the turn joined the selected topic: it is sent"


async def test_a_click_that_cannot_be_made_ahead_is_left_to_the_next_request(
    start: Any, vault: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    running, chat = await a_turn_later(start, vault)
    services = running.plugin.services
    assert services is not None and services.click_ahead is not None

    async def unreadable(chat_id: Any, fresh: bool = True) -> Any:
        raise SmartContextError("the chat file could not be read")

    monkeypatch.setattr(services.chats, "view", unreadable)
    with caplog.at_level(logging.INFO, logger="smart_context"):
        await services.click_ahead(ChatId(CHAT), History(chat))  # no exception
    assert "was not made ahead: the chat file could not be read" in caplog.text
    monkeypatch.undo()
    ctx = await running.context(CHAT, list(chat))
    assert ctx.metadata["smart_context"]["mode"] == "filtered"


async def test_a_click_made_ahead_beside_requests_keeps_what_a_fresh_click_keeps(
    start: Any, vault: Path
) -> None:
    """The pass's click and two requests on one chat at once (one of them a turn further on,
    as a second writer's): both requests filter, and the clicks kept then choose what a plugin
    that never clicked before chooses, for either history."""
    running, chat = await a_turn_later(start, vault)
    services = running.plugin.services
    assert services is not None and services.click_ahead is not None
    further = [
        *chat,
        {"id": "t3", "role": "user", "content": f"And another about {SUBJECTS[1]}."},
        {"id": "t4", "role": "assistant", "content": f"Another answer about {SUBJECTS[1]}."},
    ]
    _, now, later = await asyncio.gather(
        services.click_ahead(ChatId(CHAT), History(chat)),
        running.context(CHAT, list(chat)),
        running.context(CHAT, list(further)),
    )
    assert now.metadata["smart_context"]["mode"] == "filtered"
    assert later.metadata["smart_context"]["mode"] == "filtered"
    fresh: Running = await start(settings={"budget_tokens": 2000, "token_model": "gpt-4o"})
    assert fresh.plugin.services is not None
    for history in (chat, further, chat):
        kept = await included(services, ChatId(CHAT), history)
        assert kept == await included(fresh.plugin.services, ChatId(CHAT), history)
