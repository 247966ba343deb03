"""The example vault's rules and references: they load cleanly and show every include mode."""

from __future__ import annotations

from collections import Counter

from smart_context.items.chunks import chunk
from smart_context.items.files import load_items
from smart_context.items.model import index_text
from smart_context.resources import example_vault_dir


def test_the_example_rules_and_references_load_without_a_problem() -> None:
    items, problems = load_items(example_vault_dir())
    assert problems == []
    assert Counter(i.type for i in items) == {"rule": 6, "reference": 6}
    for item in items:
        assert item.description and item.text and item.enabled
        assert item.name != item.source.rsplit("/", 1)[-1].removesuffix(".md")  # named in full
        assert chunk(index_text(item))


def test_the_examples_show_every_include_mode_for_both_types() -> None:
    items, _ = load_items(example_vault_dir())
    for item_type in ("rule", "reference"):
        modes = {i.include for i in items if i.type == item_type}
        assert modes == {"always", "manual", "agent"}, item_type


def test_every_example_file_is_small() -> None:
    files = sorted(example_vault_dir().glob("r*/*.md"))
    assert len(files) == 12
    assert all(f.stat().st_size < 2048 for f in files)
