"""``host.llm`` through the real ``openai`` client against a loopback OpenAI-compatible server."""

from __future__ import annotations

import socket

import pytest

from smart_context.errors import EmbeddingError
from smart_context_hosts.sidecar.config import LLMConfig
from smart_context_hosts.sidecar.llm import LLMError, LLMService, NoModelConfigured, ToolCallDelta
from smart_context_hosts.sidecar.tools import CallAssembler
from tests.openai_server import OpenAIStub, tool_calls


def service(stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, **models: str) -> LLMService:
    monkeypatch.setenv("STUB_KEY", stub.api_key)
    return LLMService(
        LLMConfig(
            base_url=stub.base_url, api_key_env="STUB_KEY", models=models, max_retries=0, timeout=5
        )
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_complete_stream_and_embed(
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm = service(openai_server, monkeypatch, fast="stub-chat", embedding="stub-embedding")
    openai_server.chat_replies += ["Short answer.", "A reply that streams in pieces."]
    try:
        assert (
            await llm.complete([{"role": "user", "content": "hi"}], temperature=0)
            == "Short answer."
        )
        pieces = [p async for p in llm.stream([{"role": "user", "content": "go"}])]
        vectors = await llm.embed(["alpha beta", "gamma"])
    finally:
        await llm.aclose()
    assert len(pieces) > 3 and "".join(pieces) == "A reply that streams in pieces."
    assert len(vectors) == 2 and len(vectors[0]) == 64
    chat_bodies = [body for path, body in openai_server.requests if path.endswith("/completions")]
    assert chat_bodies[0]["model"] == "stub-chat" and chat_bodies[0]["temperature"] == 0
    assert chat_bodies[1]["model"] == "stub-chat"  # chat falls back to fast
    assert chat_bodies[1]["stream"] is True
    assert llm.model_name("chat") == "stub-chat" and llm.model_name("embedding") == "stub-embedding"


async def test_failures_are_sentences(
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm = service(openai_server, monkeypatch, chat="stub-chat", embedding="missing-model")
    openai_server.fail_next.append(500)
    try:
        with pytest.raises(LLMError, match="server error"):
            await llm.complete([{"role": "user", "content": "hi"}], category="chat")
        with pytest.raises(EmbeddingError, match="missing-model"):
            await llm.embed(["x"])
    finally:
        await llm.aclose()


async def test_unreachable_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = LLMService(
        LLMConfig(
            base_url=f"http://127.0.0.1:{free_port()}/v1", models={"chat": "m"}, max_retries=0
        )
    )
    with pytest.raises(LLMError, match="Cannot reach") as caught:
        [p async for p in llm.stream([{"role": "user", "content": "hi"}])]
    assert "[llm] base_url" in str(caught.value)
    await llm.aclose()


async def test_remote_endpoint_without_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOME_KEY", raising=False)
    llm = LLMService(
        LLMConfig(
            base_url="https://api.example.com/v1", api_key_env="SOME_KEY", models={"fast": "m"}
        )
    )
    with pytest.raises(LLMError, match="SOME_KEY"):
        await llm.complete([{"role": "user", "content": "hi"}])


async def test_no_model_configured_never_answers() -> None:
    llm = LLMService(LLMConfig())
    assert not llm.chat_configured and llm.model_name("chat") is None
    with pytest.raises(NoModelConfigured, match=r"\[llm\]"):
        await llm.complete([{"role": "user", "content": "hi"}])
    with pytest.raises(NoModelConfigured):
        [p async for p in llm.stream([{"role": "user", "content": "hi"}])]
    partly = LLMService(LLMConfig(base_url="http://127.0.0.1:1/v1", models={"embedding": "e"}))
    with pytest.raises(NoModelConfigured, match=r"\[llm.models\]"):
        await partly.complete([{"role": "user", "content": "hi"}])


async def test_offline_embedding_uses_the_local_model() -> None:
    pytest.importorskip("onnxruntime")
    llm = LLMService(LLMConfig())
    vectors = await llm.embed(["the cat sat on the mat", "a cat on a mat", "quarterly tax filing"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    same = sum(a * b for a, b in zip(vectors[0], vectors[1], strict=True))
    other = sum(a * b for a, b in zip(vectors[0], vectors[2], strict=True))
    assert same > other
    assert await llm.embed([]) == []


async def test_stream_turn_gives_text_and_the_pieces_of_tool_calls(
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm = service(openai_server, monkeypatch, chat="stub-chat")
    openai_server.chat_replies.append(
        tool_calls(("files__read", {"path": "a long/path.md"}), ("web__fetch", "{}"), text="Hm.")
    )
    tools = [{"type": "function", "function": {"name": "files__read", "parameters": {}}}]
    try:
        pieces = [
            p async for p in llm.stream_turn([{"role": "user", "content": "go"}], tools=tools)
        ]
    finally:
        await llm.aclose()
    text = "".join(p for p in pieces if isinstance(p, str))
    deltas = [p for p in pieces if isinstance(p, ToolCallDelta)]
    assert text == "Hm." and len(deltas) > 4  # the arguments arrive in slices
    assembler = CallAssembler()
    for delta in deltas:
        assembler.add(delta)
    calls = [(c.model_id, c.function, c.arguments) for c in assembler.calls()]
    assert calls == [
        ("call_1_0", "files__read", '{"path": "a long/path.md"}'),
        ("call_1_1", "web__fetch", "{}"),
    ]
    assert openai_server.requests[0][1]["tools"] == tools
