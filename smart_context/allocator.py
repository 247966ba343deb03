"""Memory the C allocator holds free, given back to the system; and the cycle collector kept
to what is new.

A long-running server frees what a pass over a long chat allocated (a chat's parsed copy, a
batch's arrays), but glibc's ``malloc`` keeps most freed memory in its arenas, one per thread
that allocated, in pieces it cannot hand back by itself: measured, some 12 MB after a thousand
messages, as much as all the chat's live data. ``malloc_trim(0)`` returns every free page.
It walks the heap (some 30 ms a gigabyte, the interpreter's lock released), so it runs in a
thread of its own, when the background passes have all finished, at most every
:data:`MIN_GAP` seconds: passes that end sooner after a trim have theirs when the gap is over
(one for all of them, unless passes or a request are under way by then), so a server that goes
idle after a burst of turns gives back what the last of them freed. Elsewhere than glibc
nothing is done.

Each thread that allocates gets an arena of its own from glibc (up to eight a core), and what
one thread freed serves only the threads of its arena: a server's worker threads, each taking a
turn on a chat, spread its pieces over as many arenas. :func:`fewer_arenas` (a server's choice,
as :func:`quiet_collector`) caps them at :data:`ARENAS`; the interpreter's lock already lets one
thread allocate Python objects at a time, so sharing an arena costs little. Measured, the
reference sidecar posting 1,000 messages (``benchmarks/bench_memory.py``, four runs each way,
one session): 9.3-13.9 KB a stored message against 13.7-16.5 KB.

Python's cycle collector, in a full pass, visits every reference every container holds: a
server holding long chats (their messages, ids and content keys, ten thousand to a list) pays
for all of them each time, with the interpreter's lock held and every request waiting.
Measured, a proxy holding one 10,000-message chat: a full pass 41 ms; at 50 people (five such
chats), passes of 50 to 270 ms every few seconds to a minute, the slowest turns' cause.
:func:`quiet_collector` (a server's choice, for its own process: ``serve`` and ``proxy`` make
it) moves what survives a full pass out of the later ones (``gc.freeze``), so each covers what
was made since; every :data:`FULL_PASS_EVERY` seconds one covers all again (``gc.unfreeze``),
so a cycle that became garbage after it was frozen is reclaimed then. Garbage without a cycle
is freed when its last reference goes, frozen or not.

It also runs the young passes every :data:`YOUNG_PASS` new containers rather than Python's
700: a turn of a 10,000-message chat makes ten thousand short-lived ones (the history's copies
for the plugins, the record), and at 700 each young pass found them still in use, passed them
on to the next generation and traversed them again there, some 5 ms of a turn, on the event
loop. Measured, a proxy's turns over a settled 10,000-message vault in one process (33 turns
and their background passes): the collector's time 338 → 33 ms, the turn's storing of the new
messages 8 → 2.5 ms at the median; the longest single young pass 5 → 12 ms.

A pass holds the interpreter's lock: a request that is being prepared waits for it. Python
runs a pass when the count of new containers crosses its threshold, which is when something
allocates, most often a request being prepared (a long chat's turn makes thousands). So a
server marks the part of a request a person waits on (:func:`urgent`: a proxy's turn, from its
arrival until it goes upstream), and its event loop runs :func:`collect_between`, which makes
the passes that are due between those parts, looking every :data:`LOOK_EVERY` seconds (every
:data:`LOOK_IDLE` while few containers are new).
Python's own passes still run, past :data:`BACKSTOP` times the count, should the loop never
find a moment (a server busy without pause), and at the count itself when nothing collects
between requests (a process that made the collector quiet but runs no such loop: left to
Python at five times the count, its garbage in cycles waited longer and its memory grew: 11 →
28 KB a stored message in ``benchmarks/bench_memory.py``).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import gc
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

MIN_GAP = 5.0  # seconds between two trims
ARENAS = 2  # glibc's arenas at most, for the threads that start after fewer_arenas
_M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)
FULL_PASS_EVERY = 600.0  # seconds between two full passes over all (quiet_collector)
YOUNG_PASS = 20_000  # new containers between two young passes (quiet_collector; Python's: 700)
BACKSTOP = 5  # Python's own young pass after this many YOUNG_PASS, when none ran between requests
LOOK_EVERY = 0.05  # seconds between two looks of collect_between
LOOK_IDLE = 0.5  # and while fewer than half of YOUNG_PASS are new (an idle server's wake-ups)

_lock = threading.Lock()
_last = -MIN_GAP  # when the last trim started (time.monotonic)
_waiting = False  # a trim's thread is waiting for the gap: the next ask is covered by it
_unfrozen = 0.0  # when a full pass last covered all (quiet_collector)
_thresholds: tuple[int, ...] | None = None  # the collector's own, while quiet_collector is on
_urgent = 0  # parts of requests a person waits on, under way (urgent)
_later: list[tuple[Any, ...]] = []  # what free_later holds until the event loop's next turn
_dropping: asyncio.AbstractEventLoop | None = None  # the loop that will drop them


def free_later(*objects: Any) -> None:
    """Hold ``objects`` until the event loop's next turn, so that, when this drops the last
    reference to them, they are freed there rather than in the request under way: a long
    chat's list that a turn replaces (100,000 ids) takes some 0.5 ms to free, one reference at a
    time. Off the loop's thread (or with no loop), they go as they would have."""
    global _dropping
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    if _dropping is not loop:  # (another loop's turn may never come: it may have closed)
        _dropping = loop
        loop.call_soon(_drop_held)
    _later.append(objects)


def _drop_held() -> None:
    global _dropping
    _dropping = None
    _later.clear()


def give_back() -> None:
    """Return the free memory the allocator holds to the system, now (glibc only)."""
    _c_call("malloc_trim", 0)


def fewer_arenas() -> bool:
    """Let the threads started from now on share :data:`ARENAS` arenas of glibc's ``malloc``
    (module docstring); threads that already have one keep it. False where it is not glibc."""
    return bool(_c_call("mallopt", _M_ARENA_MAX, ARENAS))


@functools.cache
def _c_library() -> Any:
    """This process's C library as ctypes opens it, once; ``None`` where it cannot (Windows:
    ``CDLL(None)`` is a ``TypeError``)."""
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):
        return None


def _c_call(name: str, *args: int) -> int | None:
    """The C library's function ``name`` called with ``args``; ``None`` where there is none
    (not glibc: musl has no ``malloc_trim``, macOS no ``mallopt``)."""
    function = getattr(_c_library(), name, None)
    return None if function is None else int(function(*args))


def resident_bytes() -> int | None:
    """This process's resident memory (Linux's ``/proc``; ``None`` elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def give_back_soon(idle: Callable[[], bool] = lambda: True) -> None:
    """:func:`give_back` in a thread of its own: now, or when :data:`MIN_GAP` seconds have
    passed since the last trim began; nothing more while one waits for that (it will cover
    what was freed meanwhile). The trim is left out when, as it starts, ``idle()`` is false
    (the caller's passes are running again: the end of the last asks anew) or a request is
    being prepared (:func:`urgent`; its reply's passes ask again): it would give back pages they
    are about to use, and it holds each arena's lock while it walks it."""
    global _waiting
    with _lock:
        if _waiting:
            return
        _waiting = True
        delay = max(0.0, _last + MIN_GAP - time.monotonic())
    threading.Thread(
        target=_trim, args=(delay, idle), name="smart-context-trim", daemon=True
    ).start()


def _trim(delay: float, idle: Callable[[], bool]) -> None:
    global _last, _waiting
    time.sleep(delay)
    with _lock:  # an ask from here on wants what is freed after this trim's start: another
        _waiting = False
        if _urgent or not idle():
            return
        _last = time.monotonic()
    give_back()


def quiet_collector(on: bool = True) -> None:
    """Keep the cycle collector's full passes to what is new since the last (module docstring);
    ``on=False``: back to Python's own way, all unfrozen."""
    global _unfrozen, _thresholds
    if not on:
        if _after_full_pass in gc.callbacks:  # only what it did: a host's own freeze stays
            gc.callbacks.remove(_after_full_pass)
            gc.unfreeze()
        if _thresholds is not None:
            gc.set_threshold(*_thresholds)
            _thresholds = None
        return
    if _after_full_pass not in gc.callbacks:
        _unfrozen = time.monotonic()
        gc.callbacks.append(_after_full_pass)
    if _thresholds is None:
        _thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_PASS, *_thresholds[1:])


def _after_full_pass(phase: str, info: dict[str, Any]) -> None:
    """The collector's callback: a full pass covers all again when the last that did is
    :data:`FULL_PASS_EVERY` seconds old; what survives it is left out of the next ones."""
    global _unfrozen
    if info.get("generation") != 2:
        return
    if phase == "start":
        now = time.monotonic()
        if now - _unfrozen >= FULL_PASS_EVERY:
            gc.unfreeze()
            _unfrozen = now
    elif phase == "stop":
        gc.freeze()


@contextmanager
def urgent() -> Iterator[None]:
    """A part of a request a person waits on: :func:`collect_between` makes no pass while one
    is under way. On the event loop's thread only (a plain count)."""
    global _urgent
    _urgent += 1
    try:
        yield
    finally:
        _urgent -= 1


def due() -> int | None:
    """The generation a pass would cover now, as Python chooses it but at :data:`YOUNG_PASS`
    new containers (the older generations by their counts of passes, Python's thresholds;
    without its wait for a quarter of the oldest generation to be new before a full pass: each
    full pass freezes what survived it, so the next covers only what came since); ``None`` when
    no pass is due, or while :func:`quiet_collector` is off."""
    if _thresholds is None:
        return None
    young, middle, old = gc.get_count()
    if young < YOUNG_PASS:
        return None
    if old > _thresholds[2]:
        return 2
    return 1 if middle > _thresholds[1] else 0


def collect_due() -> int | None:
    """Make the pass that is :func:`due`, unless a request's :func:`urgent` part is under way:
    the generation it covered, or ``None``."""
    generation = due() if _urgent == 0 else None
    if generation is not None:
        gc.collect(generation)
    return generation


async def collect_between(every: float = LOOK_EVERY, idle: float = LOOK_IDLE) -> None:
    """Run on a server's event loop while it serves: every ``every`` seconds, the pass that is
    due, between the requests' :func:`urgent` parts (module docstring); every ``idle`` seconds
    while fewer than half of :data:`YOUNG_PASS` containers are new. Until cancelled; meanwhile
    Python's own young passes wait for :data:`BACKSTOP` times the count."""
    if _thresholds is not None:
        gc.set_threshold(YOUNG_PASS * BACKSTOP, *_thresholds[1:])
    try:
        while True:
            await asyncio.sleep(every if gc.get_count()[0] >= YOUNG_PASS // 2 else idle)
            collect_due()
    finally:
        if _thresholds is not None:  # (still quiet: else Python's own are back already)
            gc.set_threshold(YOUNG_PASS, *_thresholds[1:])


async def collecting_between(main: Awaitable[T]) -> T:
    """``main``'s result, with :func:`collect_between` running meanwhile (a server's loop)."""
    collector = asyncio.ensure_future(collect_between())
    try:
        return await main
    finally:
        collector.cancel()
