"""Several writers on one chat at once, with a budget: each request is decided on its own
history (one snapshot), within its budget, with no traceback, however the others grow the
chat's kept state while it waits."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Ctx, call, write_chat
from tests.context.test_budgeted import long_chat, sent_tokens

WRITERS = 6
LIMIT = 1500


async def test_concurrent_requests_on_one_chat_each_keep_their_own_history_and_budget(
    start: Any, vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chat = long_chat(520)
    write_chat(vault, "busy", chat[:200])
    running = await start(
        settings={"budget_tokens": LIMIT, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    await running.context("busy", chat[:200])  # warm: the facts, the index and the vectors
    # each writer sees the chat at its own length, as clients that each appended a message
    lengths = [200 + 17 * k + (k % 3) for k in range(WRITERS * 3)]
    contexts = [Ctx("busy", chat[:n], f"what about message {n - 150}?") for n in lengths]
    # what earlier tests left to collect is collected now, not while the log is read (an HTTP
    # client of another test's closed loop, finalized here, logged its failed close once)
    gc.collect()
    with caplog.at_level(logging.WARNING):
        await asyncio.gather(*(call(running.pm.hook.pipeline_context, ctx=c) for c in contexts))
    assert not [r for r in caplog.records if r.exc_info], "a request raised"
    assert not [r for r in caplog.records if "failed" in r.getMessage()]
    for ctx, n in zip(contexts, lengths, strict=True):
        sent = [m["id"] for m in ctx.history]
        budget = ctx.metadata["smart_context"]["budget"]
        assert budget["used"] <= LIMIT and sent_tokens(ctx) <= LIMIT
        assert set(sent) <= {m["id"] for m in chat[:n]}, "a message of another request's history"
        assert sent[-1] == chat[n - 1]["id"], "the request's own last message is sent"
        assert sent == sorted(sent), "the history keeps its order"
