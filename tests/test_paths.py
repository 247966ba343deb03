"""Chat ids may only name files directly inside .memory/."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_context.errors import ChatIdError
from smart_context.paths import chat_file, check_chat_id, embeddings_file


@pytest.mark.parametrize(
    "bad",
    [
        "../../etc",
        "..",
        "a/b",
        "a\\b",
        "/etc/passwd",
        "",
        ".hidden",
        "x" * 200,
        "a..b",
        None,
        5,
        "con\x00",
        "naïve",
    ],
)
def test_hostile_chat_ids_are_refused(bad: object) -> None:
    with pytest.raises(ChatIdError):
        check_chat_id(bad)


@pytest.mark.parametrize("good", ["abc", "chat-2026_11-v2", "A1"])
def test_plain_ids_map_inside_memory(tmp_path: Path, good: str) -> None:
    memory = (tmp_path / ".memory").resolve()
    assert chat_file(tmp_path, good).resolve().parent == memory
    assert embeddings_file(tmp_path, good).name == f"{good}.embeddings.json"
