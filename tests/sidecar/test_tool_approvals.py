"""Tool calls waiting for the user: answered once, only by their chat, declined in time."""

from __future__ import annotations

import asyncio

from smart_context_hosts.sidecar.tool_approvals import ToolApprovals


async def test_an_answer_reaches_the_waiting_call_once_and_only_from_its_chat() -> None:
    approvals = ToolApprovals()
    with approvals.pending("chat-a", "call1") as question:
        waiting = asyncio.create_task(approvals.wait(question))
        assert approvals.is_pending("chat-a", "call1")
        assert not approvals.answer("chat-b", "call1", True)  # another chat's answer
        assert not approvals.answer("chat-a", "other", True)
        assert approvals.answer("chat-a", "call1", True)
        assert not approvals.answer("chat-a", "call1", False)  # already answered
        assert await waiting is True
    assert not approvals.is_pending("chat-a", "call1")


async def test_a_call_nobody_answers_times_out_and_cannot_be_answered_late() -> None:
    approvals = ToolApprovals(timeout_seconds=0.05)
    with approvals.pending("c", "late") as question:
        assert await approvals.wait(question) is None
        assert not approvals.answer("c", "late", True)
    assert not approvals.answer("c", "late", True)


async def test_stopping_declines_waiting_calls_and_any_asked_afterwards() -> None:
    approvals = ToolApprovals()
    with approvals.pending("c", "one") as question:
        waiting = asyncio.create_task(approvals.wait(question))
        await asyncio.sleep(0)
        approvals.decline_all()
        assert await waiting is False
    with approvals.pending("c", "two") as question:
        assert await approvals.wait(question) is False
