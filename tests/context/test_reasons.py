"""The record's ``reasons``: why each message a budget kept is sent, through the real plugin on
real files, and the pure function on plan codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from smart_context.budget.plan import IMPORTANT, LEFT_OUT, PINNED, RECENT, RELEVANT, TURN
from smart_context.budget.reasons import reasons
from smart_context.memory.db import MemoryDB
from tests.conftest import Ctx, call, write_chat
from tests.context.test_budgeted import long_chat

STICKY = {"label": "Instructions & Preferences", "sticky": True, "message_ids": ["m0003"]}


async def test_every_kept_message_says_why_it_is_sent(start: Any, vault: Path) -> None:
    chat = long_chat(400)
    write_chat(vault, "long", chat, topics=[STICKY])
    MemoryDB(vault).set_mark("long", "m0007", True)
    running = await start(
        settings={"budget_tokens": 2000, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    ctx = Ctx("long", chat, "When does the lease with Mrs. Okafor end?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    record = ctx.metadata["smart_context"]
    why = record["reasons"]
    assert why["m0007"] == {"why": "pinned"}
    assert why["m0003"] == {"why": "sticky"}
    assert why["m0123"]["why"] == "relevant" and 0 < why["m0123"]["score"] <= 1
    assert why["m0122"] == {"why": "turn", "of": "m0123"}
    sent = {m.get("id") for m in ctx.history if m.get("id")}
    recent = set(record["recent_ids"])
    assert sent == recent | set(why)  # every message sent is explained, and only those
    assert not recent & set(why)
    filled = [r for r in why.values() if r["why"] == "important"]
    assert all(isinstance(r["score"], float) for r in filled)


async def test_a_partner_across_a_run_is_named_with_the_message_it_came_with(
    start: Any, vault: Path
) -> None:
    chat = long_chat(400)
    chat[123]["role"] = chat[124]["role"] = "user"  # the answer is a question in a run
    write_chat(vault, "runs", chat)
    running = await start(
        settings={"budget_tokens": 2000, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    ctx = Ctx("runs", chat, "When does the lease with Mrs. Okafor end?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    why = ctx.metadata["smart_context"]["reasons"]
    assert why["m0123"]["why"] == "relevant"
    # its nearest answer, m0125, came with it (a pair by position would name m0124, not sent)
    assert why["m0125"] == {"why": "turn", "of": "m0123"}
    assert "m0124" not in why


async def test_a_chat_that_fits_names_no_reasons(start: Any, vault: Path) -> None:
    chat = long_chat(12)
    write_chat(vault, "short", chat)
    running = await start(settings={"budget_tokens": 8000})
    ctx = await running.context("short", chat)
    record = ctx.metadata["smart_context"]
    assert record["recent_ids"] == [] and "reasons" not in record


def test_reasons_name_each_plan_code_with_its_detail() -> None:
    why = np.array([LEFT_OUT, PINNED, PINNED, RELEVANT, TURN, IMPORTANT, RECENT], dtype=np.int8)
    ids = ["a", "b", "c", "d", "e", "f", "g"]
    marked = np.array([0, 1, 0, 0, 0, 0, 0], dtype=bool)
    relevance = np.array([0, 0, 0, 0.81234, 0, 0, 0], dtype=np.float32)
    importance = np.array([0.9, 0, 0, 0, 0, 0.4567, 0], dtype=np.float32)
    partner = np.array([-1, -1, -1, 4, 3, -1, -1], dtype=np.intp)
    assert reasons(why, ids, marked, relevance, importance, partner) == {
        "b": {"why": "pinned"},
        "c": {"why": "sticky"},
        "d": {"why": "relevant", "score": 0.812},
        "e": {"why": "turn", "of": "d"},
        "f": {"why": "important", "score": 0.457},
    }
