"""Item: identity, the priority label, order, what is indexed, and a hash of only that."""

from __future__ import annotations

import dataclasses

import pytest

from smart_context.items.model import DEFAULT_PRIORITY, Item, ItemProblem, index_text, spoken


def test_the_key_names_type_server_and_name() -> None:
    assert Item("rule", "Code Style").key == "rule::Code Style"
    assert Item("tool", "read_file", server_name="files").key == "tool:files:read_file"


def test_a_file_item_defaults_to_manual_enabled_and_last() -> None:
    item = Item("reference", "Kyoto")
    assert (item.include, item.enabled, item.priority) == ("manual", True, DEFAULT_PRIORITY)
    assert item.priority_label == "999"


def test_the_priority_label_has_three_digits() -> None:
    assert Item("rule", "a", priority=1).priority_label == "001"
    assert Item("rule", "a", priority=0).priority_label == "000"
    assert Item("rule", "a", priority=42).priority_label == "042"


def test_items_are_frozen_and_hashable() -> None:
    item = Item("rule", "a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.name = "b"  # type: ignore[misc]
    assert len({item, Item("rule", "a")}) == 1


def test_a_rule_is_indexed_as_name_description_and_body() -> None:
    rule = Item("rule", "Code Style", description="How code looks", text="Use type hints.")
    assert index_text(rule) == "Code Style: How code looks\n\nUse type hints."


def test_without_a_description_the_name_stands_alone() -> None:
    assert index_text(Item("reference", "Kyoto", text="Temples.")) == "Kyoto\n\nTemples."
    assert index_text(Item("reference", "Kyoto")) == "Kyoto"


def test_a_tool_is_indexed_with_its_server_and_parameters() -> None:
    tool = Item(
        "tool",
        "read_file",
        description="Read a file",
        text="path (string, required): Which file",
        server_name="files",
    )
    # made without its schema: the parameters as it was given them
    assert index_text(tool) == "files read file: Read a file\n\npath (string, required): Which file"


def test_a_tool_is_indexed_by_its_names_in_words_and_parameters_without_types() -> None:
    schema = {
        "type": "object",
        "properties": {"maxResults": {"type": "integer", "description": "At most"}, "q": {}},
        "required": ["q"],
    }
    tool = Item("tool", "searchIssues", "Find issues", server_name="git-hub", input_schema=schema)
    assert index_text(tool) == "git hub search issues: Find issues\n\nmax results: At most\nq"
    assert spoken("read_file") == spoken("readFile") == spoken("read-file") == "read file"
    assert spoken("v1/nutrition") == "v1 nutrition"
    assert spoken("café_crème") == "café crème"
    assert spoken("cafe\u0301_cre\u0300me") == "café crème"  # accents as combining marks
    assert spoken("__") == "__"  # no word in it: left as it is


def test_the_content_hash_follows_only_the_indexed_text() -> None:
    base = Item("rule", "a", description="d", text="body")
    moved = dataclasses.replace(base, priority=1, include="always", enabled=False, source="x")
    assert moved.content_hash == base.content_hash
    for changed in (
        dataclasses.replace(base, text="other body"),
        dataclasses.replace(base, description="e"),
        dataclasses.replace(base, name="b"),
    ):
        assert changed.content_hash != base.content_hash
    assert len(base.content_hash) == 32 and int(base.content_hash, 16) >= 0


def test_a_tool_needs_a_server_and_only_a_tool_has_one() -> None:
    with pytest.raises(ValueError, match="server_name"):
        Item("tool", "read_file")
    with pytest.raises(ValueError, match="server_name"):
        Item("rule", "a", server_name="files")


def test_type_and_include_are_checked() -> None:
    with pytest.raises(ValueError, match="item type"):
        Item("note", "a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="include"):
        Item("rule", "a", include="sometimes")  # type: ignore[arg-type]


def test_rules_then_references_then_tools_by_priority_then_name() -> None:
    items = [
        Item("tool", "b", server_name="web"),
        Item("tool", "z", server_name="files"),
        Item("reference", "Alpha", priority=5),
        Item("rule", "beta"),
        Item("rule", "Alpha"),
        Item("rule", "zeta", priority=1),
        Item("rule", "alpha"),
    ]
    ordered = [i.key for i in sorted(items, key=Item.sort_key)]
    assert ordered == [
        "rule::zeta",
        "rule::Alpha",
        "rule::alpha",
        "rule::beta",
        "reference::Alpha",
        "tool:files:z",
        "tool:web:b",
    ]


def test_a_problem_reads_as_file_then_message() -> None:
    problem = ItemProblem("rules/a.md", "priority must be a whole number", "priority")
    assert str(problem) == "rules/a.md: priority must be a whole number"
    assert not problem.skipped
