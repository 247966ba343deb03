"""Background runs' work in threads: one thread for all of them, never the requests' pool."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from itertools import pairwise
from pathlib import Path

from smart_context.background import Coalescer, to_thread

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="")


def _where(wait: float = 0.0, *, note: list[tuple[str, float, float]] | None = None) -> str:
    start = time.monotonic()
    time.sleep(wait)
    name = threading.current_thread().name
    if note is not None:
        note.append((name, start, time.monotonic()))
    return f"{name}|{MARK.get()}"


async def test_background_runs_share_one_thread_of_their_own_and_requests_keep_theirs() -> None:
    seen: list[str] = []
    spans: list[tuple[str, float, float]] = []

    async def run(key: str) -> None:
        MARK.set(key)
        seen.append(await to_thread(_where, 0.02, note=spans))

    coalescer: Coalescer[str] = Coalescer(run)
    for key in ("a", "b", "c", "d"):
        coalescer.request(key)
    asked = await to_thread(_where)  # a request's call, made while the runs are in flight
    await coalescer.drain()

    assert sorted(s.split("|")[1] for s in seen) == ["a", "b", "c", "d"]  # each run's context
    assert {s.split("|")[0] for s in seen} == {spans[0][0]}
    assert spans[0][0].startswith("smart-context-background")
    assert not asked.startswith("smart-context-background")
    spans.sort(key=lambda s: s[1])
    assert all(later[1] >= earlier[2] for earlier, later in pairwise(spans))


async def test_a_request_s_call_never_queues_behind_background_work() -> None:
    release = threading.Event()

    async def run(key: str) -> None:
        await to_thread(release.wait, 5)

    coalescer: Coalescer[str] = Coalescer(run)
    coalescer.request("busy")
    await asyncio.sleep(0.01)  # the background thread is now held
    try:
        name = await asyncio.wait_for(to_thread(_where), timeout=2)
        assert not name.startswith("smart-context-background")
    finally:
        release.set()
        await coalescer.drain()


async def test_a_background_write_under_a_chat_s_lock_does_not_wait_for_other_background_work(
    tmp_path: Path,
) -> None:
    # a request may wait for the chat's lock: what holds it must not queue behind other chats'
    # passes on the background's one thread
    from smart_context_hosts.sidecar.memory import ChatMemory

    (tmp_path / ".memory").mkdir()
    memory = ChatMemory(tmp_path)
    await memory.save_chat("c", {"id": "c", "messages": []})
    release = threading.Event()

    async def run(key: str) -> None:
        if key == "busy":
            await to_thread(release.wait, 5)
        else:
            await memory.update_state("c", lambda data: {**data, "title": "kept"})

    coalescer: Coalescer[str] = Coalescer(run)
    coalescer.request("busy")
    await asyncio.sleep(0.01)  # the background thread is now held
    try:
        coalescer.request("c")
        for _ in range(200):
            if "c" not in coalescer.running:
                break
            await asyncio.sleep(0.01)
        assert "c" not in coalescer.running  # written while the other pass still runs
        assert (await memory.load_chat("c"))["title"] == "kept"
    finally:
        release.set()
        await coalescer.drain()
