"""One message through the phases, with real plugins registered on a real plugin manager."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smart_context import allocator
from smart_context.hookspecs import hookimpl
from smart_context_hosts.sidecar.pipeline import (
    TITLE_LENGTH,
    PipelineContext,
    PipelineEvent,
    prompt_messages,
    title_from,
)
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import Recorder, chat_on_disk, llm_table, manager_with, write_settings


async def send(sidecar: Sidecar, chat_id: str, content: str) -> list[PipelineEvent]:
    return [event async for event in sidecar.send_message(chat_id, content).events()]


def with_model(vault: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_KEY", stub.api_key)
    write_settings(vault, llm_table(stub.base_url, "STUB_KEY", chat="stub-chat"))


async def started(vault: Path, *plugins: object) -> Sidecar:
    sidecar = Sidecar(vault, plugin_manager=manager_with(*plugins))
    await sidecar.start()
    return sidecar


async def test_no_model_runs_every_phase_and_says_so(vault: Path) -> None:
    recorder = Recorder()
    sidecar = await started(vault, recorder)
    events = await send(sidecar, "c1", "What is in my context?")
    await sidecar.stop()

    assert [e.name for e in events] == ["done"]
    assert recorder.calls == [
        "sidecar_startup",
        "sidecar_register_commands",
        "pipeline_input",
        "pipeline_context",
        "pipeline_prompt",
        "pipeline_llm",
        "pipeline_output",
        "sidecar_shutdown",
    ]
    user, assistant = chat_on_disk(vault, "c1")["messages"]
    assert user["content"] == "What is in my context?" and user["role"] == "user"
    assert assistant["notice"] == "no_model" and assistant["role"] == "assistant"
    assert "No chat model is configured" in assistant["content"] and "[llm]" in assistant["content"]
    assert assistant["smart_context"] == {"mode": "full", "included_ids": []}
    assert events[0].data == {"user_message": user, "assistant_message": assistant}


async def test_reply_streams_and_history_is_the_chat_before(
    vault: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_model(vault, openai_server, monkeypatch)
    openai_server.chat_replies += ["First reply here.", "Second reply, in several pieces."]
    recorder = Recorder()
    sidecar = await started(vault, recorder)
    await send(sidecar, "c1", "first")
    events = await send(sidecar, "c1", "second")
    await sidecar.stop()

    tokens = [e.data["text"] for e in events if e.name == "token"]
    assert len(tokens) > 2 and "".join(tokens) == "Second reply, in several pieces."
    assert events[-1].name == "done"
    messages = chat_on_disk(vault, "c1")["messages"]
    assert [m["content"] for m in messages] == [
        "first",
        "First reply here.",
        "second",
        "Second reply, in several pieces.",
    ]
    assert messages[-1]["model"] == "stub-chat"
    assert messages[-1]["smart_context"]["included_ids"] == [m["id"] for m in messages[:2]]
    assert [m["id"] for m in recorder.seen_history[1]] == [m["id"] for m in messages[:2]]
    assert recorder.responses == ["First reply here.", "Second reply, in several pieces."]
    last_prompt = openai_server.requests[-1][1]["messages"]
    assert last_prompt == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "First reply here."},
        {"role": "user", "content": "second"},
    ]


class Breaks:
    """Fails in two phases, once as a plain function and once as a coroutine."""

    @hookimpl(tryfirst=True)
    def pipeline_input(self, ctx: Any) -> None:
        raise RuntimeError("input broke")

    @hookimpl
    async def pipeline_context(self, ctx: Any) -> None:
        ctx.history = []
        raise RuntimeError("context broke")


async def test_a_raising_plugin_loses_no_message(
    vault: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with_model(vault, openai_server, monkeypatch)
    recorder = Recorder()
    sidecar = await started(vault, recorder, Breaks())
    with caplog.at_level(logging.ERROR):
        events = await send(sidecar, "c1", "still here?")
    await sidecar.stop()
    assert events[-1].name == "done"
    assert [m["content"] for m in chat_on_disk(vault, "c1")["messages"]] == [
        "still here?",
        "echo: still here?",
    ]
    assert "input broke" in caplog.text and "context broke" in caplog.text
    assert "pipeline_output" in recorder.calls


class SeesUrgent:
    """Notes, in two phases, how many parts of requests a person waits on are under way."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    @hookimpl
    def pipeline_context(self, ctx: Any) -> None:
        self.seen["context"] = allocator._urgent

    @hookimpl
    def pipeline_output(self, ctx: Any) -> None:
        self.seen["output"] = allocator._urgent


async def test_a_message_is_urgent_until_the_model_is_asked(
    vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cycle collector's passes wait while the phases before the model run
    (``allocator.urgent``), not while the reply streams."""
    with_model(vault, openai_server, monkeypatch)
    sees = SeesUrgent()
    sidecar = await started(vault, sees, Breaks())
    events = await send(sidecar, "c1", "still here?")
    await sidecar.stop()
    assert events[-1].name == "done" and sees.seen == {"context": 1, "output": 0}
    assert allocator._urgent == 0  # a phase that raised ended it too


class Answers:
    @hookimpl
    def pipeline_llm(self, ctx: PipelineContext) -> None:
        ctx.response = f"canned answer to {ctx.message}"

    @hookimpl
    def pipeline_post_process(self, ctx: PipelineContext) -> None:
        ctx.response = (ctx.response or "").upper()


async def test_a_plugin_can_answer_and_rewrite(vault: Path) -> None:
    sidecar = await started(vault, Answers())
    events = await send(sidecar, "c1", "hi")
    await sidecar.stop()
    assert [e.name for e in events] == ["token", "done"]
    assistant = events[-1].data["assistant_message"]
    assert assistant["content"] == "CANNED ANSWER TO HI" and "notice" not in assistant


class Aborts:
    @hookimpl
    def pipeline_input(self, ctx: PipelineContext) -> None:
        ctx.abort("blocked word")


async def test_abort_stops_before_the_model(vault: Path) -> None:
    recorder = Recorder()
    sidecar = await started(vault, recorder, Aborts())
    events = await send(sidecar, "c1", "bad")
    await sidecar.stop()
    assistant = events[-1].data["assistant_message"]
    assert assistant["notice"] == "aborted" and assistant["abort_reason"] == "blocked word"
    assert "pipeline_context" not in recorder.calls
    assert len(chat_on_disk(vault, "c1")["messages"]) == 2


async def test_endpoint_failure_stores_both_messages(
    vault: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_model(vault, openai_server, monkeypatch)
    openai_server.fail_next.append(503)
    recorder = Recorder()
    sidecar = await started(vault, recorder)
    events = await send(sidecar, "c1", "are you there?")
    await sidecar.stop()
    assert [e.name for e in events] == ["error"]
    assert "server error" in events[0].data["error"]
    user, assistant = chat_on_disk(vault, "c1")["messages"]
    assert user["content"] == "are you there?"
    assert assistant["role"] == "assistant" and assistant["error"] == events[0].data["error"]
    assert assistant["content"] == assistant["error"]
    assert "pipeline_output" not in recorder.calls


def test_prompt_leaves_out_notices_and_errors() -> None:
    ctx = PipelineContext(
        message="now",
        original_message="now",
        history=[
            {"id": "1", "role": "user", "content": "q", "extra": 1},
            {"id": "2", "role": "assistant", "content": "No model", "notice": "no_model"},
            {"id": "3", "role": "assistant", "content": "failed", "error": "failed"},
            {"id": "4", "role": "tool", "content": "x"},
        ],
    )
    assert prompt_messages(ctx) == [
        {"role": "user", "content": "q"},
        {"role": "user", "content": "now"},
    ]


class OddRecord:
    @hookimpl
    def pipeline_context(self, ctx: PipelineContext) -> None:
        ctx.metadata["smart_context"] = {"mode": "full", "score": np.float32(0.5), "ids": {"a"}}


async def test_a_record_json_cannot_store_is_kept_as_text(vault: Path) -> None:
    sidecar = await started(vault, OddRecord())
    events = await send(sidecar, "c1", "hi")
    await sidecar.stop()
    assert events[-1].name == "done"
    stored = chat_on_disk(vault, "c1")["messages"][-1]["smart_context"]
    assert stored == {"mode": "full", "score": "0.5", "ids": "{'a'}"}


def test_a_title_is_the_first_line_shortened_however_long_the_message() -> None:
    assert title_from("\n  Plan   four days\tin Kyoto\nand Nara") == "Plan four days in Kyoto"
    pasted = "Traceback  (most recent call last) " * 2_000_000  # one 70 MB line
    title = title_from(pasted)
    assert len(title) == TITLE_LENGTH and title.startswith("Traceback (most recent call last)")
    assert title.endswith("…")
