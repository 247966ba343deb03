"""A chat request's body read from where the chat's last body ended
(smart_context_hosts/proxy/body.py): always what ``json.loads`` reads, and quick only when the
new body begins as the last one did."""

from __future__ import annotations

import json
import random
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
    second = turn(msgs(5), stream=False, tools=[{"type": "function"}], temperature=float("nan"))
    body = read_body(second, known)
    assert body is not None and body.known is not None
    assert same(body.data, json.loads(second))
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
    assert same(body.data if body is not None else None, expected)


def same(a: Any, b: Any) -> bool:
    """Equal values with their members in the same order (NaN equal to NaN)."""
    return json.dumps(a) == json.dumps(b)


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
        '{"messages": [{"role": "user", "content": "hi"}]}'.encode("utf-16-le"),
        '{"messages": [{"role": "user", "content": "hi"}]}'.encode("utf-32"),
    ],
)
def test_a_first_body_reads_as_json_loads_does(raw: bytes) -> None:
    body = read_body(raw)
    assert body is not None
    assert same(body.data, json.loads(raw))
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


def test_random_turns_read_as_json_loads_does() -> None:
    """Bodies of conversations as clients write them, each read on from the last, with edits,
    other spacing, other characters and numbers at the end of the last message; a client
    writes the same way for a while, then another takes over."""
    rng = random.Random(7)
    values: list[Any] = [1, 12, -0.5, 1e5, "x", "é\u65e5", None, True, [], {}, [1, [2]], {"a": 1}]
    messages: list[Any] = []
    known = None
    continued = 0
    for turn_number in range(400):
        if turn_number % 40 == 0:  # another client
            ascii_only, indent = rng.random() < 0.5, rng.choice([None, 0, 2])
            before, after = rng.random() < 0.5, rng.random() < 0.5
        if messages and rng.random() < 0.1:  # an edit, or the conversation cut back
            messages[rng.randrange(len(messages))] = rng.choice(values)
        messages += [rng.choice([*values, *msgs(2)]) for _ in range(rng.randint(0, 2))]
        members: dict[str, Any] = {"model": "m"} if before else {}
        members["messages"] = messages
        if after:
            members["n"] = rng.choice(values)
        raw = json.dumps(members, ensure_ascii=ascii_only, indent=indent).encode()
        continued += known is not None and raw.startswith(known.prefix)
        body = read_body(raw, known)
        assert body is not None and same(body.data, json.loads(raw)), raw
        known = body.known or known
    assert continued > 200  # most turns were read on from the last
