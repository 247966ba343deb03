"""A vault in tmp_path and a way to write its rules and references as a person would."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_context.items.files import load_items
from smart_context.items.model import Item, ItemProblem


class Vault:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, source: str, content: str | bytes) -> Path:
        path = self.root / source
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
        return path

    def load(self, **folders: str) -> tuple[list[Item], list[ItemProblem]]:
        return load_items(self.root, **folders)

    def only_item(self, source: str, content: str | bytes) -> tuple[Item, list[ItemProblem]]:
        """The item of one file written alone, and its problems."""
        self.write(source, content)
        items, problems = self.load()
        assert len(items) == 1, problems
        return items[0], problems

    def skipped(self, source: str, content: str | bytes) -> ItemProblem:
        """The one problem of a file that gave no item."""
        self.write(source, content)
        items, problems = self.load()
        assert items == []
        assert len(problems) == 1 and problems[0].skipped and problems[0].source == source
        return problems[0]


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    root = tmp_path / "vault"
    root.mkdir()
    return Vault(root)
