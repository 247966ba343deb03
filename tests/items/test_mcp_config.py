"""`[mcp.servers.*]` tables: what parses, and one message for each thing that does not."""

from __future__ import annotations

import os
import tomllib
from typing import Any

import pytest
import tomlkit

from smart_context.mcp.config import (
    DEFAULT_TIMEOUT,
    McpServer,
    effective_mode,
    function_name,
    parse_mcp_servers,
    split_function_name,
)

ENV = {"HOME": "/home/ada", "NOTES_TOKEN": "s3cret"}

CONTRACT_EXAMPLE = """
[mcp.servers.files]
command = "some-mcp-server"
args = ["--root", "~/notes"]
env = { TOKEN = "$NOTES_TOKEN", ROOT = "${HOME}/notes", PRICE = "$$5" }
include = "agent"
auto_approve = false
[mcp.servers.files.tools]
read_file = "always"

[mcp.servers.web]
url = "http://127.0.0.1:9000/mcp"
timeout = 5
"""


def servers(tables: dict[str, Any]) -> tuple[tuple[McpServer, ...], tuple[str, ...]]:
    config = parse_mcp_servers({"mcp": {"servers": tables}}, ENV)
    return config.servers, config.errors


def test_the_contract_example_parses() -> None:
    config = parse_mcp_servers(tomllib.loads(CONTRACT_EXAMPLE), ENV)

    assert config.errors == ()
    files, web = config.servers
    assert (files.name, files.transport, files.command) == ("files", "stdio", "some-mcp-server")
    assert files.args == ("--root", os.path.expanduser("~/notes"))
    assert dict(files.env) == {"TOKEN": "s3cret", "ROOT": "/home/ada/notes", "PRICE": "$5"}
    assert (files.include, files.auto_approve, files.timeout) == ("agent", False, DEFAULT_TIMEOUT)
    assert dict(files.tools) == {"read_file": "always"}
    assert (web.transport, web.url, web.timeout, web.include) == (
        "http",
        "http://127.0.0.1:9000/mcp",
        5.0,
        "always",
    )
    assert config.server("web") is web
    assert config.server("nope") is None


def test_a_tomlkit_document_parses_like_tomllib() -> None:
    assert parse_mcp_servers(tomlkit.parse(CONTRACT_EXAMPLE), ENV) == parse_mcp_servers(
        tomllib.loads(CONTRACT_EXAMPLE), ENV
    )


def test_effective_mode_is_tool_then_server_then_always() -> None:
    (files, web), _ = servers(
        {
            "files": {
                "command": "x",
                "include": "agent",
                "tools": {"read_file": "manual", "write_file": "expansion"},
            },
            "web": {"url": "https://example.org/mcp"},
        }
    )

    assert effective_mode(files, "read_file") == "manual"
    assert effective_mode(files, "write_file") == "expansion"
    assert effective_mode(files, "list_files") == "agent"
    assert effective_mode(web, "anything") == "always"


@pytest.mark.parametrize(
    "name", ["bad name", "a__b", "files_", "-files", "dots.no", "é", "x" * 33, ""]
)
def test_a_bad_server_name_is_reported_and_the_others_still_load(name: str) -> None:
    loaded, errors = servers({name: {"command": "x"}, "good": {"command": "y"}})

    assert [s.name for s in loaded] == ["good"]
    assert len(errors) == 1
    assert f"[mcp.servers.{name}] name = {name!r} is not valid" in errors[0]
    assert "{server}__{tool}" in errors[0]


@pytest.mark.parametrize("name", ["files", "my-notes", "gh_2", "A1", "x" * 32])
def test_good_server_names(name: str) -> None:
    loaded, errors = servers({name: {"command": "x"}})
    assert errors == () and loaded[0].name == name


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"command": "x", "url": "http://h/mcp"}, "url = 'http://h/mcp' is not valid: a server"),
        ({"args": ["a"]}, 'needs command = "..." (a program started over stdio) or url'),
        ({"url": "ftp://host/mcp"}, "url = 'ftp://host/mcp' is not valid: expected an http(s)"),
        ({"url": "http:///mcp"}, "expected an http(s) URL"),
        ({"command": "  "}, "command = '  ' is not valid: expected a non-empty string"),
        ({"command": "x", "args": "--root"}, "args = '--root' is not valid: expected a list"),
        ({"command": "x", "args": ["a", 1]}, "expected a list of strings"),
        ({"command": "x", "env": ["A=1"]}, "env = ['A=1'] is not valid: expected a table"),
        ({"command": "x", "env": {"N": 1}}, "env.N = 1 is not valid: expected a string"),
        ({"command": "x", "include": "sometimes"}, "include = 'sometimes' is not valid"),
        ({"command": "x", "tools": {"t": "never"}}, "tools.t = 'never' is not valid"),
        ({"command": "x", "tools": ["t"]}, "tools = ['t'] is not valid: expected a table"),
        ({"command": "x", "auto_approve": "yes"}, "auto_approve = 'yes' is not valid"),
        ({"command": "x", "timeout": 0}, "timeout = 0 is not valid: must be between 1"),
        ({"command": "x", "timeout": True}, "timeout = True is not valid: expected seconds"),
        ({"command": "x", "cwd": "/tmp"}, "cwd = '/tmp' is not valid: unknown key; expected"),
        ("command = x", "(table) = 'command = x' is not valid: expected a table"),
    ],
)
def test_each_bad_value_is_one_message_naming_file_table_and_key(table: Any, expected: str) -> None:
    loaded, errors = servers({"bad": table})

    assert loaded == ()
    assert len(errors) == 1
    assert errors[0].startswith(".vault.toml: [mcp.servers.bad] ")
    assert expected in errors[0]


def test_a_missing_environment_variable_is_named() -> None:
    loaded, errors = servers({"gh": {"command": "x", "env": {"TOKEN": "${GITHUB_TOKEN}"}}})

    assert loaded == ()
    assert "env.TOKEN" in errors[0]
    assert "the environment variable GITHUB_TOKEN is not set" in errors[0]


@pytest.mark.parametrize("name", ["A=B", "", "1ST", "X Y", "PATH\0"])
def test_an_environment_name_a_process_cannot_take_is_refused(name: str) -> None:
    loaded, errors = servers({"s": {"command": "x", "env": {name: "v"}}})
    assert loaded == () and "a variable name is letters, digits and '_'" in errors[0]


def test_a_nul_in_an_environment_value_is_refused() -> None:
    loaded, errors = servers({"s": {"command": "x", "env": {"T": "a\0b"}}})
    assert loaded == () and "env.T" in errors[0]


def test_variables_come_from_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMART_CONTEXT_TEST_TOKEN", "from-env")
    config = parse_mcp_servers(
        {"mcp": {"servers": {"s": {"command": "x", "env": {"T": "$SMART_CONTEXT_TEST_TOKEN"}}}}}
    )
    assert dict(config.servers[0].env) == {"T": "from-env"}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, ()),
        ({"mcp": {}}, ()),
        ({"mcp": "servers"}, (".vault.toml: [mcp] must be a table of server tables.",)),
        (
            {"mcp": {"servers": []}},
            (".vault.toml: [mcp.servers] must be a table of server tables.",),
        ),
    ],
)
def test_no_or_malformed_mcp_table(document: dict[str, Any], expected: tuple[str, ...]) -> None:
    config = parse_mcp_servers(document, ENV)
    assert config.servers == () and config.errors == expected


def test_function_names_follow_the_openai_rule() -> None:
    assert function_name("files", "read_file") == "files__read_file"
    assert split_function_name("files__read_file") == ("files", "read_file")
    assert split_function_name("files__read__file") == ("files", "read__file")
    assert function_name("files", "x" * 57) == "files__" + "x" * 57  # 64 characters
    assert function_name("files", "x" * 58) is None
    assert function_name("files", "read.file") is None
    assert split_function_name("no_separator") is None
