"""The OpenAI-compatible embedder, through the real ``openai`` client against a loopback server.

Also checks the loopback server itself (chat completions, streamed and not), since other test
modules build on it.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from smart_context.embeddings.openai_api import OpenAIEmbedder
from smart_context.errors import EmbeddingError
from smart_context.llm_errors import LOCAL_PLACEHOLDER_KEY, describe_openai_error, is_loopback_url
from smart_context.vectors.ops import normalize_rows
from tests.fakes import word_vector
from tests.openai_server import OpenAIStub

KEY_ENV = "SMART_CONTEXT_TEST_KEY"
TEXTS = [f"message {i} about python asyncio and topic{i % 3}" for i in range(10)]


@pytest.fixture
def stub(openai_server: OpenAIStub) -> OpenAIStub:
    """The loopback server (a short name for it, and one place for the import's noqa)."""
    return openai_server


MakeEmbedder = Callable[..., OpenAIEmbedder]


@pytest.fixture
async def connect(stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MakeEmbedder]:
    """``connect(url=stub, model=..., key=stub's, **options)``: an embedder closed after the test.

    ``key=""`` leaves the variable unset.
    """
    made: list[OpenAIEmbedder] = []

    def make(
        url: str | None = None,
        model: str = "stub-embedding",
        key: str | None = None,
        **options: Any,
    ) -> OpenAIEmbedder:
        key = stub.api_key if key is None else key
        if key:
            monkeypatch.setenv(KEY_ENV, key)
        else:
            monkeypatch.delenv(KEY_ENV, raising=False)
        url = url or stub.base_url
        made.append(OpenAIEmbedder.from_settings(url, model, api_key_env=KEY_ENV, **options))
        return made[-1]

    yield make
    for embedder in made:
        await embedder.aclose()


async def failure_of(embedder: OpenAIEmbedder, texts: list[str] = TEXTS[:2]) -> str:
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed(texts)
    return str(caught.value)


async def test_vectors_are_unit_rows_in_input_order_across_batches(
    stub: OpenAIStub, connect: MakeEmbedder
) -> None:
    embedder = connect(batch_size=4)

    vectors = await embedder.embed(TEXTS)

    expected = normalize_rows(np.stack([word_vector(t, 64) for t in TEXTS]))
    assert vectors.dtype == np.float32 and vectors.shape == (10, 64)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert stub.paths() == ["/v1/embeddings"] * math.ceil(10 / 4)
    sent = [body["input"] for _, body in stub.requests]
    assert sent == [TEXTS[0:4], TEXTS[4:8], TEXTS[8:10]]
    assert all(body["model"] == "stub-embedding" for _, body in stub.requests)
    assert embedder.model_id == "openai:stub-embedding" and embedder.dim == 64
    await embedder.aclose()


async def test_empty_input_makes_no_request_and_knows_the_dim_once_learnt(
    stub: OpenAIStub, connect: MakeEmbedder
) -> None:
    embedder = connect()

    assert (await embedder.embed([])).shape == (0, 0)
    await embedder.embed(["python"])
    assert (await embedder.embed([])).shape == (0, 64)
    assert len(stub.requests) == 1


async def test_a_blank_text_still_gets_its_row(stub: OpenAIStub, connect: MakeEmbedder) -> None:
    # The server, like OpenAI, rejects "" outright; one blank message must not sink the batch.
    embedder = connect()

    vectors = await embedder.embed(["python asyncio", "", "asyncio python"])

    assert vectors.shape == (3, 64)
    assert float(vectors[0] @ vectors[2]) == pytest.approx(1.0)
    assert "" not in stub.requests[0][1]["input"]


async def test_wrong_key_names_the_environment_variable(
    stub: OpenAIStub, connect: MakeEmbedder
) -> None:
    embedder = connect(key="sk-wrong")

    message = await failure_of(embedder)

    assert "rejected the API key" in message and KEY_ENV in message
    assert stub.base_url in message


async def test_unknown_model_is_named(stub: OpenAIStub, connect: MakeEmbedder) -> None:
    embedder = connect(model="missing-model")

    message = await failure_of(embedder)

    assert "Model 'missing-model' is not available at " + stub.base_url in message


async def test_server_error_after_the_retry_is_reported(
    stub: OpenAIStub, connect: MakeEmbedder
) -> None:
    embedder = connect()
    stub.fail_next.extend([500, 500])  # the first try and its one retry

    message = await failure_of(embedder)

    assert "server error (HTTP 500)" in message and stub.base_url in message
    assert len(stub.requests) == 2


async def test_one_server_error_is_retried(stub: OpenAIStub, connect: MakeEmbedder) -> None:
    embedder = connect()
    stub.fail_next.append(503)

    assert (await embedder.embed(["python"])).shape == (1, 64)


async def test_rate_limit_says_to_wait(stub: OpenAIStub, connect: MakeEmbedder) -> None:
    embedder = connect()
    stub.fail_next.extend([429, 429])

    assert "rate-limiting" in await failure_of(embedder)


async def test_unreachable_endpoint_fails_fast_and_says_so(connect: MakeEmbedder) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    embedder = connect(url=url, key="")

    started = time.monotonic()
    message = await failure_of(embedder)

    assert time.monotonic() - started < 5
    assert message.startswith(f"Cannot reach the embedding endpoint at {url} (")
    assert "Is the server running? Check openai_base_url." in message


async def test_slow_endpoint_times_out_with_a_clear_message(
    stub: OpenAIStub, connect: MakeEmbedder
) -> None:
    embedder = connect(timeout=0.2)
    stub.delay = 1.0

    assert "did not answer in time" in await failure_of(embedder)


def test_missing_key_for_a_remote_endpoint_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)

    with pytest.raises(EmbeddingError, match=f"set the environment variable {KEY_ENV}"):
        OpenAIEmbedder.from_settings("https://api.example.com/v1", "m", api_key_env=KEY_ENV)


def test_a_local_server_needs_no_key(connect: MakeEmbedder) -> None:
    embedder = connect(url="http://localhost:11434/v1", key="")

    assert embedder.client.api_key == LOCAL_PLACEHOLDER_KEY


def test_a_base_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(EmbeddingError, match="openai_base_url"):
        OpenAIEmbedder.from_settings("localhost:11434", "m")


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8000/v1", True),
        ("http://[::1]:1234/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://192.168.1.5:11434/v1", False),
    ],
)
def test_loopback_detection(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback


# --- replies the stub never gives: a canned server ---------------------------------------------


@contextmanager
def canned_embeddings(data: list[dict[str, Any]] | str) -> Iterator[str]:
    """A server answering every request with ``{"data": data}`` (or a web page when ``data`` is
    a ``str``); yields its base URL."""
    if isinstance(data, str):
        body, content_type = data.encode(), "text/html"
    else:
        body = json.dumps({"object": "list", "data": data, "model": "m"}).encode()
        content_type = "application/json"

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/v1"
        finally:
            server.shutdown()


def row(index: int, dim: int = 3) -> dict[str, Any]:
    return {"object": "embedding", "index": index, "embedding": [1.0] * dim}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([row(0)], "1 vectors for 2 texts"),
        ([row(0), row(1, dim=4)], "vectors of different sizes"),
        ([row(0), row(0)], "vectors numbered [0, 0]"),
        ([row(0, dim=0), row(1, dim=0)], "empty or nested vectors"),
        ([row(0), {"index": 1, "embedding": "oops"}], "unreadable vectors"),
        ("<html>Open WebUI</html>", "did not answer like an OpenAI API"),
    ],
)
async def test_a_malformed_reply_is_an_embedding_error(
    data: list[dict[str, Any]] | str, problem: str, connect: MakeEmbedder
) -> None:
    with canned_embeddings(data) as url:
        embedder = connect(url=url, model="m")
        message = await failure_of(embedder, ["a", "b"])

    assert problem in message and url in message


async def test_reply_rows_are_put_back_in_input_order(connect: MakeEmbedder) -> None:
    reply = [
        {"object": "embedding", "index": 1, "embedding": [0.0, 2.0]},
        {"object": "embedding", "index": 0, "embedding": [3.0, 0.0]},
    ]
    with canned_embeddings(reply) as url:
        vectors = await connect(url=url, model="m").embed(["a", "b"])

    np.testing.assert_allclose(vectors, [[1.0, 0.0], [0.0, 1.0]])


# --- the stub itself, as the chat service's tests will use it ------------------------------------


def client_for(stub: OpenAIStub, key: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=stub.base_url, api_key=key or stub.api_key, max_retries=0)


@pytest.fixture
async def client(stub: OpenAIStub) -> AsyncIterator[openai.AsyncOpenAI]:
    async with client_for(stub) as opened:
        yield opened


async def test_stub_chat_completion_replies_from_the_queue_then_echoes(
    stub: OpenAIStub, client: openai.AsyncOpenAI
) -> None:
    stub.chat_replies.append("queued reply")
    messages: Any = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]

    first = await client.chat.completions.create(model="stub-chat", messages=messages)
    second = await client.chat.completions.create(model="stub-chat", messages=messages)

    assert first.choices[0].message.content == "queued reply"
    assert second.choices[0].message.content == "echo: hi"
    assert second.choices[0].finish_reason == "stop" and second.usage is not None
    assert stub.requests[0] == (
        "/v1/chat/completions",
        {"model": "stub-chat", "messages": messages},
    )


async def test_stub_streams_chat_completion_chunks(
    stub: OpenAIStub, client: openai.AsyncOpenAI
) -> None:
    messages: Any = [{"role": "user", "content": "tell me about streaming replies"}]

    stream = await client.chat.completions.create(model="stub-chat", messages=messages, stream=True)
    pieces = [chunk.choices[0].delta.content async for chunk in stream if chunk.choices]

    text = "".join(p for p in pieces if p)
    assert text == "echo: tell me about streaming replies"
    assert len([p for p in pieces if p]) >= 3
    assert stub.requests[0][1]["stream"] is True


async def test_stub_stream_is_server_sent_events_ending_with_done(stub: OpenAIStub) -> None:
    body = {"model": "stub-chat", "messages": [{"role": "user", "content": "a b"}], "stream": True}
    headers = {"Authorization": f"Bearer {stub.api_key}"}
    async with httpx.AsyncClient() as http:
        url = stub.base_url + "/chat/completions"
        async with http.stream("POST", url, json=body, headers=headers) as response:
            lines = [line async for line in response.aiter_lines() if line]

    assert response.headers["content-type"].startswith("text/event-stream")
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


async def test_stub_errors_look_like_openai_errors(
    stub: OpenAIStub, client: openai.AsyncOpenAI
) -> None:
    messages: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError) as bad_key:
        async with client_for(stub, key="sk-wrong") as wrong_key:
            await wrong_key.chat.completions.create(model="stub-chat", messages=messages)
    with pytest.raises(openai.NotFoundError) as no_model:
        await client.chat.completions.create(model="missing-model", messages=messages)
    stub.fail_next.append(502)
    with pytest.raises(openai.InternalServerError):
        await client.models.list()

    message = describe_openai_error(bad_key.value, stub.base_url, "chat", api_key_env="LLM_KEY")
    assert message.startswith("The chat endpoint at http://127.0.0.1:")
    assert "set the environment variable LLM_KEY" in message
    message = describe_openai_error(
        no_model.value, stub.base_url, "chat", model="missing-model", url_setting="[llm] base_url"
    )
    assert "`ollama pull missing-model`" in message and "[llm] base_url ends in /v1" in message


async def test_stub_models_and_default_base64_embeddings(
    stub: OpenAIStub, client: openai.AsyncOpenAI
) -> None:
    models = await client.models.list()
    reply = await client.embeddings.create(model="stub-embedding", input="python asyncio")

    assert "stub-embedding" in [m.id for m in models.data]
    assert stub.requests[-1][1]["encoding_format"] == "base64"
    np.testing.assert_allclose(reply.data[0].embedding, word_vector("python asyncio", 64))
