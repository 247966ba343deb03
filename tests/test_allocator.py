"""Giving the allocator's free memory back: once all background passes are done, in a thread
of its own, not more often than every few seconds; the cycle collector kept to what is new;
background threads below the requests' priority; the threads of a server sharing glibc's
arenas."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import platform
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from smart_context import allocator, background
from smart_context.background import Coalescer


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The trims made (the thread each ran in), the clock of the last one reset."""
    made: list[str] = []

    def give_back() -> None:
        made.append(threading.current_thread().name)

    join_trims()  # one another test left waiting would take this test's asks
    monkeypatch.setattr(allocator, "give_back", give_back)
    monkeypatch.setattr(allocator, "_last", -allocator.MIN_GAP)
    monkeypatch.setattr(allocator, "_waiting", False)
    yield made
    join_trims()


def join_trims() -> None:
    for thread in threading.enumerate():
        if thread.name == "smart-context-trim":
            thread.join(allocator.MIN_GAP + 5)


def wait_for_trims(count: int, made: list[str]) -> None:
    join_trims()
    assert len(made) == count


def test_give_back_runs_on_this_platform_without_failing() -> None:
    allocator.give_back()  # glibc's malloc_trim here; nothing where there is none


def test_a_burst_of_asks_trims_once_in_a_thread_of_its_own(
    trims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(allocator, "MIN_GAP", 0.3)
    monkeypatch.setattr(allocator, "_last", time.monotonic())  # a trim just began: all wait
    for _ in range(5):
        allocator.give_back_soon()
    wait_for_trims(1, trims)
    assert trims == ["smart-context-trim"]


def test_asks_within_the_gap_get_one_trim_when_it_is_over(
    trims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(allocator, "MIN_GAP", 1.0)  # (the 0.1 s look below, on a slow machine)
    allocator.give_back_soon()
    wait_for_trims(1, trims)
    first = time.monotonic()
    for _ in range(3):  # passes ending just after: what they freed is given back too, once
        allocator.give_back_soon()
    time.sleep(0.1)
    assert len(trims) == 1  # not before the gap is over
    wait_for_trims(2, trims)
    assert time.monotonic() - first >= 0.8
    second = time.monotonic()
    allocator.give_back_soon()  # and an ask after that trim began waits for the next gap
    wait_for_trims(3, trims)
    assert time.monotonic() - second >= 0.8


def test_a_trim_that_waited_is_left_out_while_passes_or_a_request_run(
    trims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(allocator, "MIN_GAP", 0.2)
    allocator.give_back_soon()
    wait_for_trims(1, trims)
    allocator.give_back_soon(lambda: False)  # passes started again while it waited
    wait_for_trims(1, trims)
    with allocator.urgent():  # a request being prepared when it wakes
        allocator.give_back_soon()
        wait_for_trims(1, trims)
    allocator.give_back_soon()  # the passes' end asks again: given back then
    wait_for_trims(2, trims)


async def test_the_background_trims_when_its_last_run_is_done(
    trims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[int, bool]] = []

    def give_back_soon(idle: Callable[[], bool]) -> None:
        asked.append((background._busy, idle()))

    monkeypatch.setattr(background, "give_back_soon", give_back_soon)
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
    assert asked == [(0, True)]


@pytest.fixture
def quiet() -> Any:
    """The collector kept quiet for the test, back to Python's own way after."""
    allocator.quiet_collector()
    yield
    allocator.quiet_collector(False)


def test_a_full_pass_leaves_what_survived_it_out_of_the_next(quiet: None) -> None:
    held = [[n] for n in range(1000)]  # long-lived containers, as a long chat's lists
    gc.collect()
    assert gc.get_freeze_count() >= len(held)
    allocator.quiet_collector(False)
    assert gc.get_freeze_count() == 0


def test_a_cycle_frozen_while_alive_is_reclaimed_by_the_periodic_pass_over_all(
    quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weakref

    class Node:
        pass

    node = Node()
    node.me = node  # type: ignore[attr-defined]  # a cycle: only the collector frees it
    gone = weakref.ref(node)
    gc.collect()  # survives, alive: frozen
    del node
    gc.collect()
    assert gone() is not None  # garbage now, but left out of the passes
    monkeypatch.setattr(allocator, "_unfrozen", time.monotonic() - allocator.FULL_PASS_EVERY)
    gc.collect()
    assert gone() is None


def test_turning_it_off_leaves_a_freeze_it_did_not_make() -> None:
    held = [[n] for n in range(100)]
    gc.freeze()  # a host's own (as a server that forks does)
    try:
        allocator.quiet_collector(False)  # never turned on here
        assert gc.get_freeze_count() >= len(held)
    finally:
        gc.unfreeze()


def test_quiet_collector_is_registered_once(quiet: None) -> None:
    allocator.quiet_collector()
    assert gc.callbacks.count(allocator._after_full_pass) == 1


def test_young_passes_run_less_often_while_quiet_and_as_before_after() -> None:
    before = gc.get_threshold()
    allocator.quiet_collector()
    try:
        allocator.quiet_collector()  # twice: the collector's own thresholds are still kept
        assert gc.get_threshold() == (allocator.YOUNG_PASS, *before[1:])
        gc.collect()
        passes = gc.get_stats()[0]["collections"]
        held = [{"n": n} for n in range(5000)]  # a long chat's copies, made in one turn
        assert len(held) == 5000
        assert gc.get_stats()[0]["collections"] == passes  # no young pass ran meanwhile
    finally:
        allocator.quiet_collector(False)
    assert gc.get_threshold() == before


def young_passes() -> int:
    return int(gc.get_stats()[0]["collections"])


@pytest.fixture
def small_passes(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The collector kept quiet, a young pass due after a hundred new containers (Python's own
    passes after five hundred, the backstop)."""
    monkeypatch.setattr(allocator, "YOUNG_PASS", 100)
    allocator.quiet_collector()
    gc.collect()
    yield
    allocator.quiet_collector(False)


@pytest.fixture
def collecting(small_passes: None) -> None:
    """:func:`small_passes`, with Python's own passes at the backstop, as while a server's loop
    collects between requests."""
    gc.set_threshold(100 * allocator.BACKSTOP, *gc.get_threshold()[1:])


def test_no_pass_is_due_while_the_collector_is_python_s_own() -> None:
    held = [[n] for n in range(allocator.YOUNG_PASS + 10)]
    assert len(held) > allocator.YOUNG_PASS
    assert allocator.due() is None and allocator.collect_due() is None


def test_a_pass_is_due_as_python_would_choose_its_generation(collecting: None) -> None:
    assert allocator.due() is None  # nothing new since the last pass
    held = [[n] for n in range(150)]
    assert allocator.due() == 0
    for _ in range(gc.get_threshold()[1] + 1):  # young passes enough for the middle one's turn
        gc.collect(0)
    held += [[n] for n in range(150)]
    assert allocator.due() == 1
    for _ in range(gc.get_threshold()[2] + 1):  # middle passes enough for a full one's turn
        gc.collect(1)
    held += [[n] for n in range(150)]
    assert allocator.due() == 2 and len(held) == 450


def test_no_pass_is_made_while_a_request_is_urgent_and_the_due_one_after(
    collecting: None,
) -> None:
    held = [[n] for n in range(150)]
    passes = young_passes()
    with allocator.urgent(), allocator.urgent():  # two requests under way
        assert allocator.collect_due() is None
    assert young_passes() == passes
    assert allocator.collect_due() == 0 and young_passes() == passes + 1
    assert allocator.due() is None and len(held) == 150


class _Held:
    """Something a weak reference can watch (a list cannot)."""


async def test_what_is_freed_later_lives_until_the_loop_turns() -> None:
    held = _Held()
    watch = weakref.ref(held)
    allocator.free_later(held, None)
    del held
    assert watch() is not None  # not freed in the request that let it go
    await asyncio.sleep(0)
    assert watch() is None and not allocator._later


async def test_what_another_loop_was_to_drop_is_dropped_at_this_one_s_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A loop that closed before its turn (a test's, a host's restarted one) holds nothing for
    good: the next loop to hold something drops it all."""
    held = _Held()
    watch = weakref.ref(held)
    closed = asyncio.new_event_loop()
    closed.close()
    monkeypatch.setattr(allocator, "_dropping", closed)
    monkeypatch.setattr(allocator, "_later", [(held,)])
    del held
    allocator.free_later(None)
    await asyncio.sleep(0)
    assert watch() is None and not allocator._later and allocator._dropping is None


def test_off_the_loop_nothing_is_held_for_later() -> None:
    held = _Held()
    watch = weakref.ref(held)
    allocator.free_later(held)
    del held
    assert watch() is None and not allocator._later


def test_an_urgent_part_that_fails_still_ends() -> None:
    with pytest.raises(ValueError), allocator.urgent():
        raise ValueError("a request's preparation failed")
    assert allocator._urgent == 0


async def test_python_s_own_passes_wait_longer_only_while_the_loop_collects(
    small_passes: None,
) -> None:
    collector = asyncio.ensure_future(allocator.collect_between(every=0.005, idle=0.005))
    await asyncio.sleep(0)
    assert gc.get_threshold()[0] == 100 * allocator.BACKSTOP
    collector.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await collector
    assert gc.get_threshold()[0] == 100  # nothing collects between requests now


async def test_an_idle_loop_looks_seldom_and_a_busy_one_often(
    quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(allocator, "YOUNG_PASS", 2000)
    gc.collect()
    slept: list[float] = []
    sleep = asyncio.sleep

    async def noted(seconds: float) -> None:
        slept.append(seconds)
        await sleep(0)

    monkeypatch.setattr(allocator.asyncio, "sleep", noted)
    collector = asyncio.ensure_future(allocator.collect_between(every=0.01, idle=1.0))
    try:
        await sleep(0)
        await sleep(0)
        held = [[n] for n in range(1500)]  # over half a pass's containers: a request's work
        await sleep(0)
        await sleep(0)
    finally:
        collector.cancel()
    assert slept[:2] == [1.0, 1.0] and set(slept[2:]) == {0.01} and len(held) == 1500


async def test_the_loop_makes_the_due_passes_between_urgent_parts(small_passes: None) -> None:
    collector = asyncio.ensure_future(allocator.collect_between(every=0.005, idle=0.005))
    await asyncio.sleep(0)  # it runs: Python's own passes wait for the backstop
    try:
        with allocator.urgent():
            held = [[n] for n in range(150)]
            passes = young_passes()
            await asyncio.sleep(0.05)  # ten looks: none while the request is urgent
            assert young_passes() == passes
        for _ in range(200):
            await asyncio.sleep(0.005)
            if young_passes() > passes:
                break
        assert young_passes() > passes and allocator.due() is None and len(held) == 150
    finally:
        collector.cancel()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness")
def test_a_background_thread_runs_below_the_requests_and_leaves_the_rest_as_it_was() -> None:
    from smart_context.embeddings import local

    def niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    mine = niceness()
    seen = local._BACKGROUND.submit(niceness).result(5)  # the background runs' embeddings
    assert seen == min(mine + background.NICENESS, 19) and niceness() == mine


_ARENAS_AFTER_SIX_THREADS = """
import ctypes, os, re, sys, tempfile, threading
from smart_context import allocator

def arenas():
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "malloc_info.xml")
        stream = ctypes.c_void_p(libc.fopen(path.encode(), b"w"))
        libc.malloc_info(0, stream)
        libc.fclose(stream)
        with open(path, encoding="utf-8") as info:
            return len(re.findall(r'<heap nr="[0-9]+"', info.read()))

if sys.argv[1] == "capped":
    assert allocator.fewer_arenas()
start = threading.Barrier(6)

def allocate():
    start.wait()  # all six at once, each with its first allocations in its own thread
    held = [bytearray(200_000) for _ in range(5)]
    start.wait()

threads = [threading.Thread(target=allocate) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(arenas())
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="glibc's arenas",
)
def test_threads_started_after_fewer_arenas_share_the_arenas_there_are() -> None:
    """In a fresh process (a test process's exited threads leave arenas to reuse): six threads
    allocating at once make an arena each, and share :data:`allocator.ARENAS` after
    ``fewer_arenas``."""

    def arenas(how: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", _ARENAS_AFTER_SIX_THREADS, how],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[1],
        )
        return int(done.stdout)

    assert arenas("as Python runs") > allocator.ARENAS
    assert arenas("capped") <= allocator.ARENAS


def test_without_a_c_library_to_call_nothing_is_done_and_nothing_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Windows (ctypes cannot open the process), musl or macOS (no ``malloc_trim``, no
    ``mallopt``): the server commands start all the same."""
    monkeypatch.setattr(allocator, "_c_library", lambda: None)
    allocator.give_back()
    assert allocator.fewer_arenas() is False

    class NoGlibc:  # a C library without glibc's functions
        pass

    monkeypatch.setattr(allocator, "_c_library", NoGlibc)
    allocator.give_back()
    assert allocator.fewer_arenas() is False


def test_resident_memory_is_read_here_and_unknown_without_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if sys.platform.startswith("linux"):
        held = allocator.resident_bytes()
        assert held is not None and held > 1024 * 1024

    def no_proc(*args: Any, **kwargs: Any) -> Any:
        raise FileNotFoundError("/proc/self/statm")

    monkeypatch.setattr(allocator, "open", no_proc, raising=False)
    assert allocator.resident_bytes() is None
