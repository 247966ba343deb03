"""The per-chat index of the histories requests bring: appends read only what is new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smart_context.budget.facts import MessageFacts
from smart_context.budget.tokens import Estimate
from smart_context.errors import SmartContextError
from smart_context.history_index import PROBE, HistoryIndex, HistoryIndexes
from smart_context.messages import History
from tests.conftest import Ctx, call, write_chat
from tests.fakes import LookedAt


def chat(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"m{i}", "role": "user", "content": f"text {i}"} for i in range(start, n)]


def test_an_append_reads_only_the_new_messages_and_keeps_the_lineage() -> None:
    index = HistoryIndex()
    first = index.read(chat(1000))
    more = [LookedAt(m) for m in chat(1002)]  # a fresh copy, as a host sends it
    LookedAt.reads.clear()
    second = index.read(more)
    assert second.ids == [f"m{i}" for i in range(1002)]
    assert second.contents[-1] == "text 1001"
    assert second.lineage == first.lineage
    assert LookedAt.reads["id"] <= 2 + PROBE + 2  # the new two, the first, the last, a window


def test_a_shorter_history_is_a_cut_of_the_index() -> None:
    index = HistoryIndex()
    longer = index.read(chat(50))
    shorter = index.read(chat(48))  # a request that began before the last reply was stored
    assert shorter.ids == longer.ids[:48] and len(shorter.contents) == 48
    assert shorter.lineage == longer.lineage
    assert len(longer.ids) == 50  # handed-out histories never change
    assert shorter.roles.users.tolist() == list(range(48))  # the index's roles, cut too
    assert longer.roles.users.tolist() == list(range(50))


def test_a_history_of_all_the_index_holds_shares_its_lists_and_keeps_them_as_it_grows() -> None:
    index = HistoryIndex()
    first = index.read(chat(50))
    again = index.read(chat(50))  # the same history again: nothing copied
    assert again.ids is first.ids and again.contents is first.contents
    longer = index.read(chat(52))
    assert len(first.ids) == 50 and len(first.contents) == 50  # never grown in place
    assert longer.ids[-1] == "m51" and first.ids == longer.ids[:50]


def test_the_roles_grow_with_appends_and_start_over_with_the_index() -> None:
    index = HistoryIndex()
    turns = [{"id": f"t{i}", "role": ("user", "assistant")[i % 2], "content": i} for i in range(9)]
    index.read(turns[:4])
    grown = index.read(turns)
    assert grown.roles.users.tolist() == [0, 2, 4, 6, 8]
    assert grown.roles.answers.tolist() == [1, 3, 5, 7]
    edited = index.read([{"id": "other", "role": "assistant", "content": ""}, *turns[1:]])
    assert edited.roles.users.tolist() == [2, 4, 6, 8]
    assert edited.roles.answers.tolist() == [0, 1, 3, 5, 7]


def test_an_edit_the_samples_see_starts_over() -> None:
    index = HistoryIndex()
    before = index.read(chat(20))
    edited = chat(22)
    edited[3]["content"] = "edited"
    after = index.read(edited)
    assert after.lineage != before.lineage
    assert after.contents[3] == "edited"


def test_a_deletion_starts_over() -> None:
    index = HistoryIndex()
    before = index.read(chat(20))
    after = index.read([m for m in chat(21) if m["id"] != "m5"])
    assert after.lineage != before.lineage
    assert "m5" not in after.ids and len(after.ids) == 20


def test_an_edit_the_samples_miss_is_caught_by_verify() -> None:
    n = 4 * PROBE
    index = HistoryIndex()
    index.read(chat(n))  # the window now starts at PROBE
    edited = chat(n)
    edited[3 * PROBE + 5]["content"] = "edited in place"
    missed = index.read(edited)  # samples 0, n-1 and [0, PROBE): the edit is outside them
    assert missed.contents[3 * PROBE + 5] == f"text {3 * PROBE + 5}"
    assert index.verify(edited) is False  # the background pass, after the reply
    caught = index.read(edited)
    assert caught.lineage != missed.lineage
    assert caught.contents[3 * PROBE + 5] == "edited in place"
    assert index.verify(edited) is True


def test_the_window_moves_so_every_message_is_compared_in_turn() -> None:
    n = 3 * PROBE
    index = HistoryIndex()
    index.read(chat(n))
    edited = chat(n)
    edited[2 * PROBE + 1]["content"] = "edited"
    lineages = {index.read(edited).lineage for _ in range(3)}
    assert len(lineages) == 2  # within three requests a window covered the edit


def test_another_chat_window_and_foreign_ids_are_read_whole() -> None:
    index = HistoryIndex()
    before = index.read(chat(30))
    window = index.read(chat(40, start=10))  # a host sending only its last 30 messages
    assert window.lineage != before.lineage and window.ids[0] == "m10"
    odd = index.read([{"role": "user", "content": "no id"}, {}])
    assert odd.ids == [None, None]


def test_facts_of_one_lineage_are_not_compared_again() -> None:
    index = HistoryIndex()
    facts = MessageFacts(Estimate())
    facts.update(index.read(chat(10)))
    later = index.read(chat(12))
    later.contents[0] = "changed behind the index's back"  # proves no comparison is made
    snapshot = facts.update(later)
    assert snapshot.n == 12 and facts.resets == 0
    plain = History(chat(12))  # no lineage: compared, and a difference reads it again
    plain.contents[0] = "really changed"
    facts.update(plain)
    assert facts.resets == 1


def test_indexes_keep_the_chats_seen_lately() -> None:
    indexes = HistoryIndexes(max_chats=2)
    a = indexes.read("a", chat(3))
    indexes.read("b", chat(3))
    assert indexes.read("a", chat(4)).lineage == a.lineage
    indexes.read("c", chat(3))  # "b" was the least recent
    assert indexes.read("a", chat(5)).lineage == a.lineage
    indexes.verify("nobody", chat(3))  # a chat never read: nothing to check


async def test_an_edit_in_place_is_counted_after_the_next_reply(start: Any, vault: Path) -> None:
    """Through the plugin: the samples miss an edit in the middle of a long chat; the pass
    after the reply compares the whole chat, and the request after it counts the new text."""
    n = 4 * PROBE  # windows [0, P), [P, 2P), [2P, 3P): the edit at 3.5 P is in none
    messages = chat(n)
    write_chat(vault, "long", messages)
    running = await start(settings={"budget_tokens": 1_000_000})

    async def history_tokens(history: list[dict[str, Any]]) -> int:
        ctx = await running.context("long", [dict(m) for m in history])
        return int(ctx.metadata["smart_context"]["budget"]["by_section"]["history"])

    before = await history_tokens(messages)
    await history_tokens(messages)  # the sample window moves past the start
    edited = [dict(m) for m in messages]
    edited[n - PROBE // 2]["content"] = "a much longer text " * 50
    write_chat(vault, "long", edited)
    assert await history_tokens(edited) == before  # missed by the samples of this request
    await call(running.pm.hook.pipeline_output, ctx=Ctx("long", edited))
    await running.settle()
    assert await history_tokens(edited) > before + 100


def test_distinct_ids_come_with_their_positions() -> None:
    index = HistoryIndex()
    history = index.read(chat(5))
    assert history.first is not None and history.position("m3") == 3
    assert history.position("m9") is None and history.position(["not", "hashable"]) is None
    shorter = index.read(chat(6)[:4])  # the index grew to 6; this history holds 4
    assert shorter.position("m5") is None and shorter.position("m3") == 3


def test_a_repeated_id_leaves_the_check_to_the_topic_rule() -> None:
    index = HistoryIndex()
    messages = chat(4)
    assert index.read(messages).first is not None
    repeated = [*messages, {"id": "m1", "role": "user", "content": "same id, other text"}]
    assert index.read(repeated).first is None  # from the repeat on, positions are not unique
    assert index.read(messages).first is not None  # a history before the repeat still is


def test_an_id_that_cannot_be_hashed_is_read_the_slow_way() -> None:
    index = HistoryIndex()
    odd = index.read([{"id": ["a"], "role": "user", "content": "x"}, *chat(2)])
    assert odd.first is None and odd.ids[0] == ["a"]


def test_something_other_than_a_message_is_refused_and_the_index_stays_whole() -> None:
    index = HistoryIndex()
    good = index.read(chat(3))
    with pytest.raises(SmartContextError, match="holds a str at position 4"):
        index.read([*chat(4), "not a message"])
    assert len(index.ids) == len(index.contents) == 3  # nothing of the refused history kept
    assert index.read(chat(5)).lineage == good.lineage
    swapped: list[Any] = [*chat(5)]
    swapped[0] = 42  # where a message was: a sample sees it, the history is read again
    with pytest.raises(SmartContextError, match="holds a int at position 0"):
        index.read(swapped)


async def test_a_history_with_something_odd_in_it_is_sent_as_the_host_made_it(
    start: Any, vault: Path
) -> None:
    messages: list[Any] = [*chat(3), "stray text", *chat(5, start=3)]
    write_chat(vault, "odd", [m for m in messages if isinstance(m, dict)])
    running = await start()
    ctx = await running.context("odd", list(messages))
    record = ctx.metadata["smart_context"]
    assert ctx.history == messages and record["mode"] == "full"
    assert "holds a str at position 3" in record["error"]


def test_a_pass_reads_the_real_turns_of_what_a_reply_added_only() -> None:
    from smart_context.messages import ChatTurns, turn_positions

    def talk(n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {"id": i, "role": "user" if i % 2 == 0 else "assistant", "content": f"t{i}"}
            for i in range(n)
        ]
        out[3]["notice"] = "no_model"  # the sidecar talking: no turn
        return out

    index, turns = HistoryIndex(), ChatTurns()
    at, ids = turns.of("c", index.read(talk(1000)))
    assert at == turn_positions(talk(1000)) and ids[:3] == ["0", "1", "2"] and 3 not in at
    grown = [LookedAt(m) for m in talk(1002)]
    history = index.read(grown)
    LookedAt.reads.clear()
    at, ids = turns.of("c", history)
    assert at == turn_positions(talk(1002)) and ids[-2:] == ["1000", "1001"]
    assert LookedAt.reads["role"] == 2  # the reply's two messages, not the 1,002
    # another lineage (an edit before the end) or a shorter history: read whole again
    edited = talk(1002)
    edited[0]["content"] = "changed"
    again = index.read(edited)
    assert turns.of("c", again)[0] == turn_positions(edited)
    assert turns.of("c", History(talk(10)))[0] == turn_positions(talk(10))
