"""The vault's MCP servers (docs/contract.md §8): their tools as items, kept current, and tool
calls.

A request never waits for a server. Tool items come from the last known tool list of each
server (``.memory/smart_context/tools/{server}.json``, :mod:`smart_context.mcp.client`), so the
vault's tools
show and can be chosen while a server is down or still starting. The lists are refreshed in the
background: when the plugin starts, when ``[mcp.servers]`` in ``.vault.toml`` changes, and again
for a server that failed, at most every :data:`RETRY_AFTER` seconds while requests keep coming.

Calls and listings share one connection per server (:mod:`.pool`), kept while it is used.

A server that fails is reported by name (an :class:`ItemProblem` the panel and ``items`` show,
and one log line per new failure), never fatal: its last known tools stay.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from smart_context.background import to_thread
from smart_context.errors import ToolServerError
from smart_context.items.model import Item, ItemProblem
from smart_context.items.pool import ServerPool
from smart_context.items.tools import tool_item
from smart_context.mcp.client import ToolInfo, ToolResult, load_tool_list, tool_list_file
from smart_context.mcp.config import (
    McpConfig,
    McpServer,
    effective_mode,
    function_name,
    parse_mcp_servers,
)

log = logging.getLogger(__name__)

CONFIG_FILE = ".vault.toml"
RETRY_AFTER = 60.0
"""Seconds before a server that failed is asked again (only while requests keep coming)."""
MAX_TOOLS_PER_SERVER = 500
"""More tools than this from one server are left out (and reported): one server cannot flood
the index or the model's tool list."""

FileStamp = tuple[int, int]  # (mtime_ns, size); (-1, -1) when missing


def _file_stamp(path: str | Path) -> FileStamp:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def read_mcp_config(vault: Path, environ: Mapping[str, str] | None = None) -> McpConfig:
    """``[mcp.servers]`` of the vault's ``.vault.toml``; a missing file has no servers, a file
    that is not TOML is one error in the config (never an exception)."""
    path = Path(vault) / CONFIG_FILE
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return McpConfig()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return McpConfig(errors=(f"{CONFIG_FILE}: cannot read the MCP servers: {exc}",))
    return parse_mcp_servers(document, environ, CONFIG_FILE)


def tool_items(
    servers: Sequence[McpServer], lists: Mapping[str, Sequence[ToolInfo] | None]
) -> tuple[list[Item], list[ItemProblem]]:
    """The tools of ``servers`` as items, from each server's tool list; a tool the model could
    not be offered (its ``{server}__{tool}`` name breaks the OpenAI rule) or a second tool of
    the same name is left out and reported."""
    items: list[Item] = []
    problems: list[ItemProblem] = []
    for server in servers:
        seen: set[str] = set()
        source = f"MCP server {server.name}"
        tools = list(lists.get(server.name) or ())
        if len(tools) > MAX_TOOLS_PER_SERVER:
            problems.append(
                ItemProblem(
                    source,
                    f"offers {len(tools)} tools; only the first {MAX_TOOLS_PER_SERVER} are used",
                )
            )
            tools = tools[:MAX_TOOLS_PER_SERVER]
        for tool in tools:
            if tool.name in seen:
                problems.append(ItemProblem(source, f"lists the tool {tool.name!r} twice"))
                continue
            seen.add(tool.name)
            if function_name(server.name, tool.name) is None:
                problems.append(
                    ItemProblem(
                        source,
                        f"tool {tool.name[:80]!r} left out: as {server.name}__{tool.name[:40]}"
                        " its name would not be a valid function name (at most 64 letters,"
                        " digits, '_' or '-')",
                        skipped=True,
                    )
                )
                continue
            items.append(  # sorted below: a server's order of tools means nothing to a person
                tool_item(
                    server.name,
                    tool.name,
                    tool.description,
                    tool.input_schema,
                    include=effective_mode(server, tool.name),
                )
            )
    return sorted(items, key=Item.sort_key), problems


class ToolServers:
    """The vault's servers, their tools as items, and calls to them (see the module docstring).

    ``stamp()`` changes whenever :meth:`items` would: the config, a tool list file, or a
    server's state changed.
    """

    def __init__(self, vault: Path, environ: Mapping[str, str] | None = None) -> None:
        self.vault = Path(vault)
        self._config_file = str(self.vault / CONFIG_FILE)  # stat'ed on every request
        self._environ = environ
        self._config_stamp: FileStamp | None = None
        self._config = McpConfig()
        self._failures: dict[str, tuple[float, str]] = {}  # server -> (monotonic, message)
        self._pending: set[str] = set()  # servers to list in the next refresh
        self._version = 0  # bumped when a server's state changes
        self._task: asyncio.Task[None] | None = None
        self.pool = ServerPool()
        # called after a listing brought tools (the plugin indexes them off the request path)
        self.on_listed: Callable[[], None] | None = None

    def config(self) -> McpConfig:
        """The servers as ``.vault.toml`` declares them now (read again when it changed)."""
        stamp = _file_stamp(self._config_file)
        if stamp != self._config_stamp:
            old = {s.name: s for s in self._config.servers}
            self._config = read_mcp_config(self.vault, self._environ)
            self._config_stamp = stamp
            for server in self._config.servers:  # a new or changed server is listed again
                if old.get(server.name) != server:
                    self._pending.add(server.name)
                    self._failures.pop(server.name, None)
            for error in self._config.errors:
                log.warning("%s", error)
        return self._config

    def stamp(self) -> tuple[Any, ...]:
        """What :meth:`items` depends on: one ``stat`` for the config, one per server."""
        config = self.config()
        lists = tuple(_file_stamp(tool_list_file(self.vault, s.name)) for s in config.servers)
        return (self._config_stamp, lists, self._version)

    def as_read(self) -> McpConfig:
        """The config as :meth:`config` or :meth:`stamp` last read it (no ``stat``)."""
        return self._config if self._config_stamp is not None else self.config()

    def items(self) -> tuple[list[Item], list[ItemProblem]]:
        """The tools of every declared server from its last known list, and the problems.

        Uses the config as :meth:`stamp` (or :meth:`config`) last read it and changes no state:
        the catalog calls it from a worker thread, while the event loop may be reading the
        config again. Read once first if it never was."""
        config = self.as_read()
        lists = {s.name: load_tool_list(self.vault, s.name) for s in config.servers}
        items, problems = tool_items(config.servers, lists)
        problems[:0] = [ItemProblem(CONFIG_FILE, error, skipped=True) for error in config.errors]
        for server in config.servers:
            failure = self._failures.get(server.name)
            if failure is not None:
                known = lists[server.name]
                keep = (
                    f"; its {len(known)} last known tools are shown"
                    if known
                    else "; none of its tools are known yet"
                )
                problems.append(ItemProblem(f"MCP server {server.name}", failure[1] + keep))
        return items, problems

    def failures(self) -> dict[str, str]:
        """Why each failing server failed, by name."""
        return {name: message for name, (_, message) in self._failures.items()}

    def refresh_soon(self, config: McpConfig | None = None) -> None:
        """List, in the background, the servers that are new, changed, or failed a while ago.
        ``config``: as the caller just read it (else read again).

        Cheap when there is nothing to do; needs a running event loop.
        """
        config = self.config() if config is None else config
        now = time.monotonic()
        due = {s.name for s in config.servers if s.name in self._pending} | {
            name
            for name, (when, _) in self._failures.items()
            if now - when >= RETRY_AFTER and config.server(name) is not None
        }
        if not due or (self._task is not None and not self._task.done()):
            return
        self._pending -= due
        self._task = asyncio.get_running_loop().create_task(self.refresh(sorted(due)))

    async def refresh(self, names: Sequence[str] | None = None) -> None:
        """List the tools of ``names`` (default: every server) at once and keep each list."""
        config = self.config()
        wanted = [s for s in config.servers if names is None or s.name in names]
        await asyncio.gather(*(self._refresh_one(server) for server in wanted))

    async def _refresh_one(self, server: McpServer) -> None:
        from smart_context.mcp.client import save_tool_list

        try:
            tools = await self.pool.run(server, lambda session: session.list_tools())
            await to_thread(save_tool_list, self.vault, server.name, tools)
        except (ToolServerError, OSError) as exc:
            message = exc.problem if isinstance(exc, ToolServerError) else str(exc)
            previous = self._failures.get(server.name)
            if previous is None or previous[1] != message:
                log.warning("MCP server %r: %s", server.name, message)
            self._failures[server.name] = (time.monotonic(), message)
        else:
            if self._failures.pop(server.name, None) is not None:
                log.info("MCP server %r answers again", server.name)
            log.info("MCP server %r: %d tools", server.name, len(tools))
            if self.on_listed is not None:
                self.on_listed()
        self._version += 1

    async def call(
        self, server_name: str, name: str, arguments: Mapping[str, Any] | None
    ) -> ToolResult:
        """Run one tool on a declared server; :class:`ToolServerError` when it is down."""
        server = self.config().server(server_name)
        if server is None:
            raise LookupError(
                f"No MCP server named {server_name[:80]!r} is declared in {CONFIG_FILE}."
            )
        return await self.pool.run(server, lambda session: session.call_tool(name, arguments))

    async def settle(self, timeout: float = 60.0) -> None:
        """Wait for a refresh under way (tests, and a tidy shutdown)."""
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task], timeout=timeout)

    async def close(self) -> None:
        """Stop a refresh under way and close every connection (stdio servers are stopped)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.pool.close()
