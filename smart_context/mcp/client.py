"""Talking to MCP servers through the official SDK (``mcp`` 2.x), every step time-bounded.

:func:`list_tools` and :func:`call_tool` open one connection per use: a stdio server is started,
asked, and stopped again; an HTTP server gets one session. :func:`connect` is the same
connection for several requests (list, then call).

Bounds: starting a server (spawn and handshake) and each request each get ``timeout`` seconds
(the server's ``timeout`` unless given). A stdio server is then stopped by the SDK: its stdin is
closed, and after 2 s its process group is sent SIGTERM, then SIGKILL after 2 s more; that
shutdown is shielded from cancellation, so no server outlives a timeout or a cancelled caller.
Closing an HTTP session is bounded by :data:`CLOSE_GRACE`.

A stdio server's stderr goes to the ``smart_context.mcp.servers`` logger, line by line,
never to the terminal; the last lines are quoted when the server fails to start.

The last known tool list of each server is kept in ``.memory/smart_context/tools/{server}.json``
so the vault's tools show while a server is down::

    {"format": 1, "server": "files", "saved_at": "2025-01-01T12:00:00+00:00",
     "tools": [{"name": "read_file", "description": "...", "input_schema": {...}}]}
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.to_thread

from smart_context.atomic import write_atomic
from smart_context.errors import ToolServerError
from smart_context.mcp.config import McpServer, valid_server_name
from smart_context.mcp.tool_errors import explain_tool_error
from smart_context.paths import memory_dir
from smart_context.shorten import shorten

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client

logger = logging.getLogger(__name__)
server_log = logging.getLogger("smart_context.mcp.servers")

CLOSE_GRACE = 5.0
"""Seconds an HTTP session may take to close after use."""
MAX_PAGES = 50
"""A server that pages its tool list forever is cut off here."""
SUMMARY_CHARS = 160
MAX_LOG_LINE = 2000
TOOL_LIST_FORMAT = 1


@dataclass(frozen=True)
class ToolInfo:
    """One tool as its server describes it; ``input_schema`` is a JSON Schema object."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, the shape of the tool list file."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }

    @classmethod
    def from_dict(cls, data: Any) -> ToolInfo:
        """The inverse of :meth:`as_dict`; ``ValueError`` when ``data`` is not that shape."""
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ValueError(f"not a tool: {str(data)[:80]}")
        description, schema = data.get("description", ""), data.get("input_schema", {})
        if not isinstance(description, str) or not isinstance(schema, dict):
            raise ValueError(f"tool {data['name']!r} has a bad description or input_schema")
        return cls(data["name"], description, schema)


@dataclass(frozen=True)
class ToolResult:
    """What a tool call gave: ``ok`` false when the tool reported an error (for the model to
    read and correct); ``text`` joins the content parts; ``summary`` is one line for events."""

    ok: bool
    text: str
    structured: dict[str, Any] | None = field(default=None, hash=False)
    summary: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for the ``call_tool`` command's ``result``."""
        return {
            "ok": self.ok,
            "text": self.text,
            "structured": self.structured,
            "summary": self.summary,
        }


class McpSession:
    """One live connection, inside :func:`connect`; every request is bounded by ``timeout``."""

    def __init__(self, server: McpServer, client: Client, timeout: float) -> None:
        self.server = server
        self._client = client
        self._timeout = timeout

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool the server offers, following its pages."""
        tools: list[ToolInfo] = []
        cursor: str | None = None
        with _bounded(self.server, self._timeout, "listing its tools"):
            for _ in range(MAX_PAGES):
                page = await self._client.list_tools(cursor=cursor)
                tools.extend(_tool_info(tool) for tool in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            else:
                logger.warning(
                    "MCP server %r: tool list cut off at %d pages", self.server.name, MAX_PAGES
                )
        return tools

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> ToolResult:
        """Run one tool within ``timeout`` (default: the connection's). An error the server
        reports about this call (an unknown tool, bad arguments) is a failed
        :class:`ToolResult`; a server that is gone or silent raises :class:`ToolServerError`."""
        if arguments is not None and not isinstance(arguments, Mapping):
            return _failed(name, f"arguments must be a JSON object, not {type(arguments).__name__}")
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        limit = self._timeout if timeout is None else timeout
        with _bounded(self.server, limit, f"calling {name!r}"):
            try:
                result = await self._client.call_tool(name, dict(arguments or {}))
            except MCPError as exc:
                if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                    raise
                return _failed(name, f"{exc.message} (MCP error {exc.code})", arguments)
        return _tool_result(name, result, arguments)


@contextmanager
def _bounded(server: McpServer, timeout: float, what: str) -> Iterator[None]:
    """One request within ``timeout`` seconds; its timeout and the SDK's errors become ours."""
    try:
        with anyio.fail_after(timeout):
            yield
    except TimeoutError:
        raise ToolServerError(
            server.name, f"did not answer within {timeout:g} s while {what}"
        ) from None
    except ToolServerError:
        raise
    except Exception as exc:
        raise ToolServerError(server.name, _describe(server, exc)) from exc


@asynccontextmanager
async def connect(server: McpServer, timeout: float | None = None) -> AsyncIterator[McpSession]:
    """A connection to ``server`` for several requests; raises :class:`ToolServerError` when
    the server cannot be started or reached within ``timeout`` seconds.

    Exceptions raised in the ``async with`` body pass through unchanged.
    """
    limit = server.timeout if timeout is None else timeout
    stderr = _StderrLog(server.name) if server.command is not None else None
    body_error: BaseException | None = None
    unwrapped: BaseException | None = None
    phase = "start"
    try:
        with anyio.CancelScope(deadline=anyio.current_time() + limit) as scope:
            async with _client(server, stderr) as client:
                if stderr is not None:
                    stderr.release()  # the server holds its own end of the pipe now
                phase, scope.deadline = "use", math.inf
                try:
                    yield McpSession(server, client, limit)
                except BaseException as exc:
                    body_error = exc
                    raise
                finally:
                    phase, scope.deadline = "close", anyio.current_time() + CLOSE_GRACE
    except Exception as exc:
        if body_error is None:
            detail = await _with_stderr(_describe(server, exc), stderr)
            raise ToolServerError(server.name, detail) from exc
        if _sole(exc) is not body_error:
            raise
        unwrapped = body_error  # out of the exception group the SDK's task group put around it
    finally:
        if stderr is not None:
            stderr.release()
    if unwrapped is not None:
        raise unwrapped
    if scope.cancelled_caught:
        if phase == "start":
            problem = f"did not start and answer within {limit:g} s"
            raise ToolServerError(server.name, await _with_stderr(problem, stderr))
        logger.warning("MCP server %r: closing took longer than %g s", server.name, CLOSE_GRACE)


async def list_tools(server: McpServer, timeout: float | None = None) -> list[ToolInfo]:
    """The server's tools, over a connection of their own."""
    async with connect(server, timeout) as session:
        return await session.list_tools()


async def call_tool(
    server: McpServer,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> ToolResult:
    """Run one tool over a connection of its own; see :meth:`McpSession.call_tool`."""
    async with connect(server, timeout) as session:
        return await session.call_tool(name, arguments)


def _client(server: McpServer, stderr: _StderrLog | None) -> Client:
    from mcp import Client, StdioServerParameters, stdio_client  # 1 s of imports: only when used

    # cache=None: a connection lives for a few requests, a response cache would only cost.
    if server.command is None:
        assert server.url is not None
        return Client(server.url, cache=None)
    assert stderr is not None
    params = StdioServerParameters(
        command=resolve_command(server.command),
        args=list(server.args),
        env=dict(server.env) or None,
    )
    return Client(stdio_client(params, errlog=stderr.file), cache=None)


def resolve_command(command: str) -> str:
    """A bare command name found on ``PATH``, else beside the running Python: a server
    installed in the sidecar's own virtual environment starts without activating it."""
    if os.sep in command or shutil.which(command) is not None:
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else command


def _describe(server: McpServer, exc: BaseException) -> str:
    """What went wrong, in words that say what to check."""
    import httpx2
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED
    from pydantic import ValidationError

    exc = _leaf(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, FileNotFoundError) and server.command is not None:
        return f"the command {server.command!r} was not found; is it installed and on PATH?"
    if isinstance(exc, PermissionError) and server.command is not None:
        return f"the command {server.command!r} cannot be run ({exc.strerror or exc})"
    if isinstance(exc, OSError) and server.command is not None:
        return f"could not start {server.target!r}: {exc.strerror or exc}"
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "closed the connection (did the server exit? see its output in the log)"
        return f"answered with an error: {exc.message} (MCP error {exc.code})"
    if isinstance(exc, httpx2.HTTPError):
        return f"could not be reached at {server.url}: {exc or type(exc).__name__}"
    if isinstance(exc, ValidationError):
        return "sent a reply that is not valid MCP"
    return f"failed: {type(exc).__name__}: {exc}"


def _sole(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the SDK's task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _with_stderr(problem: str, stderr: _StderrLog | None) -> str:
    if stderr is None:
        return problem
    tail = await stderr.tail()
    return f"{problem}; its last output: {tail}" if tail else problem


class _StderrLog:
    """A pipe for a stdio server's stderr; a thread logs each line it writes and keeps the last
    few for error messages. The thread ends when the server and we have closed the pipe."""

    def __init__(self, server_name: str) -> None:
        read_fd, write_fd = os.pipe()
        self.file: TextIO = open(write_fd, "w", encoding="utf-8")  # noqa: SIM115 (released below)
        self._last: deque[str] = deque(maxlen=3)
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd, server_name), name=f"mcp-stderr-{server_name}"
        )
        self._thread.daemon = True
        self._thread.start()

    def release(self) -> None:
        """Close our end; idempotent."""
        self.file.close()

    async def tail(self) -> str:
        """The last lines, once the server's end is closed too (waiting at most a moment)."""
        self.release()
        await anyio.to_thread.run_sync(self._thread.join, 1.0)
        return " | ".join(self._last)

    def _pump(self, read_fd: int, server_name: str) -> None:
        with open(read_fd, encoding="utf-8", errors="replace") as pipe:
            for raw in pipe:
                line = raw.rstrip()[:MAX_LOG_LINE]
                if line:
                    self._last.append(line[:300])
                    server_log.info("%s: %s", server_name, line)


def _tool_info(tool: mcp_types.Tool) -> ToolInfo:
    return ToolInfo(tool.name, tool.description or tool.title or "", dict(tool.input_schema))


def _tool_result(
    name: str, result: mcp_types.CallToolResult, arguments: Mapping[str, Any] | None = None
) -> ToolResult:
    text = "\n".join(part for part in map(_content_text, result.content) if part)
    structured = result.structured_content if isinstance(result.structured_content, dict) else None
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    if result.is_error:
        return _failed(name, text or "the tool reported an error without a message", arguments)
    return ToolResult(True, text, structured, _summary(f"{name}: ", text))


def _failed(name: str, text: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
    # A server's report of bad arguments (pydantic's, with its links) becomes words that say
    # which argument to fix: the page shows this text, and the model reads it to retry.
    text = explain_tool_error(name, text, arguments or ())
    return ToolResult(False, text, None, _summary(f"{name} failed: ", text))


def _summary(prefix: str, text: str) -> str:
    return prefix + shorten(text, SUMMARY_CHARS - len(prefix))


def _content_text(part: mcp_types.ContentBlock) -> str:
    """Text as it is; other content named, so the model knows something came back."""
    import mcp_types

    if isinstance(part, mcp_types.TextContent):
        return part.text
    if isinstance(part, mcp_types.ImageContent | mcp_types.AudioContent):
        return f"[{part.type}: {part.mime_type}, {len(part.data) * 3 // 4} bytes]"
    if isinstance(part, mcp_types.ResourceLink):
        return f"[resource: {part.name} {part.uri}]"
    resource = part.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return resource.text
    return f"[resource: {resource.uri}, {resource.mime_type or 'binary'}]"


def tool_list_file(vault: Path, server_name: str) -> Path:
    """``.memory/smart_context/tools/{server}.json``; the name passes the config's rule."""
    if not valid_server_name(server_name):
        raise ValueError(f"{server_name[:80]!r} is not a valid MCP server name")
    return memory_dir(vault) / "smart_context" / "tools" / f"{server_name}.json"


def save_tool_list(vault: Path, server_name: str, tools: Sequence[ToolInfo]) -> None:
    """Keep a server's tool list, written atomically."""
    data = {
        "format": TOOL_LIST_FORMAT,
        "server": server_name,
        "saved_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tools": [tool.as_dict() for tool in tools],
    }
    write_atomic(tool_list_file(vault, server_name), json.dumps(data, ensure_ascii=False, indent=1))


def load_tool_list(vault: Path, server_name: str) -> list[ToolInfo] | None:
    """The last saved tool list, ``None`` when there is none or it is damaged (logged)."""
    path = tool_list_file(vault, server_name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        logger.warning("Ignoring the damaged tool list %s: %s", path, exc)
        return None
    try:
        if not isinstance(data, dict) or data.get("format") != TOOL_LIST_FORMAT:
            raise ValueError("not a tool list of this version")
        if not isinstance(data.get("tools"), list):
            raise ValueError("no tools list")
        return [ToolInfo.from_dict(tool) for tool in data["tools"]]
    except ValueError as exc:
        logger.warning("Ignoring the damaged tool list %s: %s", path, exc)
        return None
