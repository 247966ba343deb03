"""The proxy's own time per chat turn, against the length of the chat.

Run: python benchmarks/bench_proxy.py [--sizes 100,1000,10000] [--turns 20]

For each size, a stateless client holds a chat of that many messages and sends it whole with
each new user message, as clients of the OpenAI API do, through ``smart-context proxy`` (its
HTTP app in process, no sockets) to an upstream that reads the request as a server would (one
``json.loads``) and answers at once. The chat is in the vault and indexed before the turns are
timed (a first request stored it), and the plugin runs on random vectors (bench_context.py), so
no model time is in the figures. Between turns, the reply's storing and the plugin's background
pass are waited for, untimed: a person reads the reply before writing again.

Printed per size, medians over the turns: the turn through the proxy; the same request sent
straight to the upstream (the client writing it, the upstream reading it), in the same
process; the plugin's own time (its pipeline hooks); what the proxy adds beyond both (the
target: <= 5 ms): the turn through the proxy less the plugin and less the straight request,
so a proxy that sends the upstream a shorter request than the client's can add less than
nothing; and the proxy's own work, the turn through it less the plugin, the upstream's
reading and answering (timed inside it) and the client's writing and the hop (the straight
request less the upstream's time in it): reading the client's request, storing the new
messages, writing the rebuilt request and forwarding it.

Then the same turns streamed, over loopback sockets this time (the proxy and an upstream served
by uvicorn, as the command serves them): the time from sending the request to the stream's
first byte, through the proxy and straight to the upstream, and what the proxy adds beyond the
plugin. The target: the first byte no later than the upstream's plus the plugin's time, and the
proxy's own share within the 5 ms above.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import smart_context_hosts.proxy.relay as relay_module
from benchmarks.bench_context import RandomEmbedder, make_chat
from benchmarks.proxy_in_process import UPSTREAM, proxy_in_process
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.proxy.app import Proxy, ProxyOptions, create_app
from smart_context_hosts.sidecar.plugins import call_hook, get_plugin_manager
from smart_context_hosts.sidecar.runtime import Sidecar
from smart_context_hosts.sidecar.serve import serving

REPLY = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Noted."}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}


class Upstream:
    """A server that reads the request and answers at once; ``seconds``: its time so far."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        json.loads(request.content)
        response = httpx.Response(200, json=REPLY)
        self.seconds += time.perf_counter() - start
        return response


class Timed:
    """``call_hook`` of the relay, timed: the plugins' own share of a turn."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._call = call_hook

    async def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        start = time.perf_counter()
        try:
            return await self._call(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def vault_of(folder: Path) -> tuple[SmartContextPlugin, Sidecar]:
    """A vault's sidecar with the plugin on random vectors (no model time in the figures)."""
    (folder / ".memory").mkdir(parents=True)
    plugin = SmartContextPlugin(RandomEmbedder())
    manager = get_plugin_manager(None, load_entrypoints=False)
    manager.register(plugin, name="smart_context")
    return plugin, Sidecar(folder, plugin_manager=manager)


async def replied(history: list[dict[str, Any]], proxy: Proxy, plugin: SmartContextPlugin) -> None:
    """The reply in the client's history, and the proxy's storing and the plugin's background
    pass waited for, untimed: a person reads the reply before writing again."""
    history.append({"role": "assistant", "content": "Noted."})
    await proxy.settle()
    assert plugin.services is not None
    await plugin.services.settle(timeout=600)


async def bench_size(root: Path, size: int, turns: int, timed: Timed) -> None:
    plugin, sidecar = vault_of(root / f"v{size}")
    upstream = Upstream()
    history = [{"role": m["role"], "content": m["content"]} for m in make_chat(size)]
    headers = {"X-Smart-Context-Chat": f"bench{size}", "Authorization": "Bearer sk-bench"}
    through, straight, plugin_ms, added, own = [], [], [], [], []
    async with (
        proxy_in_process(sidecar, upstream) as (proxy, client),
        httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as direct,
    ):
        for turn in range(turns + 3):  # three to warm up: store, index, settle
            history.append({"role": "user", "content": f"question {turn}: what about the plan?"})
            body = {"model": "gpt-4o", "messages": history}
            timed.seconds = upstream.seconds = 0.0
            start = time.perf_counter()
            answer = await client.post("/v1/chat/completions", json=body, headers=headers)
            elapsed = time.perf_counter() - start
            upstream_through = upstream.seconds
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-smart-context"].startswith("sent"), answer.headers
            upstream.seconds = 0.0
            start = time.perf_counter()
            await direct.post(f"{UPSTREAM}/chat/completions", json=body, headers=headers)
            baseline = time.perf_counter() - start
            client_side = baseline - upstream.seconds  # the client writing, the hop
            await replied(history, proxy, plugin)
            if turn >= 3:
                through.append(elapsed * 1000)
                straight.append(baseline * 1000)
                plugin_ms.append(timed.seconds * 1000)
                added.append((elapsed - baseline - timed.seconds) * 1000)
                own.append((elapsed - timed.seconds - upstream_through - client_side) * 1000)
    med = statistics.median
    p90 = sorted(added)[int(0.9 * (len(added) - 1))]
    print(
        f"  {size:>6} messages: through the proxy {med(through):7.2f} ms, straight to the "
        f"upstream {med(straight):6.2f} ms, the plugin {med(plugin_ms):6.2f} ms; "
        f"added by the proxy {med(added):6.2f} ms (p90 {p90:.2f}); "
        f"its own work {med(own):5.2f} ms"
    )


def streaming_upstream() -> Starlette:
    """A server that reads the request, sends the first piece of its stream at once, and the
    rest after it."""

    async def completions(request: Request) -> StreamingResponse:
        json.loads(await request.body())

        async def pieces() -> AsyncIterator[bytes]:
            for text in ("Noted", ".", ""):
                chunk: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk"}
                delta = {"content": text} if text else {}
                chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(pieces(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


async def first_byte(client: httpx.AsyncClient, url: str, body: Any, headers: Any) -> float:
    """Seconds from sending ``body`` to the stream's first byte; the rest is read after."""
    start = time.perf_counter()
    elapsed = None
    async with client.stream("POST", url, json=body, headers=headers) as response:
        async for _ in response.aiter_raw():
            if elapsed is None:
                elapsed = time.perf_counter() - start
    assert response.status_code == 200 and elapsed is not None
    return elapsed


async def bench_first_byte(root: Path, size: int, turns: int, timed: Timed) -> None:
    """The same turns streamed, through a proxy and an upstream served on loopback: the time
    to the first byte through the proxy, beside straight to the upstream."""
    plugin, sidecar = vault_of(root / f"s{size}")
    history = [{"role": m["role"], "content": m["content"]} for m in make_chat(size)]
    headers = {"X-Smart-Context-Chat": f"stream{size}", "Authorization": "Bearer sk-bench"}
    through, straight, plugin_ms, added, hop = [], [], [], [], []
    passing = {"Authorization": "Bearer sk-bench"}  # no chat named: passed through untouched
    async with serving(streaming_upstream(), log_level="warning") as upstream_url:
        app = create_app(sidecar, ProxyOptions(f"{upstream_url}/v1"))
        proxy: Proxy = app.state.proxy
        async with (
            serving(app, log_level="warning") as proxy_url,
            httpx.AsyncClient(timeout=60) as client,
        ):
            for turn in range(turns + 3):
                history.append({"role": "user", "content": f"question {turn}: and the plan?"})
                body = {"model": "gpt-4o", "messages": history, "stream": True}
                timed.seconds = 0.0
                via = await first_byte(client, f"{proxy_url}/v1/chat/completions", body, headers)
                plugin_seconds = timed.seconds
                direct = await first_byte(
                    client, f"{upstream_url}/v1/chat/completions", body, headers
                )
                passed = await first_byte(client, f"{proxy_url}/v1/chat/completions", body, passing)
                await replied(history, proxy, plugin)
                if turn >= 3:
                    through.append(via * 1000)
                    straight.append(direct * 1000)
                    plugin_ms.append(plugin_seconds * 1000)
                    added.append((via - direct - plugin_seconds) * 1000)
                    hop.append((passed - direct) * 1000)
    med = statistics.median
    print(
        f"  {size:>6} messages, streamed over loopback: first byte through the proxy "
        f"{med(through):7.2f} ms, straight {med(straight):6.2f} ms, the plugin "
        f"{med(plugin_ms):6.2f} ms; added by the proxy {med(added):6.2f} ms, of which the "
        f"hop itself (a request no chat names, passed through) {med(hop):5.2f} ms"
    )


async def main(sizes: list[int], turns: int) -> None:
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; {turns} turns per size, medians:"
    )
    timed = Timed()
    relay_module.call_hook = timed  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            await bench_size(Path(tmp), size, turns, timed)
        for size in sizes:
            await bench_first_byte(Path(tmp), size, turns, timed)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.turns))
