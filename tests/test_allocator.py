"""Giving the allocator's free memory back: once all background passes are done, in a thread
of its own, not more often than every few seconds."""

from __future__ import annotations

import asyncio
import threading

import pytest

from smart_context import allocator, background
from smart_context.background import Coalescer


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The trims made (the thread each ran in), the clock of the last one reset."""
    made: list[str] = []

    def give_back() -> None:
        made.append(threading.current_thread().name)

    monkeypatch.setattr(allocator, "give_back", give_back)
    monkeypatch.setattr(allocator, "_last", -allocator.MIN_GAP)
    return made


def wait_for_trims(count: int, made: list[str]) -> None:
    for thread in threading.enumerate():
        if thread.name == "smart-context-trim":
            thread.join(5)
    assert len(made) == count


def test_give_back_runs_on_this_platform_without_failing() -> None:
    allocator.give_back()  # glibc's malloc_trim here; nothing where there is none


def test_a_burst_of_asks_trims_once_in_a_thread_of_its_own(trims: list[str]) -> None:
    for _ in range(5):
        allocator.give_back_soon()
    wait_for_trims(1, trims)
    assert trims == ["smart-context-trim"]
    allocator.give_back_soon()  # within MIN_GAP of the last
    wait_for_trims(1, trims)


async def test_the_background_trims_when_its_last_run_is_done(
    trims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    monkeypatch.setattr(background, "give_back_soon", lambda: asked.append(background._busy))
    release = asyncio.Event()
    done: list[str] = []

    async def run(key: str) -> None:
        if key == "slow":
            await release.wait()
        done.append(key)

    runs: Coalescer[str] = Coalescer(run)
    runs.request("slow")
    runs.request("quick")
    while "quick" not in done:
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert asked == []  # a pass is still under way
    release.set()
    await runs.drain()
    assert asked == [0]
