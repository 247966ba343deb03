"""A chat request's body read from where the chat's last body ended
(smart_context_hosts/proxy/body.py): always what ``json.loads`` reads, and quick only when the
new body begins as the last one did."""

from __future__ import annotations

import json
from typing import Any

import pytest

from smart_context_hosts.proxy.body import Bodies, Body, Known, read_body


def turn(messages: list[dict[str, Any]], **members: Any) -> bytes:
    return json.dumps({"model": "m", "messages": messages, **members}).encode()


def msgs(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} é"}
        for i in range(n)
    ]


def known_of(raw: bytes) -> Known:
    body = read_body(raw)
    assert body is not None and body.known is not None
    return body.known


def test_a_body_continuing_the_last_reads_as_json_loads_and_reuses_the_messages_parsed() -> None:
    first = turn(msgs(3), stream=True)
    known = known_of(first)
    assert known.prefix == first[: first.index(b"]")]
    assert known.before == {"model": "m"}
    second = turn(msgs(5), stream=False, tools=[{"type": "function"}])
    body = read_body(second, known)
    assert body is not None and body.known is not None
    assert body.data == json.loads(second)
    assert all(a is b for a, b in zip(body.data["messages"], known.messages, strict=False))
    assert body.known.prefix == second[: second.index(b"]")]
    third = turn(msgs(7))
    again = read_body(third, body.known)
    assert again is not None and again.data == json.loads(third)
    assert again.data["messages"][0] is known.messages[0]


@pytest.mark.parametrize(
    "later",
    [
        turn([*msgs(2), {"role": "user", "content": "edited"}, *msgs(5)[3:]]),  # an edit
        turn(msgs(3)),  # nothing new
        turn(msgs(2)),  # shorter
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}',  # cut short
        turn(msgs(5))[:-1] + b', "messages": []}',  # messages twice: the later wins
        turn(msgs(5)) + b" []",  # more after the object
        turn(msgs(5)).replace(b'"model": "m", ', b""),  # the members before changed
        b"[1, 2]",
        b"not json",
        b"\xff\xfe",
        b'{"messages": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",  # nested past the limit
    ],
)
def test_any_other_body_reads_as_json_loads_does(later: bytes) -> None:
    known = known_of(turn(msgs(3)))
    try:
        expected = json.loads(later)
    except (ValueError, RecursionError):
        expected = None
    body = read_body(later, known)
    assert (body.data if body is not None else None) == expected


@pytest.mark.parametrize(
    "raw",
    [
        b' \n{ "messages" :\n[ {"role":"user","content":"a"} ,\n{"role":"user","content":"b"}'
        b'\n] ,"n":1 }\n',
        json.dumps(
            {"messages": [{"role": "user", "content": "\u65e5\u672c"}]}, ensure_ascii=False
        ).encode(),
        b'{"messages": [], "model": "m"}',
        b'{"messages": "text"}',
        b"{}",
        b'{"a": NaN, "messages": [1]}',
        b'{"messages": [1], "messages": [2]}',
        '\ufeff{"messages": [1]}'.encode(),
    ],
)
def test_a_first_body_reads_as_json_loads_does(raw: bytes) -> None:
    body = read_body(raw)
    assert body is not None
    assert json.dumps(body.data) == json.dumps(json.loads(raw))
    if body.known is not None:  # the next body may continue from the end of the last message
        tail = raw[len(body.known.prefix) :].lstrip()
        assert tail.startswith(b"]")
        assert body.known.messages == body.data["messages"]


def test_a_body_written_with_other_spacing_and_characters_continues_too() -> None:
    def written(n: int) -> bytes:
        data = {"messages": msgs(n), "model": "m"}
        return json.dumps(data, ensure_ascii=False, indent=1).encode()

    known = known_of(written(2))
    body = read_body(written(4), known)
    assert body is not None and body.known is not None
    assert body.data == json.loads(written(4))
    assert body.data["messages"][0] is known.messages[0]
    assert read_body(written(6), body.known) == Body(json.loads(written(6)), known_of(written(6)))


def test_the_bodies_kept_are_bounded_by_chats_and_bytes() -> None:
    bodies = Bodies(max_chats=2, max_bytes=1000)
    small = known_of(turn(msgs(2)))
    big = known_of(turn(msgs(40)))
    assert len(big.prefix) > 1000
    bodies.put("a", small)
    bodies.put("b", small)
    bodies.put("c", small)
    assert bodies.get("a") is None and bodies.get("c") is small
    bodies.put("d", big)  # over the bound alone: not kept, and nothing else lost for it
    assert bodies.get("d") is None and bodies.get("b") is small
    bodies.put("b", small)
    assert bodies.get("b") is small and bodies.get("c") is small
