"""``smart-context proxy`` in the benchmark's own process: the app over a vault's sidecar, its
upstream answered by a handler of the benchmark (no network), and a client on the app.

Shared by ``bench_proxy.py``, ``public/bench_cache.py`` and ``public/bench_proxy_replay.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx

from smart_context_hosts.proxy.app import Proxy, ProxyOptions, create_app
from smart_context_hosts.sidecar.runtime import Sidecar

UPSTREAM = "http://upstream.test/v1"  # the base URL the proxy forwards to; never reached
ADDRESS = "http://127.0.0.1:8766"  # where the client believes the proxy is


@asynccontextmanager
async def proxy_in_process(
    sidecar: Sidecar, upstream: Callable[[httpx.Request], httpx.Response]
) -> AsyncIterator[tuple[Proxy, httpx.AsyncClient]]:
    """The proxy over ``sidecar``, started (its lifespan entered), and a client on it; every
    request it sends upstream is answered by ``upstream``."""
    app = create_app(sidecar, ProxyOptions(UPSTREAM), transport=httpx.MockTransport(upstream))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ADDRESS) as client,
    ):
        yield app.state.proxy, client
