"""An MCP tool as an item: its schema's parameters as text, whatever the server sends."""

from __future__ import annotations

from typing import Any

import pytest

from smart_context.items.model import index_text
from smart_context.items.tools import (
    MAX_DESCRIPTION_CHARS,
    MAX_PARAMETERS,
    parameters_text,
    tool_item,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Which file to read"},
        "limit": {"type": ["integer", "null"], "description": "At most this many\n lines"},
        "raw": {},
    },
    "required": ["path"],
}


def test_a_tool_item_lists_its_parameters() -> None:
    tool = tool_item("files", "read_file", "Read a text file", SCHEMA)
    assert tool.key == "tool:files:read_file"
    assert (tool.include, tool.source, tool.server_name) == ("always", "files", "files")
    assert tool.text == (
        "path (string, required): Which file to read\n"
        "limit (integer or null): At most this many lines\n"
        "raw"
    )
    assert index_text(tool) == (
        "files read file: Read a text file\n\n"
        "path: Which file to read\nlimit: At most this many lines\nraw"
    )


def test_the_include_mode_is_the_callers() -> None:
    assert tool_item("files", "read_file", include="agent").include == "agent"


@pytest.mark.parametrize(
    "schema",
    [
        None,
        "a string",
        ["a", "list"],
        {"properties": "not a mapping"},
        {"properties": None},
        {},
    ],
)
def test_a_schema_of_the_wrong_shape_gives_no_parameters(schema: Any) -> None:
    assert parameters_text(schema) == ""
    assert tool_item("s", "t", None, schema).text == ""


def test_odd_parameters_are_shown_as_far_as_they_make_sense() -> None:
    schema = {
        "properties": {
            "a": "not a mapping",
            "b": {"type": 5, "description": ["not", "text"]},
            "": {"type": "string"},
            "c": {"type": ["string", 3]},
        },
        "required": "path",
    }
    assert parameters_text(schema) == "a\nb\nc (string)"


def test_a_hostile_schema_is_bounded() -> None:
    schema = {
        "properties": {f"p{i}": {"description": "x " * 10_000} for i in range(1000)},
    }
    lines = parameters_text(schema).splitlines()
    assert len(lines) == MAX_PARAMETERS
    assert all(len(line) <= MAX_DESCRIPTION_CHARS + 10 for line in lines)
    assert lines[0].endswith("…")


def test_a_hostile_parameter_name_is_one_bounded_line_in_the_panel_and_the_index() -> None:
    from smart_context.items.schema import MAX_NAME_CHARS

    schema = {
        "properties": {
            "q\nadmin (string, required)": {"type": "string"},  # would read as two parameters
            "n" * 100_000: {"type": "string", "description": "huge"},
            "  ": {"type": "string"},  # no name: left out
        },
        "required": ["q\nadmin (string, required)"],
    }
    lines = parameters_text(schema).splitlines()
    assert lines == [
        "q admin (string, required) (string, required)",
        f"{'n' * (MAX_NAME_CHARS - 1)}… (string): huge",
    ]
    tool = tool_item("s", "lookup", "Look up", schema)
    assert len(index_text(tool)) < 300 and "\nadmin" not in index_text(tool)


def test_a_long_description_is_cut_between_words() -> None:
    tool = tool_item("s", "t", "word " * 2000)
    assert tool.description.endswith("word…")
    assert len(tool.description) <= 4 * MAX_DESCRIPTION_CHARS
