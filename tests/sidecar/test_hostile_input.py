"""Chat files that once cost a 500 or a lost message: deep nesting, lone surrogates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smart_context.sidecar.memory import DamagedChatError, chat_json, parse_chat


def test_deeply_nested_chat_file_is_damaged_not_a_crash() -> None:
    raw = ("[" * 100_000 + "]" * 100_000).encode()
    with pytest.raises(DamagedChatError, match="nested too deeply"):
        parse_chat(b'{"messages": ' + raw + b"}")


def test_lone_surrogate_in_a_chat_is_still_written(tmp_path: Path) -> None:
    data = {"messages": [{"id": "a", "role": "user", "content": "bad \udc80 text"}]}
    text = chat_json(data)
    text.encode("utf-8")  # would raise for the unescaped form
    assert parse_chat(text.encode())["messages"][0]["content"] == "bad \udc80 text"
    assert json.loads(chat_json({"x": "é"})) == {"x": "é"} and "é" in chat_json({"x": "é"})
