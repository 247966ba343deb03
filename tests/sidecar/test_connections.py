"""Slow and excess clients against the sidecar under uvicorn on loopback, with short deadlines.

The clients are raw sockets: they send exactly the bytes a slow or hostile client would, and
see exactly when the server answers or hangs up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.sidecar.conftest import live_server, manager_with, read_events

HEADER_TIMEOUT = 0.5
BODY_TIMEOUT = 0.5
SLACK = 1.5  # scheduling delay a busy test machine may add to a deadline
REQUEST_LINE = b"GET /api/chats HTTP/1.1\r\nHost: 127.0.0.1\r\n"
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@asynccontextmanager
async def serving(
    vault: Path, *, keepalive_seconds: float = 15.0, **options: Any
) -> AsyncIterator[tuple[str, Sidecar]]:
    """The sidecar with short deadlines; ``options`` go to ``server_config``. Yields its URL and
    itself."""
    sidecar = Sidecar(vault, plugin_manager=manager_with())
    app = create_app(sidecar, keepalive_seconds=keepalive_seconds)
    app.state.body_timeout_seconds = BODY_TIMEOUT
    options.setdefault("header_timeout", HEADER_TIMEOUT)
    async with live_server(app, **options) as url:
        yield url, sidecar


@asynccontextmanager
async def raw_connection(url: str) -> AsyncIterator[Connection]:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError):  # the server hung up first: what these tests want
            await writer.wait_closed()


async def seconds_until_hang_up(reader: asyncio.StreamReader) -> float:
    """How long until the server closes the connection (what it sends meanwhile is read)."""
    start = time.monotonic()
    async with asyncio.timeout(HEADER_TIMEOUT + SLACK):
        while await reader.read(4096):
            pass
    return time.monotonic() - start


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of one response with a Content-Length."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status = int(head.split()[1])
    length = next(
        int(line.split(":")[1])
        for line in head.split("\r\n")
        if line.lower().startswith("content-length:")
    )
    return status, json.loads(await reader.readexactly(length))


async def trickle(writer: asyncio.StreamWriter, data: bytes, pause: float) -> None:
    """Send ``data`` a byte at a time, until it is all sent or the server hangs up."""
    with contextlib.suppress(OSError):  # the server hanging up is the outcome under test
        for byte in data:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(pause)


@pytest.mark.parametrize("sent", [b"", REQUEST_LINE], ids=["nothing", "half the headers"])
async def test_a_client_that_never_finishes_its_headers_is_cut_off(
    vault: Path, sent: bytes
) -> None:
    async with serving(vault) as (url, _), raw_connection(url) as (reader, writer):
        writer.write(sent)
        elapsed = await seconds_until_hang_up(reader)
    assert elapsed >= HEADER_TIMEOUT * 0.9


def test_the_deadline_holds_on_uvloop_too(vault: Path) -> None:
    """The server commands run on uvloop's event loop where it is installed
    (``sidecar/serve.py``'s ``run_server``): a client that never finishes its headers is cut
    off there too, and a whole request is answered."""
    uvloop = pytest.importorskip("uvloop")

    async def scene() -> tuple[float, int]:
        async with serving(vault) as (url, _):
            async with raw_connection(url) as (reader, writer):
                writer.write(REQUEST_LINE)
                elapsed = await seconds_until_hang_up(reader)
            async with raw_connection(url) as (reader, writer):
                writer.write(REQUEST_LINE + b"\r\n")
                status, _ = await read_response(reader)
        assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        return elapsed, status

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        elapsed, status = runner.run(scene())
    assert elapsed >= HEADER_TIMEOUT * 0.9 and status == 200


async def test_headers_trickled_byte_by_byte_do_not_move_the_deadline(vault: Path) -> None:
    async with serving(vault) as (url, _), raw_connection(url) as (reader, writer):
        sender = asyncio.create_task(trickle(writer, REQUEST_LINE * 20, pause=0.05))
        elapsed = await seconds_until_hang_up(reader)
        sender.cancel()
    assert elapsed >= HEADER_TIMEOUT * 0.9


async def test_the_next_request_on_a_kept_alive_connection_has_the_same_deadline(
    vault: Path,
) -> None:
    # uvicorn's own keep-alive timer stops at the first byte of the next request.
    async with (
        serving(vault, timeout_keep_alive=60) as (url, _),
        raw_connection(url) as (
            reader,
            writer,
        ),
    ):
        writer.write(REQUEST_LINE + b"\r\n")
        status, body = await read_response(reader)
        assert (status, body) == (200, {"chats": [], "damaged": []})
        sender = asyncio.create_task(trickle(writer, REQUEST_LINE * 20, pause=0.05))
        elapsed = await seconds_until_hang_up(reader)
        sender.cancel()
    assert elapsed >= HEADER_TIMEOUT * 0.9


@pytest.mark.parametrize("pause", [None, 0.05], ids=["stalled", "trickled"])
async def test_a_body_that_does_not_arrive_in_time_gets_408(
    vault: Path, pause: float | None
) -> None:
    body = json.dumps({"title": "slow " * 20}).encode()
    head = (
        b"POST /api/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    async with serving(vault) as (url, sidecar), raw_connection(url) as (reader, writer):
        writer.write(head + body[:5])
        sender = asyncio.create_task(trickle(writer, body[5:] if pause else b"", pause or 0))
        start = time.monotonic()
        async with asyncio.timeout(BODY_TIMEOUT + SLACK):
            status, answer = await read_response(reader)
        answered = time.monotonic() - start
        # The body never completes, so no next request can follow: the connection goes too.
        await seconds_until_hang_up(reader)
        sender.cancel()
        assert await sidecar.host.memory.list_chats() == []
    assert status == 408 and answer["status"] == "error"
    assert "did not arrive within 0.5 s" in answer["error"]
    assert answered >= BODY_TIMEOUT * 0.9


async def test_stuck_clients_do_not_hold_up_the_others(vault: Path) -> None:
    async with (
        serving(vault) as (url, _),
        raw_connection(url) as (_, half_headers),
        raw_connection(url) as (_, stalled_body),
        httpx.AsyncClient(base_url=url) as client,
    ):
        half_headers.write(REQUEST_LINE)
        stalled_body.write(
            b"POST /api/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n{"
        )
        await asyncio.sleep(0.1)  # both are now stuck inside the server
        start = time.monotonic()
        created = await client.post("/api/chats", json={"title": "meanwhile"})
        listed = await client.get("/api/chats")
        assert time.monotonic() - start < HEADER_TIMEOUT  # answered while the others hang
        await asyncio.sleep(HEADER_TIMEOUT + BODY_TIMEOUT)  # both stuck clients are gone by now
        after = await client.get("/api/chats")
    assert created.status_code == 201
    assert [chat["title"] for chat in listed.json()["chats"]] == ["meanwhile"]
    assert after.status_code == 200 and after.json() == listed.json()


async def test_an_event_stream_outlives_every_deadline(vault: Path) -> None:
    # Quiet between comments for longer than every deadline (headers 0.5 s, body 0.5 s, uvicorn's
    # keep-alive 1 s), as in production: a comment every 15 s against a 10 s header deadline.
    quiet = 1.2
    async with (
        serving(vault, keepalive_seconds=quiet, timeout_keep_alive=1) as (url, sidecar),
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/api/events") as response,
    ):
        events = read_events(response)
        assert await anext(events) == (":", "connected")
        start = time.monotonic()
        seen = [await anext(events), await anext(events)]
        held = time.monotonic() - start
        sidecar.host.emit("test.still_here", {"after": round(held, 1)})
        last = await anext(events)
    assert seen == [(":", "keep-alive"), (":", "keep-alive")]
    assert held >= 2.0
    assert last[0] == "test.still_here"


async def test_connections_beyond_the_limit_get_503(vault: Path) -> None:
    async with (
        serving(vault, max_connections=3) as (url, _),
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/api/events"),
    ):
        async with httpx.AsyncClient(base_url=url) as other, other.stream("GET", "/api/events"):
            refused = await client.get("/api/chats")  # a third connection
        for _ in range(40):  # the server sees the second stream end a moment later
            served = await client.get("/api/chats")
            if served.status_code != 503:
                break
            await asyncio.sleep(0.05)
    assert refused.status_code == 503
    assert served.status_code == 200


async def test_a_client_that_hangs_up_mid_body_is_one_quiet_line(
    vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    head = (
        b"POST /api/chats HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 400\r\n\r\n"
    )
    with (
        caplog.at_level(logging.INFO, logger="smart_context"),
        caplog.at_level(logging.INFO, logger="smart_context_hosts"),
    ):
        async with serving(vault) as (url, _):
            async with raw_connection(url) as (_reader, writer):
                writer.write(head + b'{"title": "half a bo')
                await writer.drain()
                await asyncio.sleep(0.1)  # the body is being read when the client goes
            async with asyncio.timeout(5):
                while not any("hung up" in r.getMessage() for r in caplog.records):
                    await asyncio.sleep(0.02)
    ours = [r for r in caplog.records if r.name.startswith("smart_context")]
    assert [r.levelno for r in ours if "hung up" in r.getMessage()] == [logging.INFO]
    assert not [r for r in ours if r.levelno >= logging.ERROR or r.exc_info]
