"""Chat files that once cost a 500 or a lost message: deep nesting, lone surrogates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smart_context_hosts.sidecar.chatfile import DamagedChatError, parse, render


def test_deeply_nested_chat_file_is_damaged_not_a_crash() -> None:
    raw = ("[" * 100_000 + "]" * 100_000).encode()
    with pytest.raises(DamagedChatError, match="nested too deeply"):
        parse(b'{"messages": ' + raw + b"}")


def test_lone_surrogate_in_a_chat_is_still_written(tmp_path: Path) -> None:
    data = {"messages": [{"id": "a", "role": "user", "content": "bad \udc80 text"}]}
    raw, _ = render(data)  # bytes: the unescaped form could not be encoded
    assert parse(raw).data["messages"][0]["content"] == "bad \udc80 text"
    readable = render({"messages": [], "x": "é"})[0]
    assert json.loads(readable) == {"messages": [], "x": "é"} and "é".encode() in readable
