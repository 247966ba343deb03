"""One live connection per MCP server, kept while it is used.

Starting a stdio server costs seconds (a Python server: 2 to 4 s on these machines), a request on
an open connection milliseconds (6 ms for the example server), and a reply that calls three tools
should not start the server three times. So each server gets a worker task that opens the
connection (:func:`smart_context.mcp.client.connect`), runs the requests given to it one after
another, and
closes the connection after :data:`IDLE` seconds without one, when the server's config changes,
or when the plugin stops. The task that opens a connection is the one that closes it, as the
SDK's cancel scopes require.

A connection that fails (the server exited, stopped answering) ends its worker; the request
that was running gets the error, and the next one starts the server again. A request still
waiting in the queue of a worker that died before taking it is moved to a fresh worker once:
it was never sent, so running it cannot run a tool twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from smart_context.background import read_outcome
from smart_context.errors import ToolServerError
from smart_context.mcp.config import McpServer

if TYPE_CHECKING:
    from smart_context.mcp.client import McpSession

log = logging.getLogger(__name__)

IDLE = 300.0
"""Seconds a connection stays open without a request."""

T = TypeVar("T")
Job = Callable[["McpSession"], Awaitable[Any]]


class _NeverSent(Exception):
    """The worker ended before it took this request."""


@dataclass
class _Request:
    job: Job
    done: asyncio.Future[Any]
    taken: bool = False


@dataclass
class _Worker:
    server: McpServer
    queue: asyncio.Queue[_Request | None] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.task is not None and not self.task.done()


class ServerPool:
    """Connections to MCP servers, one worker each (see the module docstring)."""

    def __init__(self, idle: float = IDLE) -> None:
        self.idle = idle
        self._workers: dict[str, _Worker] = {}

    async def run(self, server: McpServer, job: Callable[[McpSession], Awaitable[T]]) -> T:
        """``job(session)`` on the server's connection, started if needed."""
        for attempt in (1, 2):
            request = _Request(job, asyncio.get_running_loop().create_future())
            self._worker(server).queue.put_nowait(request)
            try:
                result: T = await asyncio.shield(request.done)
            except asyncio.CancelledError:  # the worker still answers; no one will read it
                request.done.add_done_callback(read_outcome)
                raise
            except _NeverSent:
                if attempt == 2:
                    raise ToolServerError(
                        server.name, "closed before the request was sent"
                    ) from None
                continue
            return result
        raise AssertionError("unreachable")

    def _worker(self, server: McpServer) -> _Worker:
        worker = self._workers.get(server.name)
        if worker is not None and worker.alive and worker.server == server:
            return worker
        if worker is not None and worker.alive:  # the config changed: the old one winds down
            worker.queue.put_nowait(None)
        worker = _Worker(server)
        worker.task = asyncio.get_running_loop().create_task(self._serve(worker))
        self._workers[server.name] = worker
        return worker

    async def _serve(self, worker: _Worker) -> None:
        from smart_context.mcp.client import connect

        name = worker.server.name
        try:
            async with connect(worker.server) as session:
                log.info("MCP server %r: connected", name)
                while True:
                    try:
                        request = await asyncio.wait_for(worker.queue.get(), self.idle)
                    except TimeoutError:
                        break
                    if request is None:
                        break
                    request.taken = True
                    try:
                        result = await request.job(session)
                    except ToolServerError as exc:
                        _settle(request.done, exc)
                        break  # the connection is not to be trusted any more
                    except Exception as exc:  # noqa: BLE001  # the job's own error, for its caller
                        _settle(request.done, exc)
                    else:
                        if not request.done.done():
                            request.done.set_result(result)
        except ToolServerError as exc:  # could not start or reach the server
            self._fail_waiting(worker, exc)
        except Exception as exc:  # never let a worker die silently
            log.exception("MCP server %r: the connection failed", name)
            self._fail_waiting(worker, ToolServerError(name, f"failed: {exc}"))
        finally:
            if self._workers.get(name) is worker:
                del self._workers[name]
            self._fail_waiting(worker, None)

    @staticmethod
    def _fail_waiting(worker: _Worker, exc: BaseException | None) -> None:
        """Answer every request still queued: with ``exc`` (the server cannot be reached), or
        as never sent (``None``: the worker ended for another reason, a fresh one will try)."""
        while not worker.queue.empty():
            request = worker.queue.get_nowait()
            if request is not None:
                _settle(request.done, exc if exc is not None else _NeverSent())

    async def close(self, grace: float = 1.0) -> None:
        """Close every connection: idle ones at once, a request under way gets ``grace``
        seconds, a server still starting is given up on. The SDK stops each stdio server
        (stdin closed, then SIGTERM and SIGKILL, shielded from the cancellation)."""
        workers = list(self._workers.values())
        for worker in workers:
            worker.queue.put_nowait(None)
        tasks = [w.task for w in workers if w.task is not None and not w.task.done()]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace)
        for task in late:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)


def _settle(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
