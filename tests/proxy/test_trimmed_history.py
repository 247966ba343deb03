"""A client that sends only the last part of a long chat (Open WebUI's compaction, LibreChat's
``maxContextTokens``, SillyTavern's context size, a small window) never erases the vault chat:
its messages are placed at the stored tail they repeat and what is new is appended; only a
real edit inside the part it sent replaces what that covers (proxy/conversation.py)."""

from __future__ import annotations

import itertools
from typing import Any

from smart_context_hosts.proxy.conversation import MAX_PREAMBLE, merge
from smart_context_hosts.proxy.relay import _Memo

NOW = "2026-11-29T09:00:00.000+00:00"


def u(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def stored_chat(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(turns):
        out.append({**u(f"question {k}"), "id": f"q{k}"})
        out.append({**a(f"answer {k}"), "id": f"a{k}", "smart_context": {"turn": k}})
    return out


def wire(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def new_ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"n{next(counter)}"


def test_the_last_ten_messages_and_a_new_one_are_appended_to_the_whole_chat() -> None:
    stored = stored_chat(10)
    merged = merge(stored, [*wire(stored[-10:]), u("question 10")], new_ids(), NOW)
    assert [m["id"] for m in merged.messages] == [*(m["id"] for m in stored), "n1"]
    assert merged.messages[:20] == stored  # ids and records as they were
    assert (merged.kept, merged.dropped, merged.added) == (20, 0, 1)


def test_a_summary_before_the_kept_tail_is_the_clients_own_and_is_not_stored() -> None:
    stored = stored_chat(10)
    summary = u("Summary of the conversation so far: questions 0 to 6 and their answers.")
    for preamble in ([summary], [summary, a("Understood.")]):
        assert len(preamble) <= MAX_PREAMBLE
        merged = merge(stored, [*preamble, *wire(stored[-6:]), u("next")], new_ids(), NOW)
        assert [m["content"] for m in merged.messages] == [m["content"] for m in stored] + ["next"]
        assert merged.dropped == 0 and merged.added == 1


def test_a_regenerated_reply_or_an_edit_inside_the_sent_part_replaces_only_what_it_covers() -> None:
    stored = stored_chat(10)
    regenerated = merge(stored, wire(stored[-5:-1]), new_ids(), NOW)  # up to question 9
    assert [m["id"] for m in regenerated.messages] == [m["id"] for m in stored[:-1]]
    assert regenerated.dropped == 1  # the reply it threw away
    tail = wire(stored[-6:])
    tail[2] = u("question 8, edited")
    edited = merge(stored, [*tail, u("more")], new_ids(), NOW)
    assert [m["id"] for m in edited.messages][:16] == [m["id"] for m in stored[:16]]
    assert [m["content"] for m in edited.messages[16:]] == [
        "question 8, edited",
        "answer 8",
        "question 9",
        "answer 9",
        "more",
    ]
    assert edited.dropped == 4


def test_a_conversation_that_repeats_nothing_stored_is_appended_never_erasing() -> None:
    stored = stored_chat(4)
    alone = merge(stored, [u("a brand new question")], new_ids(), NOW)
    assert alone.messages[:8] == stored and alone.messages[8]["content"] == "a brand new question"
    assert alone.dropped == 0
    elsewhere = merge(stored, [u("x"), a("y"), u("z")], new_ids(), NOW)
    assert elsewhere.messages[:8] == stored and elsewhere.dropped == 0 and elsewhere.added == 3


def test_a_client_that_resends_everything_still_wins_on_an_edit_of_its_first_message() -> None:
    stored = stored_chat(3)
    sent = wire(stored)
    sent[0] = u("question 0, edited")
    merged = merge(stored, [*sent, u("and?")], new_ids(), NOW)
    assert [m["content"] for m in merged.messages][:2] == ["question 0, edited", "answer 0"]
    assert merged.dropped == 6 and len(merged.messages) == 7


def test_a_tail_of_common_words_is_placed_where_it_reaches_the_end() -> None:
    stored = []
    for k in range(6):
        stored += [{**u("ok"), "id": f"u{k}"}, {**a("fine"), "id": f"a{k}"}]
    merged = merge(stored, [u("ok"), a("fine"), u("ok"), a("fine"), u("new")], new_ids(), NOW)
    assert merged.messages[:12] == stored and merged.messages[12]["content"] == "new"


def test_the_quick_way_follows_a_client_whose_window_slides() -> None:
    stored = stored_chat(6)
    memo = _Memo(wire(stored[-4:]), stored)
    sliding = [*wire(stored[-2:]), u("question 6")]
    assert memo.continued_by(sliding) == 2
    assert memo.continued_by([*wire(stored[-4:]), u("next")]) == 4
    assert memo.continued_by([u("something else")]) is None
    assert memo.continued_by(wire(stored[-2:])) is None  # nothing new


def test_a_tail_sent_back_with_other_spaces_is_still_placed() -> None:
    stored = stored_chat(8)
    tail = wire(stored[-4:])
    tail[0] = {"role": "user", "content": "  question   6 "}  # a client that trims its text
    merged = merge(stored, [*tail, u("question 8")], new_ids(), NOW)
    assert merged.messages[:16] == stored and merged.messages[16]["content"] == "question 8"
    assert merged.dropped == 0
