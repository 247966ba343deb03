"""The Host check that keeps DNS-rebinding pages away from the sidecar, on its own and in the app.

A page on ``attacker.example`` whose name the attacker points at 127.0.0.1 reaches the sidecar
with its own name in ``Host``; only the names and addresses of this machine may pass.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from smart_context.hookspecs import hookimpl
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.guard import is_loopback_host
from smart_context_hosts.sidecar.runtime import Sidecar
from tests.sidecar.conftest import ClientFactory, live_server, manager_with, running_app

REBOUND = "127.0.0.1.attacker.example"


class CountingPlugin:
    """Registers ``test.count``, which records each call: a refused request never runs it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @hookimpl
    def sidecar_register_commands(self, commands: Any) -> None:
        commands.register("test.count", self.count)

    def count(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {"status": "success", "calls": len(self.calls)}


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LocalHost:8765",
        "localhost.",
        "localhost.:8765",
        "127.0.0.1",
        "127.0.0.1:8765",
        "127.4.5.6:80",
        "[::1]",
        "[::1]:8765",
        "[0:0:0:0:0:0:0:1]:8765",
    ],
)
def test_this_machine_passes(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    [
        REBOUND,
        f"{REBOUND}:8765",
        "localhost.attacker.example",
        "attacker.localhost",
        "attacker.localhost:8765",
        "evil.example",
        "localhost@evil.example",
        "localhost..",
        "127.0.0.1.",
        "0x7f.1",
        "0x7f000001",
        "2130706433",
        "127.1",
        "0177.0.0.1",
        "127.000.0.1",
        "10.0.0.1",
        "0.0.0.0",
        "::1",
        "[::1",
        "[::1]x",
        "[127.0.0.1]",
        "[::ffff:127.0.0.1]",
        "[::1%25lo]",
        "[::]",
        "localhost:",
        "localhost:abc",
        "localhost:99999",
        "localhost:123456",
        "localhost:8765:1",
        "localhost:\u0661\u0662",  # Arabic-Indic digits are not a port
        "l\uff4fcalhost",  # a fullwidth letter
        " localhost",
        "localhost ",
        "",
    ],
)
def test_any_other_host_is_refused(host: str) -> None:
    assert not is_loopback_host(host)


async def test_the_dns_rebinding_bypass_is_refused(api: ClientFactory) -> None:
    plugin = CountingPlugin()
    client, _ = await api(plugin)
    rebound = {"Host": REBOUND}
    listed = await client.get("/api/chats", headers=rebound)
    assert listed.status_code == 403
    assert REBOUND in listed.json()["error"] and "not this machine" in listed.json()["error"]
    command = await client.post(
        "/api/commands/test.count",
        json={},
        headers={**rebound, "Origin": f"http://{REBOUND}"},
    )
    assert command.status_code == 403 and command.json()["status"] == "error"
    assert (await client.post("/api/chats", json={}, headers=rebound)).status_code == 403
    assert plugin.calls == []
    assert (await client.get("/api/chats")).json() == {"chats": [], "damaged": []}
    assert (await client.post("/api/commands/test.count", json={})).json()["calls"] == 1


async def test_a_malformed_origin_is_refused_not_a_500(api: ClientFactory) -> None:
    plugin = CountingPlugin()
    client, _ = await api(plugin)
    answer = await client.post(
        "/api/commands/test.count", json={}, headers={"Origin": "http://[::1"}
    )
    assert answer.status_code == 403 and "not a valid origin" in answer.json()["error"]


async def test_a_request_with_two_hosts_is_refused(api: ClientFactory) -> None:
    client, _ = await api()
    twice = [("Host", "127.0.0.1:8765"), ("Host", "evil.example")]
    refused = await client.get("/api/chats", headers=twice)
    assert refused.status_code == 403 and "2 Host headers" in refused.json()["error"]


async def test_a_request_without_a_host_is_refused(vault: Path) -> None:
    app = create_app(Sidecar(vault, plugin_manager=manager_with()))
    async with live_server(app) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /api/chats HTTP/1.0\r\n\r\n")  # HTTP/1.0 may leave Host out
        answer = await reader.read()
        writer.close()
        await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert b"no Host header" in answer


async def test_allow_remote_serves_any_host(vault: Path) -> None:
    app = create_app(Sidecar(vault, plugin_manager=manager_with()), allow_remote=True)
    async with running_app(app) as client:
        for host in (REBOUND, "sidecar.lan:8765", "192.168.1.10"):
            response = await client.get("/api/chats", headers={"Host": host})
            assert response.status_code == 200, host
        foreign = {"Host": "sidecar.lan", "Origin": "https://evil.example"}
        posted = await client.post("/api/chats", json={}, headers=foreign)
        assert posted.status_code == 403  # the Origin check still holds
