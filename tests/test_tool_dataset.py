"""The hand-labelled tool-selection data in benchmarks/data: shapes, names and labels."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
# docs/contract.md §8: the model sees each tool as "{server}__{tool}", at most 64 of [A-Za-z0-9_-].
FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.fixture(scope="module")
def servers() -> list[dict[str, Any]]:
    data = json.loads((DATA / "tools.json").read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


@pytest.fixture(scope="module")
def queries() -> list[dict[str, Any]]:
    data = json.loads((DATA / "tool_queries.json").read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


def nonempty_text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() == value and bool(value)


def test_servers_and_tools_are_shaped_like_mcp_tool_lists(servers: list[dict[str, Any]]) -> None:
    for server in servers:
        assert set(server) == {"name", "description", "tools"}, server.get("name")
        assert nonempty_text(server["name"]) and nonempty_text(server["description"])
        assert isinstance(server["tools"], list) and server["tools"], server["name"]
        for tool in server["tools"]:
            where = f"{server['name']}/{tool.get('name')}"
            assert set(tool) == {"name", "description", "inputSchema"}, where
            assert nonempty_text(tool["name"]) and nonempty_text(tool["description"]), where


def test_server_names_are_unique(servers: list[dict[str, Any]]) -> None:
    counts = Counter(server["name"] for server in servers)
    assert [name for name, n in counts.items() if n > 1] == []


def test_tool_names_are_unique_within_a_server(servers: list[dict[str, Any]]) -> None:
    for server in servers:
        counts = Counter(tool["name"] for tool in server["tools"])
        assert [name for name, n in counts.items() if n > 1] == [], server["name"]


def test_function_names_fit_the_contract(servers: list[dict[str, Any]]) -> None:
    bad = [
        f"{server['name']}__{tool['name']}"
        for server in servers
        for tool in server["tools"]
        if not FUNCTION_NAME.match(f"{server['name']}__{tool['name']}")
    ]
    assert bad == []


def test_every_input_schema_is_an_object_schema(servers: list[dict[str, Any]]) -> None:
    for server in servers:
        for tool in server["tools"]:
            where = f"{server['name']}/{tool['name']}"
            schema = tool["inputSchema"]
            assert isinstance(schema, dict), where
            assert schema.get("type") == "object", where
            assert isinstance(schema.get("properties"), dict), where
            for name, prop in schema["properties"].items():
                assert isinstance(prop, dict) and "type" in prop, f"{where}.{name}"
            required = schema.get("required", [])
            assert isinstance(required, list), where
            assert set(required) <= set(schema["properties"]), where


def test_queries_are_shaped_and_labelled(queries: list[dict[str, Any]]) -> None:
    for query in queries:
        assert set(query) == {"query", "needed", "kind"}, query
        assert nonempty_text(query["query"]), query
        needed = query["needed"]
        assert isinstance(needed, list) and needed, query["query"]
        for pair in needed:
            assert isinstance(pair, list) and len(pair) == 2, query["query"]
            assert all(nonempty_text(part) for part in pair), query["query"]
        assert len({tuple(pair) for pair in needed}) == len(needed), query["query"]
        assert query["kind"] == ("multi" if len(needed) > 1 else "single"), query["query"]
    counts = Counter(query["query"] for query in queries)
    assert [text for text, n in counts.items() if n > 1] == []


def test_every_needed_tool_exists(
    servers: list[dict[str, Any]], queries: list[dict[str, Any]]
) -> None:
    known = {(server["name"], tool["name"]) for server in servers for tool in server["tools"]}
    missing = [
        (query["query"], pair)
        for query in queries
        for pair in query["needed"]
        if tuple(pair) not in known
    ]
    assert missing == []


def test_counts(servers: list[dict[str, Any]], queries: list[dict[str, Any]]) -> None:
    assert 25 <= len(servers) <= 35
    assert sum(len(server["tools"]) for server in servers) >= 300
    assert len(queries) >= 150
    assert sum(query["kind"] == "multi" for query in queries) >= 50
    # the queries reach most servers, not a favourite few
    used = {server for query in queries for server, _ in query["needed"]}
    assert len(used) >= 0.8 * len(servers)
