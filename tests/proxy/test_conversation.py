"""The client's messages as a vault chat and back (smart_context_hosts/proxy/conversation.py),
which chat a request belongs to (identity.py), and the reply read on the side (replies.py)."""

from __future__ import annotations

import itertools
import json

from smart_context.paths import check_chat_id
from smart_context_hosts.proxy.conversation import merge, paired_tools, split, wire_form
from smart_context_hosts.proxy.identity import background_task, prefix_chat, which_chat
from smart_context_hosts.proxy.note import summary
from smart_context_hosts.proxy.replies import StreamReader, error_said, whole_reply

NOW = "2026-11-26T09:00:00.000+00:00"


def ids() -> itertools.count[int]:
    return itertools.count(1)


def new_id_from(counter: itertools.count[int]) -> str:
    return f"n{next(counter)}"


def u(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_split_keeps_the_system_prompt_apart_and_the_tool_round_after_the_message() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    parts = split(
        [{"role": "system", "content": "Be kind."}, u("hi"), a("hello"), u("add"), call, result]
    )
    assert parts is not None
    assert parts.lead == [{"role": "system", "content": "Be kind."}]
    assert parts.history == [u("hi"), a("hello")]
    assert parts.message == u("add") and parts.text == "add"
    assert parts.tail == [call, result]


def test_split_reads_text_parts_and_refuses_what_has_no_user_text() -> None:
    parts = split(
        [
            u("x"),
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:"}},
                ],
            },
        ]
    )
    assert parts is not None and parts.text == "look"
    assert split([{"role": "system", "content": "s"}]) is None
    assert split([u("   ")]) is None
    assert split("not a list") is None
    assert split([u("x"), "not a message"]) is None


def test_merge_appends_what_is_new_and_keeps_stored_ids_and_records() -> None:
    counter = ids()
    first = merge([], [u("hi")], lambda: new_id_from(counter), NOW)
    assert [m["id"] for m in first.messages] == ["n1"] and first.kept == 0
    stored = [*first.messages, {**a("hello"), "id": "r1", "smart_context": {"mode": "full"}}]
    second = merge(stored, [u("hi"), a("hello"), u("and?")], lambda: new_id_from(counter), NOW)
    assert [m["id"] for m in second.messages] == ["n1", "r1", "n2"]
    assert second.messages[1]["smart_context"] == {"mode": "full"}
    assert (second.kept, second.dropped) == (2, 0)


def test_merge_lets_the_client_win_after_an_edit_and_on_a_regenerated_reply() -> None:
    counter = ids()
    stored = [
        {**u("one"), "id": "s1"},
        {**a("reply one"), "id": "s2"},
        {**u("two"), "id": "s3"},
        {**a("reply two"), "id": "s4"},
    ]
    edited = merge(
        stored, [u("one"), a("reply one"), u("TWO, edited")], lambda: new_id_from(counter), NOW
    )
    assert [m["id"] for m in edited.messages] == ["s1", "s2", "n1"]
    assert edited.messages[-1]["content"] == "TWO, edited" and edited.dropped == 2
    regenerated = merge(
        stored, [u("one"), a("reply one"), u("two")], lambda: new_id_from(counter), NOW
    )
    assert [m["id"] for m in regenerated.messages] == ["s1", "s2", "s3"]
    assert regenerated.dropped == 1  # the reply the client threw away


def test_a_reply_the_client_reformatted_keeps_its_id_and_record() -> None:
    stored = [
        {**u("q"), "id": "s1"},
        {**a("  the   answer "), "id": "s2", "smart_context": {"x": 1}},
    ]
    same_words = merge(stored, [u("q"), a("the answer"), u("next")], lambda: "n", NOW)
    assert same_words.messages[1] == stored[1]
    trimmed = merge(stored, [u("q"), a("the ans"), u("next")], lambda: "n", NOW)
    assert trimmed.messages[1]["id"] == "s2" and trimmed.messages[1]["smart_context"] == {"x": 1}
    assert trimmed.messages[1]["content"] == "the ans"


def test_merge_skips_the_sidecars_own_notices_and_drops_them_with_what_follows() -> None:
    stored = [
        {**u("q"), "id": "s1"},
        {
            "role": "assistant",
            "content": "The model server answered 429",
            "id": "e1",
            "error": "429",
        },
    ]
    retried = merge(stored, [u("q")], lambda: "n", NOW)
    assert [m["id"] for m in retried.messages] == ["s1"] and retried.dropped == 0


def test_a_message_with_more_than_text_goes_back_upstream_exactly_as_it_came() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "see"}], "name": "ana"}
    stored = merge([], [message], lambda: "n1", NOW).messages[0]
    assert stored["content"] == "see" and wire_form(stored) == message
    assert wire_form({"id": "x", "role": "assistant", "content": "hi", "smart_context": {}}) == a(
        "hi"
    )
    again = merge([stored], [message, u("more")], lambda: "n2", NOW)
    assert again.kept == 1


def test_paired_tools_never_sends_half_a_tool_exchange() -> None:
    call = {"role": "assistant", "content": "let me look", "tool_calls": [{"id": "c1"}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "found"}
    assert paired_tools([u("q"), call, result]) == [u("q"), call, result]
    assert paired_tools([u("q"), result]) == [u("q")]  # its call was filtered out
    assert paired_tools([u("q"), call]) == [u("q"), a("let me look")]  # its result was
    assert (
        paired_tools([{"role": "assistant", "content": None, "tool_calls": [{"id": "c2"}]}]) == []
    )


def test_which_chat_reads_headers_then_metadata_then_user_and_never_a_path() -> None:
    assert which_chat({"x-smart-context-chat": "trip"}, {}).chat_id == "trip"  # type: ignore[union-attr]
    webui = which_chat({"x-openwebui-chat-id": "6f1c-22"}, {"user": "ana"})
    assert webui is not None and (webui.chat_id, webui.source) == (
        "6f1c-22",
        "header x-openwebui-chat-id",
    )
    named = which_chat({"x-librechat-conversation": "c9"}, {}, ["X-LibreChat-Conversation"])
    assert named is not None and named.chat_id == "c9"
    meta = which_chat({}, {"metadata": {"conversation_id": "abc"}, "user": "ana"})
    assert meta is not None and meta.chat_id == "abc"
    assert which_chat({}, {"user": "ana"}) is None  # a person, not a conversation: on request
    person = which_chat({}, {"user": "ana"}, user_chats=True)
    assert person is not None and (person.chat_id, person.source) == ("ana", "user")
    assert which_chat({}, {}) is None and which_chat({}, {"user": "  "}, user_chats=True) is None
    for hostile in ("../../etc", "ana@example.com", "x" * 500, "a/b", "\u0000"):
        chat = which_chat({"x-smart-context-chat": hostile}, {})
        assert chat is not None and chat.chat_id.startswith("h-")
        assert check_chat_id(chat.chat_id) == chat.chat_id
    assert which_chat({"x-smart-context-chat": "../../etc"}, {}) == which_chat(
        {"x-smart-context-chat": "../../etc"}, {}
    )


def test_the_prefix_guess_is_one_chat_per_system_prompt_and_first_message() -> None:
    one = split([{"role": "system", "content": "S"}, u("plan a trip")])
    later = split([{"role": "system", "content": "S"}, u("plan a trip"), a("sure"), u("in May")])
    other = split([{"role": "system", "content": "T"}, u("plan a trip")])
    assert one and later and other
    assert prefix_chat(one) == prefix_chat(later) != prefix_chat(other)


def test_open_webui_background_tasks_are_recognised() -> None:
    task = {"stream": False, "messages": [u("### Task:\nGenerate a concise title...")]}
    assert background_task({}, task) is not None
    assert background_task({}, {**task, "stream": True}) is None
    assert background_task({}, {**task, "tools": [{"type": "function"}]}) is None
    assert background_task({}, {"messages": [u("hi"), u("### Task: x")]}) is None
    assert background_task({"x-openwebui-task": "title_generation"}, {"messages": [u("hi")]})


def test_a_stream_is_read_piece_by_piece_whatever_the_cuts() -> None:
    chunks = [
        {"model": "m1", "choices": [{"delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"delta": {"content": "Hello, "}}]},
        {"choices": [{"delta": {"content": "wörld"}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a"'}}
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
    ]
    data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
    for size in (1, 7, len(data)):
        reader = StreamReader()
        for start in range(0, len(data), size):
            reader.feed(data[start : start + size])
        answer = reader.close()
        assert answer.text == "Hello, wörld" and answer.model == "m1" and answer.finished
        assert answer.tool_calls[0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
        assert (answer.prompt_tokens, answer.completion_tokens) == (12, 3)


def test_what_cannot_be_read_is_left_out_never_raised() -> None:
    reader = StreamReader()
    reader.feed(b'data: {not json\n\ndata: [1, 2]\n\n: keep-alive\n\ndata: {"choices": [7]}\n\n')
    answer = reader.close()
    assert answer.text == "" and not answer.finished
    assert whole_reply(b"<html>bad gateway</html>").text == ""
    whole = whole_reply(
        json.dumps(
            {"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": True}}
        ).encode()
    )
    assert whole.text == "ok" and whole.prompt_tokens is None


def test_the_summary_header_can_carry_no_label_an_attacker_wrote() -> None:
    record = {
        "usage": {"sent_tokens": 1204, "full_tokens": 18930},
        "active_topics": ["Sourdough\r\nX-Evil: 1", "Café ☕", "A", "B", "C"],
    }
    note = summary(record)
    assert note.startswith(
        "sent 1,204 of 18,930 tokens; filter: Sourdough%0D%0AX-Evil: 1, Caf%C3%A9"
    )
    assert note.endswith("and 1 more") and note.isascii() and "\r" not in note and "\n" not in note
    assert summary({"mode": "full", "usage": "not a dict"}) == "mode full"


def test_an_estimated_count_says_so_in_the_header() -> None:
    """A model without an offline tokenizer is counted by an estimate that the server's counts
    calibrate: "of M" then moved down while the chat grew (15,855 -> 15,020)."""
    usage = {"sent_tokens": 1204, "full_tokens": 15020, "counted_with": "estimate"}
    assert summary({"usage": usage}) == "sent ~1,204 of ~15,020 tokens (est.)"
    exact = usage | {"counted_with": "o200k_base"}
    assert summary({"usage": exact}) == "sent 1,204 of 15,020 tokens"


CACHE = {
    "kind": "openai",
    "read": 0.1,
    "write": 1.0,
    "cached_estimate": 7900,
    "plain_cached_estimate": 18000,
    "plain_tokens": 18957,
}


def test_the_header_shows_the_estimated_cache_and_the_bill_beside_the_plain_clients() -> None:
    record = {
        "usage": {"sent_tokens": 8458, "full_tokens": 18957},
        "cache": CACHE,
        "active_topics": ["Kyoto"],
    }
    assert summary(record) == (
        "sent 8,458 of 18,957 tokens; cached ~7,900 (est.); bill 1,348 vs plain 2,757 "
        "(saved 51%); filter: Kyoto"
    )
    lost = record | {"cache": CACHE | {"cached_estimate": 0, "plain_cached_estimate": 18900}}
    assert summary(lost).endswith("bill 8,458 vs plain 1,947 (lost 334%); filter: Kyoto")
    # no cache upstream (or no cache part yet): the bill is the tokens sent, said once
    uncached = record | {"cache": {"kind": "none", "read": 1.0}}
    assert summary(uncached) == "sent 8,458 of 18,957 tokens; filter: Kyoto"
    assert summary({"usage": record["usage"]}) == "sent 8,458 of 18,957 tokens"
    hostile = record | {"cache": {"kind": "openai\r\nX-Evil: 1", "read": "\n"}}
    assert summary(hostile) == "sent 8,458 of 18,957 tokens; filter: Kyoto"
    assert all(summary(r).isascii() for r in (record, lost, uncached, hostile))


def test_an_upstream_error_is_stored_in_words() -> None:
    said = b'{"error": {"message": "Rate limit   reached.", "type": "requests"}}'
    assert error_said(429, said) == "The model server answered 429: Rate limit reached."
    assert error_said(502, b"<html>Bad   gateway</html>") == (
        "The model server answered 502: <html>Bad gateway</html>"
    )
    assert error_said(500, b"") == "The model server answered 500."
    assert error_said(500, b"\xff\xfe" * 400).endswith("…")  # not UTF-8, long: replaced, cut
    assert error_said(400, b'{"error": "bad model"}') == "The model server answered 400: bad model"


def test_a_title_is_read_from_the_answer_to_open_webuis_title_call() -> None:
    from smart_context_hosts.proxy.titles import asks_title, title_in

    def answer(content: object) -> bytes:
        return json.dumps({"choices": [{"message": {"content": content}}]}).encode()

    assert title_in(answer('{ "title": "Stock Trends" }')) == "Stock Trends"
    assert title_in(answer('Sure! {"title": "  \\"Remote  Work\\" "}')) == "Remote Work"
    for bad in ("no title", '{"title": 3}', '{"name": "x"}', None, '{"title": "   "}'):
        assert title_in(answer(bad)) is None
    assert title_in(b"not json") is None and title_in(b'{"choices": []}') is None
    assert len(title_in(answer(json.dumps({"title": "word " * 100}))) or "") <= 80
    task = "### Task:\nGenerate a concise title summarizing the chat history."
    assert asks_title({"messages": [{"role": "user", "content": task}]})
    tags = "### Task:\nGenerate 1-3 broad tags categorizing the main themes"
    assert not asks_title({"messages": [{"role": "user", "content": tags}]})
    assert not asks_title({"messages": [{"role": "user", "content": "A title for my essay?"}]})
