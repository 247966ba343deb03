"""The server's token counts, through the real ``openai`` client and the real plugin: asked for
with every stream, stored on the reply beside the plugin's own count, calibrating the estimate
of a model without an offline tokenizer; a server that ignores or refuses the option still
answers every message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smart_context.budget.calibration import calibration_file
from smart_context.budget.tokens import Estimate, prompt_tokens
from smart_context_hosts.sidecar.config import LLMConfig
from smart_context_hosts.sidecar.llm import LLMService, TurnUsage
from smart_context_hosts.sidecar.pipeline import PipelineEvent
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.fakes import ToolPlugin
from tests.openai_server import OpenAIStub, prompt_tokens_of, tool_calls
from tests.sidecar.conftest import chat_on_disk, llm_table, manager_with, write_settings

PLUGIN_TABLE = '[plugins.smart_context]\nembedder = "host"\ntopic_extractor = "offline"\n'
QUESTIONS = ("Plan a week in Kyoto in April", "What should I pack for rain?", "And for shoes?")


@pytest.fixture
def stub_vault(vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    table = llm_table(
        openai_server.base_url, "STUB_KEY", chat="stub-chat", embedding="stub-embedding"
    )
    write_settings(vault, PLUGIN_TABLE + table)
    return vault


async def converse(vault: Path, *questions: str) -> list[list[PipelineEvent]]:
    sidecar = Sidecar(vault)
    await sidecar.start()
    try:
        return [
            [event async for event in sidecar.send_message("trip", text).events()]
            for text in questions
        ]
    finally:
        await sidecar.stop()


def chat_bodies(stub: OpenAIStub) -> list[dict[str, Any]]:
    return [body for path, body in stub.requests if path.endswith("/chat/completions")]


def words(body: dict[str, Any]) -> int:
    """The stub's count of a request's prompt tokens."""
    return prompt_tokens_of(body["messages"], body.get("tools"))


async def test_the_reported_prompt_tokens_are_stored_beside_ours_and_calibrate(
    stub_vault: Path, openai_server: OpenAIStub
) -> None:
    runs = await converse(stub_vault, *QUESTIONS)
    assert all(run[-1].name == "done" for run in runs)
    bodies = chat_bodies(openai_server)
    assert all(b["stream_options"] == {"include_usage": True} for b in bodies)
    replies = [m for m in chat_on_disk(stub_vault, "trip")["messages"] if m["role"] == "assistant"]
    for reply, body in zip(replies, bodies, strict=True):
        assert reply["usage"]["prompt_tokens"] == words(body) and reply["usage"]["rounds"] == 1
        usage = reply["smart_context"]["usage"]
        assert usage["reported_prompt_tokens"] == words(body)
        assert usage["counted_with"] == "estimate"
        assert usage["chars_per_token"] > 4.0  # the stub counts words: ~5 characters each
    saved = json.loads(calibration_file(stub_vault).read_text())
    assert saved["models"]["stub-chat"]["samples"] == 3
    # a restarted sidecar counts with what it learnt
    figure = saved["models"]["stub-chat"]["chars_per_token"]
    await converse(stub_vault, "One more question about Kyoto temples")
    last = chat_on_disk(stub_vault, "trip")["messages"][-1]["smart_context"]["usage"]
    body = chat_bodies(openai_server)[-1]
    sent, tools = body["messages"], body.get("tools") or []
    uncalibrated = prompt_tokens(Estimate(), sent, tools)["total"]
    calibrated = prompt_tokens(Estimate(figure), sent, tools)["total"]
    assert last["sent_tokens"] == calibrated < uncalibrated


@pytest.mark.parametrize(
    ("said", "cached", "written"),
    [
        ({"prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0}}, 1024, None),
        ({"cache_read_input_tokens": 2048, "cache_creation_input_tokens": 64}, 2048, 64),
        ({"prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 9}, 640, None),
        ({"prompt_tokens_details": "garbage", "cache_read_input_tokens": -3}, None, None),
    ],
    ids=["openai", "anthropic", "deepseek", "garbage"],
)
async def test_the_servers_prompt_cache_counts_reach_the_reply_and_its_record(
    stub_vault: Path, openai_server: OpenAIStub, said: dict[str, Any], cached: Any, written: Any
) -> None:
    """Through the real ``openai`` client, which keeps the fields it does not know."""
    openai_server.usage_extra = said
    (run,) = await converse(stub_vault, QUESTIONS[0])
    assert run[-1].name == "done"
    reply = chat_on_disk(stub_vault, "trip")["messages"][-1]
    usage = reply["smart_context"]["usage"]
    assert reply["usage"].get("cached_tokens") == cached
    assert reply["usage"].get("cache_write_tokens") == written
    assert usage.get("reported_cached_tokens") == cached
    assert usage.get("reported_cache_write_tokens") == written
    assert usage["reported_prompt_tokens"] == reply["usage"]["prompt_tokens"]


@pytest.mark.parametrize("refuse", [True, False], ids=["refused", "ignored"])
async def test_a_server_without_the_usage_chunk_still_answers_every_message(
    stub_vault: Path, openai_server: OpenAIStub, refuse: bool
) -> None:
    openai_server.reject_stream_options = refuse
    openai_server.stream_usage = False
    runs = await converse(stub_vault, *QUESTIONS[:2])
    assert [run[-1].name for run in runs] == ["done", "done"]
    messages = chat_on_disk(stub_vault, "trip")["messages"]
    assert [m["content"] for m in messages[1::2]] == [f"echo: {q}" for q in QUESTIONS[:2]]
    for reply in messages[1::2]:
        assert "usage" not in reply and "error" not in reply
        assert "reported_prompt_tokens" not in reply["smart_context"]["usage"]
    asked = ["stream_options" in b for b in chat_bodies(openai_server)]
    # refused: asked once, asked again without it, and never again; ignored: always asked
    assert asked == ([True, False, False] if refuse else [True, True])
    assert not calibration_file(stub_vault).exists()


async def test_a_refusal_for_another_reason_is_still_an_error(
    openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    config = LLMConfig(
        base_url=openai_server.base_url,
        api_key_env="STUB_KEY",
        models={"chat": "stub-chat"},
        max_retries=0,
    )
    llm = LLMService(config)
    openai_server.fail_next += [400, 400]
    try:
        with pytest.raises(Exception, match="400"):
            [p async for p in llm.stream_turn([{"role": "user", "content": "hi"}])]
        pieces = [p async for p in llm.stream_turn([{"role": "user", "content": "hi there"}])]
    finally:
        await llm.aclose()
    assert pieces[-1] == TurnUsage(prompt_tokens=2 + 4 + 3, completion_tokens=3)
    assert chat_bodies(openai_server)[-1]["stream_options"] == {"include_usage": True}


async def test_tool_rounds_report_the_first_prompt_and_the_whole_cost(
    vault: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", openai_server.api_key)
    servers = '[mcp.servers.files]\ncommand = "files-server"\nauto_approve = true\n'
    write_settings(vault, llm_table(openai_server.base_url, "STUB_KEY", chat="stub-chat") + servers)
    openai_server.chat_replies += [tool_calls(("files__read", {"path": "a.md"})), "Done."]
    sidecar = Sidecar(vault, plugin_manager=manager_with(ToolPlugin(tools=("files__read",))))
    await sidecar.start()
    try:
        events = [e async for e in sidecar.send_message("trip", "read a.md").events()]
    finally:
        await sidecar.stop()
    assert events[-1].name == "done", events[-1].data
    first, second = chat_bodies(openai_server)
    usage = chat_on_disk(vault, "trip")["messages"][-1]["usage"]
    assert usage["rounds"] == 2 and usage["prompt_tokens"] == words(first)
    assert usage["total_tokens"] == words(first) + words(second) + usage["completion_tokens"]


async def test_a_server_that_reports_cache_hits_gets_the_cache_stable_layout(
    stub_vault: Path, openai_server: OpenAIStub
) -> None:
    """``stub-chat`` is no family the cache table knows: its first request is chosen per turn;
    the reply says it read from a cache, so the next is laid out for one."""
    openai_server.usage_extra = {"prompt_tokens_details": {"cached_tokens": 1024}}
    runs = await converse(stub_vault, *QUESTIONS[:2])
    assert [run[-1].name for run in runs] == ["done", "done"]
    first, second = chat_on_disk(stub_vault, "trip")["messages"][1::2]
    assert "layout" not in first["smart_context"]
    assert second["smart_context"]["layout"]["kind"] == "stable"
    assert second["smart_context"]["cache"]["read"] == 0.5
