"""MCP servers declared in ``.vault.toml`` (docs/contract.md §8), validated into frozen configs.

```toml
[mcp.servers.files]
command = "some-mcp-server"        # stdio; or url = "http://127.0.0.1:9000/mcp" (streamable HTTP)
args = ["--root", "~/notes"]       # a leading ~ is the user's home, as in a shell
env = { NOTES = "$HOME/notes" }    # extra environment; $NAME and ${NAME} name variables, $$ is $
include = "agent"                  # default for its tools; absent: "always"
auto_approve = false               # true: its tool calls run without asking
timeout = 30                       # seconds to start, list or call before giving up
[mcp.servers.files.tools]
read_file = "always"               # per-tool override
```

One bad server never costs the others: :func:`parse_mcp_servers` returns the servers that are
valid and one message per server that is not, naming the file, the table, the key and the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from smart_context.items.model import INCLUDE_MODES, TOOL_INCLUDE, IncludeMode

DEFAULT_TIMEOUT = 30.0
"""Seconds a server may take to start and answer one request: enough for ``npx``/``uvx`` servers
that unpack themselves on first start, short enough that a hung one is noticed."""
MAX_TIMEOUT = 600.0

MAX_SERVER_NAME = 32
PLUGIN_SERVER = "smart_context"
"""The server name of the plugin's own tools (the memory tools): no vault server may take it,
so a call of ``smart_context__...`` always means ours."""
# Letters and digits in runs joined by single '-' or '_': the model sees a tool as
# ``{server}__{tool}``, so a server name may neither contain "__" nor end in "_", or the split
# back into server and tool would be ambiguous.
_SERVER_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|(\$))")

_KEYS = frozenset({"command", "args", "env", "url", "include", "auto_approve", "tools", "timeout"})


def _no_entries() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class McpServer:
    """One ``[mcp.servers.NAME]`` table: a stdio command or a streamable HTTP URL.

    ``env`` holds only the table's own variables, already expanded; the SDK adds a minimal
    inherited environment (``HOME``, ``PATH``, ``USER``...) so secrets in ours stay ours.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_no_entries, hash=False)
    url: str | None = None
    include: IncludeMode = TOOL_INCLUDE
    auto_approve: bool = False
    tools: Mapping[str, IncludeMode] = field(default_factory=_no_entries, hash=False)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """How the server is reached."""
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """The command line or URL, for messages."""
        return self.url or " ".join([self.command or "", *self.args])


@dataclass(frozen=True)
class McpConfig:
    """The valid servers in file order, and one message per server (or table) that is not."""

    servers: tuple[McpServer, ...] = ()
    errors: tuple[str, ...] = ()

    def server(self, name: str) -> McpServer | None:
        """The server called ``name``, if it is declared and valid."""
        return next((s for s in self.servers if s.name == name), None)


class _Invalid(Exception):
    """What is wrong with one server table; becomes a line of :attr:`McpConfig.errors`."""


def _bad(key: str, value: object, problem: str) -> _Invalid:
    return _Invalid(f"{key} = {_show(value)} is not valid: {problem}")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def effective_mode(server: McpServer, tool_name: str) -> IncludeMode:
    """A tool's include mode: its own override, else the server's default (itself ``always``
    when the table does not say)."""
    return server.tools.get(tool_name, server.include)


def function_name(server_name: str, tool_name: str) -> str | None:
    """The name the model sees, ``{server}__{tool}``, or ``None`` when it would break the
    OpenAI rule (at most 64 characters of ``[A-Za-z0-9_-]``)."""
    name = f"{server_name}__{tool_name}"
    return name if _FUNCTION_NAME.fullmatch(name) else None


def split_function_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` from a name made by :func:`function_name`."""
    server, sep, tool = name.partition("__")
    return (server, tool) if sep and server and tool else None


def valid_server_name(name: str) -> bool:
    """Whether ``name`` may name a server: it becomes part of tool and file names."""
    return len(name) <= MAX_SERVER_NAME and _SERVER_NAME.fullmatch(name) is not None


def parse_mcp_servers(
    document: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    file: str = ".vault.toml",
) -> McpConfig:
    """The ``[mcp.servers.*]`` tables of a parsed ``.vault.toml`` (tomllib or tomlkit).

    ``environ`` (default ``os.environ``) resolves the variables named in ``env`` values.
    Never raises for bad content: every problem is a message in :attr:`McpConfig.errors`.
    """
    env = os.environ if environ is None else environ
    mcp = _plain(document.get("mcp", {}))
    servers_table = mcp.get("servers", {}) if isinstance(mcp, dict) else None
    if not isinstance(servers_table, dict):
        where = "[mcp]" if not isinstance(mcp, dict) else "[mcp.servers]"
        return McpConfig(errors=(f"{file}: {where} must be a table of server tables.",))
    servers: list[McpServer] = []
    errors: list[str] = []
    for name, table in servers_table.items():
        where = f"{file}: [mcp.servers.{name}]"
        try:
            servers.append(_parse_server(str(name), table, env))
        except _Invalid as exc:
            errors.append(f"{where} {exc}")
    return McpConfig(servers=tuple(servers), errors=tuple(errors))


def _parse_server(name: str, table: Any, environ: Mapping[str, str]) -> McpServer:
    """One server table; :class:`_Invalid` says what is wrong."""
    if not valid_server_name(name):
        raise _bad(
            "name",
            name,
            f"use 1-{MAX_SERVER_NAME} letters and digits, joined by single '-' or '_' "
            "(the model sees its tools as {server}__{tool})",
        )
    if name.casefold() == PLUGIN_SERVER:
        raise _bad(
            "name",
            name,
            f"{PLUGIN_SERVER!r} is the name of Smart Context's own memory tools; give this "
            "server another name",
        )
    if not isinstance(table, dict):
        raise _bad("(table)", table, 'expected a table such as command = "..."')
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise _bad(
            unknown[0], table[unknown[0]], "unknown key; expected " + ", ".join(sorted(_KEYS))
        )
    command, url = table.get("command"), table.get("url")
    if command is not None and url is not None:
        raise _bad("url", url, "a server has a command (stdio) or a url (HTTP), not both")
    if command is None and url is None:
        raise _Invalid(
            'needs command = "..." (a program started over stdio) or url = "http://..." '
            "(streamable HTTP)"
        )
    return McpServer(
        name=name,
        command=None if command is None else os.path.expanduser(_text("command", command)),
        args=_args(table.get("args", [])),
        env=MappingProxyType(_env(table.get("env", {}), environ)),
        url=None if url is None else _url(url),
        include=_mode("include", table.get("include", TOOL_INCLUDE)),
        auto_approve=_bool("auto_approve", table.get("auto_approve", False)),
        tools=MappingProxyType(_tools(table.get("tools", {}))),
        timeout=_timeout(table.get("timeout", DEFAULT_TIMEOUT)),
    )


def _plain(value: Any) -> Any:
    """tomlkit items behave like builtins but are not always ``isinstance`` of them."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(key, value, "expected a non-empty string")
    return value.strip()


def _args(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise _bad("args", value, 'expected a list of strings such as ["--root", "~/notes"]')
    return tuple(os.path.expanduser(a) if a.startswith("~") else a for a in value)


def _env(value: Any, environ: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _bad("env", value, 'expected a table such as { TOKEN = "$MY_TOKEN" }')
    expanded: dict[str, str] = {}
    for key, raw in value.items():
        if not _ENV_NAME.fullmatch(str(key)):
            raise _bad(f"env.{str(key)[:40]}", raw, "a variable name is letters, digits and '_'")
        if not isinstance(raw, str) or "\0" in raw:
            raise _bad(f"env.{key}", raw, "expected a string")
        expanded[str(key)] = _expand(f"env.{key}", raw, environ)
    return expanded


def _expand(key: str, value: str, environ: Mapping[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` from ``environ``, ``$$`` as ``$``; a missing name is an error,
    so a server never starts with an empty token it would reject in some obscure way."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(3):
            return "$"
        variable = match.group(1) or match.group(2)
        if variable not in environ:
            raise _bad(key, value, f"the environment variable {variable} is not set")
        return environ[variable]

    return _VARIABLE.sub(substitute, value)


def _url(value: Any) -> str:
    url = _text("url", value)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad("url", value, 'expected an http(s) URL such as "http://127.0.0.1:9000/mcp"')
    return url


def _mode(key: str, value: Any) -> IncludeMode:
    if value not in INCLUDE_MODES:
        raise _bad(key, value, "expected one of " + ", ".join(f'"{m}"' for m in INCLUDE_MODES))
    return cast(IncludeMode, value)


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(key, value, "expected true or false")
    return value


def _tools(value: Any) -> dict[str, IncludeMode]:
    if not isinstance(value, dict):
        raise _bad("tools", value, 'expected a table such as { read_file = "always" }')
    return {str(tool): _mode(f"tools.{tool}", mode) for tool, mode in value.items()}


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad("timeout", value, f"expected seconds, a number from 1 to {MAX_TIMEOUT:g}")
    if not 1 <= value <= MAX_TIMEOUT:
        raise _bad("timeout", value, f"must be between 1 and {MAX_TIMEOUT:g} seconds")
    return float(value)
