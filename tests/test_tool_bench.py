"""The ToolLens benchmark's reading of the data: endpoints as MCP tools, and how picks count."""

from __future__ import annotations

import json

import pytest

from benchmarks.public.bench_tools import endpoint, identifier, mcp_servers
from benchmarks.tool_picks import measure
from smart_context.mcp.config import function_name, valid_server_name

LINE = {
    "_id": "7",
    "text": "category_name:Food, tool_name:Nutrition by API-Ninjas, api_name:/v1/nutrition, "
    "api_description:API Ninjas Nutrition API endpoint., required_params: "
    + json.dumps([{"name": "query", "type": "STRING", "description": "Text, e.g. [bacon]"}])
    + ", optional_params: "
    + json.dumps([{"name": "maxResults", "type": "NUMBER", "description": ""}])
    + ', return_schema: {"name": "str"}',
}


def test_a_corpus_line_becomes_an_mcp_tool() -> None:
    e = endpoint(LINE)
    assert (e.api, e.name, e.description) == (
        "Nutrition by API-Ninjas",
        "/v1/nutrition",
        "API Ninjas Nutrition API endpoint.",
    )
    servers, keys = mcp_servers([e, endpoint({**LINE, "_id": "8"})])
    assert keys == {
        "7": ("nutrition_by_api_ninjas", "v1_nutrition"),
        "8": (
            "nutrition_by_api_ninjas",
            "v1_nutrition_2",  # a second endpoint of the same name gets its own
        ),
    }
    tool = servers[0].tools[0]
    assert tool.input_schema["required"] == ["query"]
    assert tool.input_schema["properties"]["maxResults"]["type"] == "number"


def test_names_are_valid_for_the_model_however_long() -> None:
    server = identifier("A Very Long Name Of Some Public Web API With Many Words", 32)
    assert valid_server_name(server) and len(server) <= 32
    tool = identifier("Get Distance By City, State, Country In Km " * 3, 62 - len(server))
    assert function_name(server, tool) is not None
    assert identifier("!!!", 10) == "api"


def test_a_multi_tool_query_counts_the_share_of_its_tools_found() -> None:
    a, b, c, x = ("s", "a"), ("s", "b"), ("s", "c"), ("s", "x")
    figures = measure([[a, x, b, x, x, c], [], [a]], [{a, b, c}, {a}, {a}], k=5)
    assert figures["recall"] == pytest.approx((2 / 3 + 0 + 1) / 3)  # c is sixth: not in the 5
    assert figures["precision"] == pytest.approx((3 / 6 + 0 + 1) / 3)  # no pick: 0
    assert figures["picks"] == pytest.approx(7 / 3)
