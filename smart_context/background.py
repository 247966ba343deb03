"""Background work keyed by chat: at most one run in flight, bursts coalesced, drained on exit."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Generic, ParamSpec, TypeVar

from smart_context.allocator import give_back_soon

log = logging.getLogger(__name__)

Key = TypeVar("Key", bound=str)
T = TypeVar("T")
P = ParamSpec("P")
# set in a background run's task (and the tasks it starts): its heavy work, as embedding, goes
# to threads of its own and never queues ahead of a request's (smart_context.embeddings.local)
_IN_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "smart_context_background", default=False
)
# background runs in flight, all coalescers together (on one loop's thread: two loops in two
# threads could miscount by one, which moves a trim, nothing else)
_busy = 0


NICENESS = 10  # background work's lower CPU priority: on a busy machine the requests go first


def lower_this_thread() -> None:
    """Run the calling thread :data:`NICENESS` below the requests' threads (Linux, where a
    thread has a niceness of its own; elsewhere nothing is done, as the whole process would
    be lowered). For threads that hold the interpreter lock only briefly, as a model run's:
    one holding it while the system runs others first would hold the requests up."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            me = threading.get_native_id()
            os.setpriority(
                os.PRIO_PROCESS, me, min(os.getpriority(os.PRIO_PROCESS, me) + NICENESS, 19)
            )


def in_background() -> bool:
    """Whether the running code is a background run's (:class:`Coalescer`), not a request's."""
    return _IN_BACKGROUND.get()


# Background runs' work in threads (chat files, the text index, summaries, a map's join), all
# chats' and all vaults' on one thread. The interpreter's lock lets one thread run Python at a
# time, each for at most the switch interval while another waits: with asyncio's default pool
# (six threads on two cores) a team's background passes held six of the turns the requests'
# event loop waits in line for; one thread holds at most one. Not lowered (lower_this_thread):
# this thread holds the lock for most of its work.
_WORK = ThreadPoolExecutor(1, thread_name_prefix="smart-context-background")


async def to_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``asyncio.to_thread(func, *args)``, except that a background run's call
    (:func:`in_background`) goes to the background's own thread (above), behind the other
    background work. Nothing run there may wait for another call made through here from the
    background: it would wait for itself. Work done while holding a lock a request may wait for
    (a chat's write lock, a collection's) stays on asyncio's pool (``asyncio.to_thread``): queued
    here, behind other chats' and vaults' passes, it would keep the request waiting for them."""
    if not in_background():
        return await asyncio.to_thread(func, *args, **kwargs)
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_WORK, partial(context.run, func, *args, **kwargs))


def read_outcome(future: asyncio.Future[Any]) -> None:
    """Mark a future's failure as read: work started ahead of its reader (a section that stopped
    waiting, a request that failed first) must not be logged by asyncio as never retrieved."""
    if not future.cancelled():
        future.exception()


def held(
    tasks: set[asyncio.Future[Any]],
    work: Awaitable[T],
    failed: str,
    logger: logging.Logger = log,
) -> asyncio.Future[T]:
    """``work`` started now and held in ``tasks`` until done (the loop keeps tasks only weakly,
    and a caller may wait for ``tasks`` to settle); a failure is logged as ``failed``, with its
    trace."""
    future = asyncio.ensure_future(work)
    tasks.add(future)

    def done(_: asyncio.Future[T]) -> None:
        tasks.discard(future)
        if not future.cancelled() and future.exception() is not None:
            logger.error(failed, exc_info=future.exception())

    future.add_done_callback(done)
    return future


def ahead(work: Awaitable[T]) -> asyncio.Future[T]:
    """``work`` started now, for a caller that awaits it later or not at all (its failure is
    read either way: :func:`read_outcome`)."""
    future = asyncio.ensure_future(work)
    future.add_done_callback(read_outcome)
    return future


class Coalescer(Generic[Key]):
    """At most one run in flight per key; requests during a run yield exactly one more run."""

    def __init__(self, run: Callable[[Key], Awaitable[None]]) -> None:
        self._run = run
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._again: set[Key] = set()

    def request(self, key: Key) -> None:
        """Schedule a run for ``key`` and return at once."""
        if key in self._tasks:
            self._again.add(key)
            return
        self._tasks[key] = asyncio.get_running_loop().create_task(self._loop(key))

    async def _loop(self, key: Key) -> None:
        global _busy
        _IN_BACKGROUND.set(True)  # this task's own context: the requests' stays as it is
        _busy += 1
        try:
            while True:
                self._again.discard(key)
                try:
                    await self._run(key)
                except asyncio.CancelledError:
                    raise
                except Exception:  # background work: log and keep serving later requests
                    log.exception("Smart Context: background update of %s failed", key)
                if key not in self._again:
                    break
        finally:
            self._tasks.pop(key, None)
            _busy -= 1
            if not _busy:  # all passes done: what they freed goes back to the system
                give_back_soon(lambda: not _busy)

    @property
    def running(self) -> frozenset[Key]:
        """The keys with a run in flight."""
        return frozenset(self._tasks)

    async def drain(self, timeout: float = 10.0) -> None:
        """Let running work finish for up to ``timeout`` seconds, then cancel what is left."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
