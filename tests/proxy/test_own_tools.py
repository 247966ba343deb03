"""The plugins' own tools through the proxy (smart_context_hosts/proxy/own_tools.py): which go
upstream, and a stream with our calls taken out."""

from __future__ import annotations

import json
from typing import Any

from smart_context_hosts.proxy.own_tools import StreamFilter, own_tools


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def test_only_tools_that_may_run_unasked_go_beside_the_clients_own() -> None:
    metadata = {
        "tools": [tool("smart_context__retrieve_context"), tool("files__read"), tool("web__get")],
        "auto_approve_servers": ["smart_context"],
    }
    vault_says = {"files": True, "web": None}

    def may_run(server: str, unasked: frozenset[str]) -> bool:
        said = vault_says.get(server)
        return said if said is not None else server in unasked

    own = own_tools(metadata, [tool("get_weather")], may_run)
    assert own.names == {"smart_context__retrieve_context", "files__read"}  # web needs a person
    assert own_tools(metadata, [], may_run).definitions == []  # the client's model takes none
    assert own_tools(metadata, None, may_run).definitions == []
    clash = own_tools(metadata, [tool("files__read")], may_run)
    assert clash.names == {"smart_context__retrieve_context"}  # the client's name wins


def sse(*chunks: Any) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def delta(**fields: Any) -> dict[str, Any]:
    finish = fields.pop("finish", None)
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def call(index: int, name: str | None = None, arguments: str = "", id_: str | None = None) -> Any:
    out: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if name:
        out["function"]["name"] = name
        out["id"] = id_ or f"c{index}"
    return out


def read(
    data: bytes, names: frozenset[str], size: int, last: bool = False
) -> tuple[list[Any], StreamFilter]:
    own = StreamFilter(names, last_round=last)
    out = b"".join(own.feed(data[i : i + size]) for i in range(0, len(data), size)) + own.close()
    events = [line[6:] for line in out.decode().split("\n") if line.startswith("data: ")]
    return [e if e == "[DONE]" else json.loads(e) for e in events], own


def test_our_calls_are_held_back_and_the_turn_asked_again() -> None:
    names = frozenset({"smart_context__retrieve_context"})
    data = sse(
        delta(role="assistant", content="Let me look. "),
        delta(tool_calls=[call(0, "smart_context__retrieve_context", '{"query"')]),
        delta(tool_calls=[call(0, arguments=': "x"}')]),
        delta(finish="tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
    )
    for size in (1, 5, len(data)):
        events, own = read(data, names, size)
        assert events == [delta(role="assistant", content="Let me look. ")]
        assert own.must_ask_again() and "".join(own.text) == "Let me look. "
        assert own.calls == [
            {
                "id": "c0",
                "type": "function",
                "function": {
                    "name": "smart_context__retrieve_context",
                    "arguments": '{"query": "x"}',
                },
            }
        ]
    events, own = read(data, names, 7, last=True)  # no round left: the end is shown, as a stop
    assert events[-1] == "[DONE]" and not own.must_ask_again()
    assert [e["choices"][0]["finish_reason"] for e in events[1:-1] if e["choices"]] == ["stop"]


def test_the_clients_calls_pass_renumbered_and_ours_are_dropped() -> None:
    names = frozenset({"smart_context__retrieve_context"})
    data = sse(
        delta(tool_calls=[call(0, "smart_context__retrieve_context", "{}")]),
        delta(tool_calls=[call(1, "get_weather", '{"city": "Kyoto"}')]),
        delta(finish="tool_calls"),
    )
    events, own = read(data, names, 3)
    assert events[0]["choices"][0]["delta"]["tool_calls"] == [
        call(0, "get_weather", '{"city": "Kyoto"}', "c1")
    ]
    assert events[-2] == delta(finish="tool_calls") and events[-1] == "[DONE]"
    assert not own.must_ask_again()


def test_a_stream_without_our_calls_passes_byte_for_byte() -> None:
    data = sse(
        delta(content="hi"), delta(tool_calls=[call(0, "get_weather", "{}")]), delta(finish="stop")
    )
    own = StreamFilter(frozenset({"x__y"}), last_round=False)
    assert b"".join(own.feed(data[i : i + 4]) for i in range(0, len(data), 4)) + own.close() == data
