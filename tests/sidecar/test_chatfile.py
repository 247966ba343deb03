"""The chat file's layout: appends in place, a journal that survives a crash, other layouts."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from smart_context_hosts.sidecar import chatfile
from smart_context_hosts.sidecar.memory import ChatMemory


def message(i: int) -> dict[str, Any]:
    return {"id": f"m{i}", "role": "user", "content": f"line {i}\nwith a newline and ] bracket"}


def test_the_layout_is_plain_json_and_is_recognised(tmp_path: Path) -> None:
    data = {"messages": [message(1), message(2)], "title": "T", "topics": [{"label": "A"}]}
    raw, layout = chatfile.render(data)
    assert json.loads(raw) == data
    parsed = chatfile.parse(raw)
    assert parsed.data == data and parsed.layout is not None
    assert (parsed.layout.end, parsed.layout.count) == (layout.end, 2)
    empty, _ = chatfile.render({"messages": []})
    assert chatfile.parse(empty).layout is not None


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({"messages": [message(1)], "title": "T"}, indent=2).encode(),
        json.dumps({"title": "T", "messages": [message(1)]}).encode(),
        # the head and the line count match, but the last "\n]" closes another key's list
        b'{"messages": [\n{"id": "a"},{"id": "b"}\n], "x": [1\n]}\n',
    ],
    ids=["indented", "messages-not-first", "bracket-elsewhere"],
)
def test_a_file_in_another_layout_is_not_changed_in_place(raw: bytes) -> None:
    parsed = chatfile.parse(raw)
    assert parsed.layout is None


ODD_FILES = [
    chatfile.render(
        {
            "messages": [message(1), 5, {"id": "m2", "score": float("nan"), "x": "é\u2028"}],
            "title": "T",
        }
    )[0],
    chatfile.render({"messages": []})[0],
    json.dumps({"messages": [message(1)], "title": "T"}, indent=2).encode(),
    b'{"messages": [\n{"id": "a"},{"id": "b"}\n], "x": [1\n]}\n',
    b'{"messages": [\n{"id": "a"}\n], "messages": [{"id": "b"}]}\n',  # named twice
    b'{"messages": [\n{"id": "a"} {"id": "b"}\n], "x": 1}\n',  # not JSON
    b'{"messages": [\n{"id": "a"}\n]}\n   ',
    b'{"messages": [ 5\n]}\n',  # its first message on the head's line
]


@pytest.mark.parametrize("raw", ODD_FILES, ids=range(len(ODD_FILES)))
def test_a_file_read_a_line_at_a_time_is_what_a_whole_parse_gives(raw: bytes) -> None:
    """Read with ``keep``, the sidecar's layout a message at a time and any other layout
    whole: the same data and count of odd values as ``json.loads``, or its error; the layout
    exactly when the file is what :func:`chatfile.render` writes of that data, with its line
    starts; in the layout, ``keep`` gets each message with where its JSON is."""
    seen: list[tuple[Any, tuple[int, int]]] = []

    def keep(value: Any, span: tuple[int, int]) -> Any:
        seen.append((value, span))
        return value

    odd: list[str] = []

    def constant(name: str) -> float:
        odd.append(name)
        return float(name.replace("Infinity", "inf"))

    try:
        data = json.loads(raw, parse_constant=constant)
    except ValueError as exc:
        with pytest.raises(chatfile.DamagedChatError, match=re.escape(str(exc))):
            chatfile.parse(raw, keep)
        return
    rendered, layout = chatfile.render(data)
    whole = chatfile.Parsed(data, layout if rendered == raw else None, len(odd))
    by_lines = chatfile.parse(raw, keep)
    assert json.dumps(by_lines.data) == json.dumps(whole.data)
    assert by_lines.odd_values == whole.odd_values
    assert (by_lines.layout is None) == (whole.layout is None)
    if whole.layout is None:
        return  # what keep was given of the lines before that showed is let go
    assert by_lines.layout is not None
    assert list(by_lines.layout.starts) == list(whole.layout.starts)
    assert by_lines.layout.tail == whole.layout.tail
    assert [json.dumps(v) for v, _ in seen] == [json.dumps(m) for m in whole.data["messages"]]
    assert [raw[a:b] for _, (a, b) in seen] == [chatfile.line_of(m) for m in whole.data["messages"]]


def test_a_change_in_place_gives_the_same_file_as_a_whole_write(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    data: dict[str, Any] = {"messages": [], "topics": [{"label": "A", "message_ids": ["x"]}]}
    layout = chatfile.write_whole(path, data)
    for i in range(3):
        data = {**data, "messages": [*data["messages"], message(i)], "updated_at": str(i)}
        layout = chatfile.write_change(path, layout, data)
        assert path.read_bytes() == chatfile.render(data)[0]
    data = {**data, "topics": []}  # the tail alone
    layout = chatfile.write_change(path, layout, data)
    assert json.loads(path.read_bytes()) == data
    assert not chatfile.journal_path(path).exists()


def test_nothing_is_written_when_nothing_changed(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    data = {"messages": [message(1)], "title": "T"}
    layout = chatfile.write_whole(path, data)
    before = path.stat().st_mtime_ns
    assert chatfile.write_change(path, layout, dict(data)) == layout
    assert path.stat().st_mtime_ns == before


def crash_while_applying(monkeypatch: pytest.MonkeyPatch, path: Path) -> tuple[bytes, bytes]:
    """Make a change crash once its journal is written: the original file and the wanted one."""
    data = {"messages": [message(1)], "title": "T"}
    layout = chatfile.write_whole(path, data)
    original = path.read_bytes()
    grown = {**data, "messages": [message(1), message(2)], "updated_at": "now"}

    def crash(target: Path, offset: int, payload: bytes) -> None:
        raise OSError("simulated crash")

    with monkeypatch.context() as patch:
        patch.setattr(chatfile, "_apply", crash)
        with pytest.raises(OSError, match="simulated"):
            chatfile.write_change(path, layout, grown)
    assert chatfile.journal_path(path).exists()
    return original, chatfile.render(grown)[0]


def test_a_crash_after_the_journal_is_finished_by_the_next_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.json"
    original, wanted = crash_while_applying(monkeypatch, path)
    path.write_bytes(wanted[: len(original) - 3])  # the file got part of the change
    assert chatfile.recover(path)
    assert path.read_bytes() == wanted and not chatfile.journal_path(path).exists()


def test_a_half_written_journal_is_dropped_and_the_file_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.json"
    original, _ = crash_while_applying(monkeypatch, path)
    journal = chatfile.journal_path(path)
    journal.write_bytes(journal.read_bytes()[:-6])  # the crash came while writing the journal
    assert not chatfile.recover(path)
    assert path.read_bytes() == original and not journal.exists()


async def test_memory_finishes_an_interrupted_write_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ".memory" / "c1.json"
    path.parent.mkdir()
    _, wanted = crash_while_applying(monkeypatch, path)
    assert await ChatMemory(tmp_path).load_chat("c1") == json.loads(wanted)


def test_values_json_cannot_carry_are_read_and_kept() -> None:
    parsed = chatfile.parse(b'{"messages": [{"id": "a", "score": NaN, "w": -Infinity}]}')
    assert parsed.odd_values == 2
    first = parsed.data["messages"][0]
    assert math.isnan(first["score"]) and first["w"] == -math.inf
    assert chatfile.finite(parsed.data) == {"messages": [{"id": "a", "score": None, "w": None}]}
    assert b"NaN" in chatfile.render(parsed.data)[0]  # a write keeps them as they were


async def test_memory_appends_in_place_and_sees_other_writers(tmp_path: Path) -> None:
    (tmp_path / ".memory").mkdir()
    path = tmp_path / ".memory" / "c1.json"
    path.write_text(json.dumps({"title": "Hand made", "messages": [message(0)]}, indent=1))
    memory = ChatMemory(tmp_path)
    before = await memory.append_message("c1", message(1), history=True)
    assert [m["id"] for m in before] == ["m0"]
    before[0]["content"] = "changed by the caller"  # a copy: the chat does not change
    inode = path.stat().st_ino
    await memory.append_message("c1", message(2), updates={"updated_at": "now"})
    assert path.stat().st_ino == inode  # changed in place, not replaced
    stored = json.loads(path.read_bytes())
    assert [m["id"] for m in stored["messages"]] == ["m0", "m1", "m2"]
    assert stored["messages"][0]["content"] == message(0)["content"]
    assert stored["title"] == "Hand made" and stored["updated_at"] == "now"
    # another program rewrites the file: the next read sees its version, not a remembered one
    path.write_text(json.dumps({"messages": [message(9)], "title": "Theirs"}))
    assert (await memory.load_chat("c1"))["title"] == "Theirs"
    await memory.append_message("c1", message(10))
    assert [m["id"] for m in json.loads(path.read_bytes())["messages"]] == ["m9", "m10"]


async def test_an_edit_through_update_chat_rewrites_the_file(tmp_path: Path) -> None:
    memory = ChatMemory(tmp_path)
    await memory.append_message("c1", message(1))
    await memory.append_message("c1", message(2))

    def edit(data: dict[str, Any]) -> dict[str, Any]:
        data["messages"][0]["content"] = "edited"  # the message is the caller's own copy
        return data

    await memory.update_chat("c1", edit)
    stored = json.loads((tmp_path / ".memory" / "c1.json").read_bytes())
    assert stored["messages"][0]["content"] == "edited"
    assert (await memory.load_chat("c1"))["messages"][0]["content"] == "edited"
