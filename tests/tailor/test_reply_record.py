"""The record on Tailor's saved reply: which reply gets it, and the streamed requests' records
kept until their output phase."""

from __future__ import annotations

from typing import Any

from smart_context_hosts.tailor.pipeline import KEPT_STREAMS, RECORD, StreamedRecords, with_record

RECORD_A = {"mode": "full", "usage": {"sent_tokens": 10, "full_tokens": 10}}


def chat(*replies: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"id": "u1", "role": "user", "content": "hi"}, *replies]}


def test_the_reply_tailor_names_gets_the_record() -> None:
    data = chat(
        {"id": "a1", "role": "assistant", "content": "same"},
        {"id": "a2", "role": "assistant", "content": "same"},
    )
    out = with_record(data, "a1", "same", RECORD_A)
    assert out["messages"][1][RECORD] == RECORD_A and RECORD not in out["messages"][2]


def test_without_an_id_only_the_last_message_can_be_the_reply() -> None:
    data = chat(
        {"id": "a1", "role": "assistant", "content": "same"},
        {"id": "a2", "role": "assistant", "content": "same"},
    )
    out = with_record(data, None, "same", RECORD_A)
    assert [RECORD in m for m in out["messages"]] == [False, False, True]
    # the turn was not saved (another memory plugin): an older reply of that text is not it
    data = chat(
        {"id": "a1", "role": "assistant", "content": "same"},
        {"id": "u2", "role": "user", "content": "next"},
    )
    assert with_record(data, None, "same", RECORD_A) == data


def test_an_unknown_reply_a_user_message_or_a_recorded_reply_is_left_alone() -> None:
    earlier = {"mode": "filtered"}
    data = chat({"id": "a1", "role": "assistant", "content": "x", RECORD: earlier})
    assert with_record(data, "nope", "x", RECORD_A) == data
    assert with_record(data, "u1", "hi", RECORD_A) == data
    assert with_record(data, "a1", "x", RECORD_A)["messages"][1][RECORD] == earlier
    assert with_record({"messages": "damaged"}, "a1", "x", RECORD_A) == {"messages": "damaged"}


def test_a_streamed_record_goes_only_to_the_output_of_its_own_message() -> None:
    kept = StreamedRecords()
    kept.keep({"chat_id": "c1", RECORD: RECORD_A}, "first")
    assert kept.take("c1", "a later message") is None  # the first stream was cancelled
    assert kept.take("c2", "first") is None
    assert kept.take("c1", "first") == RECORD_A
    assert kept.take("c1", "first") is None  # taken once
    kept.keep({"chat_id": "c1"}, "no record")  # the phase did not run: nothing kept
    kept.keep({RECORD: RECORD_A}, "no chat")
    assert kept.take("c1", "no record") is None


def test_only_the_latest_chats_are_remembered() -> None:
    kept = StreamedRecords()
    for n in range(KEPT_STREAMS + 1):
        kept.keep({"chat_id": f"c{n}", RECORD: {"n": n}}, "m")
    assert kept.take("c0", "m") is None
    assert kept.take(f"c{KEPT_STREAMS}", "m") == {"n": KEPT_STREAMS}
