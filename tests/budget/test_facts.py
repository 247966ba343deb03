"""The budget's kept facts of a chat: appended to, served to shorter histories, and handed to
each request as a snapshot that later updates leave alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from smart_context.budget.facts import MessageFacts
from smart_context.budget.tokens import counter_for
from smart_context.messages import History


def chat(roles: str) -> list[dict[str, Any]]:
    """``"uau"`` -> user, assistant, user messages with distinct ids and texts."""
    names = {"u": "user", "a": "assistant", "s": "system"}
    return [
        {"id": f"m{i}", "role": names[r], "content": f"Message {i} names Lisbon and 42."}
        for i, r in enumerate(roles)
    ]


def test_a_request_keeps_its_snapshot_while_another_extends_the_chat() -> None:
    messages = chat("ua" * 10)
    facts = MessageFacts(counter_for("gpt-4o"))
    mine = facts.update(History(messages[:11]))
    tokens, ids = mine.tokens.copy(), list(mine.str_ids)
    facts.update(History(messages))  # another request, nine messages later
    assert mine.n == 11 and mine.str_ids[:11] == ids and mine.tokens.tolist() == tokens.tolist()
    assert mine.position("m15") is None and mine.position("m10") == 10
    assert mine.mentions("lisbon").tolist() == list(range(11))


def test_a_shorter_history_is_served_from_the_kept_facts_without_reading_it_again() -> None:
    messages = chat("ua" * 10)
    facts = MessageFacts(counter_for("gpt-4o"))
    whole = facts.update(History(messages))
    earlier = facts.update(History(messages[:5]))  # a request that began before the last reply
    assert earlier.resets == whole.resets and earlier.generation == whole.generation
    assert earlier.tokens.tolist() == whole.tokens[:5].tolist()
    edited = [*messages[:3], {**messages[3], "content": "changed"}]
    assert facts.update(History(edited)).resets == whole.resets + 1


def test_a_snapshot_shares_the_kept_lists_and_reads_its_own_messages_only() -> None:
    messages = chat("uauau")
    facts = MessageFacts(counter_for("gpt-4o"))
    whole = facts.update(History(messages))
    short = facts.update(History(messages[:2]))
    # no copy of a long chat's lists per request: the snapshot holds the kept ones
    assert short.str_ids is whole.str_ids and short.keys is whole.keys
    assert short.n == 2 and short.str_ids[: short.n] == ["m0", "m1"]
    assert short.positions(["m0", "m4", "nope"]) == [0]
    assert isinstance(short.tokens, np.ndarray) and len(short.tokens) == 2
    # an edit reads the history afresh into new lists: the snapshots handed out keep theirs
    edited = facts.update(History([{**messages[0], "content": "changed"}, *messages[1:]]))
    assert edited.str_ids is not whole.str_ids and whole.keys[0] != edited.keys[0]
    assert whole.str_ids == ["m0", "m1", "m2", "m3", "m4"]


def test_a_turn_writes_its_counts_into_spare_room_and_snapshots_stay_as_they_were() -> None:
    messages = chat("ua" * 40)
    facts = MessageFacts(counter_for("gpt-4o"))
    first = facts.update(History(messages[:10]))
    counts = first.tokens.copy()
    shorter = facts.update(History(messages[:4]))  # a request that began before the last turn
    later = facts.update(History(messages[:12]))  # a turn: written past every snapshot's end
    assert np.shares_memory(first.tokens, later.tokens)  # no copy of the chat's counts
    grown = facts.update(History(messages))  # past the spare room: made again, with more
    assert first.tokens.tolist() == counts.tolist()
    assert shorter.tokens.tolist() == counts[:4].tolist()
    read_whole = MessageFacts(counter_for("gpt-4o"))
    assert grown.tokens.tolist() == read_whole.update(History(messages)).tokens.tolist()
    assert facts.lengths.tolist() == read_whole.lengths.tolist()


def test_a_filters_part_of_the_history_is_cut_from_the_whole_facts() -> None:
    from smart_context.budget.budgeter import _Names
    from smart_context.budget.facts import Part

    facts = MessageFacts(counter_for("gpt-4o")).update(History(chat("uaua")))
    part = Part(facts, np.array([0, 2, 3], dtype=np.intp))
    assert part.tokens.tolist() == facts.tokens[[0, 2, 3]].tolist()
    assert part.names([2, 0]) == ["m3", "m0"] and part.names(range(0)) == []
    names = _Names(part, np.array([2], dtype=np.intp))  # read at once; others when asked
    assert dict(names) == {2: "m3"}
    assert [names[i] for i in range(3)] == ["m0", "m2", "m3"] and names[1] == "m2"
    assert part.of(np.arange(4)).tolist() == [0, 2, 3]


class ThreadNoting:
    """A token counter that notes the thread each count ran in."""

    def __init__(self) -> None:
        self.inner = counter_for("gpt-4o")
        self.name, self.exact, self.key = self.inner.name, self.inner.exact, self.inner.key
        self.threads: list[int] = []

    def count(self, texts: Any) -> list[int]:
        import threading

        self.threads.append(threading.get_ident())
        return self.inner.count(texts)


def same_facts(a: Any, b: Any) -> bool:
    return (
        a.n == b.n
        and a.str_ids[: a.n] == b.str_ids[: b.n]
        and a.keys[: a.n] == b.keys[: b.n]
        and a.tokens.tolist() == b.tokens.tolist()
        and all(a.mentions(e).tolist() == b.mentions(e).tolist() for e in ("lisbon", "42"))
    )


async def test_a_long_run_of_new_messages_is_read_off_the_event_loop() -> None:
    """A chat met first: its many messages are read in a worker thread before the request
    takes their facts, the same facts as read on the loop; a few new ones after it are read
    on the loop."""
    import threading

    from smart_context.budget import facts as module

    messages = chat("ua" * (module.READ_AHEAD // 2 + 5))
    counter = ThreadNoting()
    facts = MessageFacts(counter)  # type: ignore[arg-type]
    await facts.read_ahead(History(messages))
    got = facts.update(History(messages))
    loop_thread = threading.get_ident()
    assert counter.threads and loop_thread not in counter.threads
    assert same_facts(got, MessageFacts(counter_for("gpt-4o")).update(History(messages)))
    more = [*messages, *chat("ua" * (module.READ_AHEAD // 2 + 7))[-2:]]
    more[-2:] = [{**m, "id": f"n{i}"} for i, m in enumerate(more[-2:])]
    counter.threads.clear()
    await facts.read_ahead(History(more))  # two new messages: left to the update
    assert not counter.threads
    grown = facts.update(History(more))
    assert counter.threads == [loop_thread] and grown.n == len(more)
    assert grown.mentions("lisbon").tolist() == list(range(len(more)))


async def test_what_was_read_ahead_is_not_taken_for_a_history_changed_since() -> None:
    """An edit between the read ahead and the request's update: the update reads the history
    as it is, not the run read before."""
    from smart_context.budget import facts as module

    messages = chat("ua" * (module.READ_AHEAD // 2 + 5))
    facts = MessageFacts(counter_for("gpt-4o"))
    await facts.read_ahead(History(messages))
    edited = [*messages[:-1], {**messages[-1], "content": "Now it says Porto instead."}]
    got = facts.update(History(edited))
    assert same_facts(got, MessageFacts(counter_for("gpt-4o")).update(History(edited)))
    assert got.mentions("porto").tolist() == [len(edited) - 1]


async def test_two_requests_on_a_chat_met_first_read_ahead_at_once_and_get_own_facts() -> None:
    """Several writers on one chat: two requests of different lengths read ahead at once (the
    later run read replaces the earlier); each update still gives exactly its own history's
    facts, and a history that no run follows is read as it is."""
    import asyncio

    from smart_context.budget import facts as module

    messages = chat("ua" * (module.READ_AHEAD // 2 + 5))
    shorter, longer = History(messages[:-2]), History(messages)
    facts = MessageFacts(counter_for("gpt-4o"))
    await asyncio.gather(facts.read_ahead(longer), facts.read_ahead(shorter))
    first = facts.update(shorter)
    second = facts.update(longer)
    assert same_facts(first, MessageFacts(counter_for("gpt-4o")).update(shorter))
    assert same_facts(second, MessageFacts(counter_for("gpt-4o")).update(longer))
    assert first.n == len(messages) - 2 and second.n == len(messages)


def test_a_calibration_step_recounts_the_tokens_and_reads_nothing_else_again(
    monkeypatch: Any,
) -> None:
    """An estimate that moves a step in place (what servers report calibrates it): the kept
    facts count again from the characters they keep, equal to facts read afresh under the new
    figure, and no message's entities are looked for again (they were most of a long chat's
    read)."""
    from smart_context.budget import facts as module
    from smart_context.budget.tokens import Estimate

    messages = [*chat("uaua"), {"id": "e", "role": "user", "content": ""}]
    estimate = Estimate()
    facts = MessageFacts(estimate)
    before = facts.update(History(messages))
    first = before.tokens.tolist()
    while not estimate.calibrate(2_000, 900):  # the server says: more tokens than estimated
        pass
    fresh = MessageFacts(Estimate(chars_per_token=estimate.chars_per_token))
    expected = fresh.update(History(messages)).tokens.tolist()
    looked: list[str] = []
    monkeypatch.setattr(module, "entities", lambda text: looked.append(text) or set())
    after = facts.use(estimate).update(History(messages))
    assert after.tokens.tolist() == expected != first
    assert not looked and after.resets == before.resets and after.owner == before.owner
    assert after.generation > before.generation  # memos over the old counts see the change
    assert after.mentions("lisbon").tolist() == [0, 1, 2, 3]
    assert before.tokens.tolist() == first  # a request's snapshot keeps its counts
    assert facts.use(estimate).update(History(messages)) is after  # no step: nothing to do
    grown = facts.update(History([*messages, *chat("uauaua")[5:]]))  # then messages are added
    assert grown.n == 6 and looked == ["Message 5 names Lisbon and 42."]


def test_another_counter_recounts_the_kept_messages_from_the_next_history() -> None:
    """A model whose tokenizer ships after one estimated (or the other way): the next update
    counts the kept messages with it, from its history's texts; a shorter history then is
    read afresh."""
    from smart_context.budget.tokens import Estimate

    messages = chat("uauau")
    facts = MessageFacts(Estimate())
    facts.update(History(messages))
    exact = counter_for("gpt-4o")
    got = facts.use(exact).update(History(messages))
    assert same_facts(got, MessageFacts(exact).update(History(messages)))
    facts.use(Estimate(chars_per_token=3.3))
    facts.use(exact)  # back before any update: counted from the history, not the estimate
    assert same_facts(facts.update(History(messages)), got)
    facts.use(Estimate())
    facts.use(exact)
    short = facts.update(History(messages[:2]))
    assert same_facts(short, MessageFacts(exact).update(History(messages[:2])))
    assert short.resets == got.resets + 1


def test_two_requests_counting_with_two_counters_on_one_chat_each_keep_their_own_counts() -> None:
    """Two models on one chat at once (two clients): each request's snapshot keeps the counts
    of the counter it was taken under while the other recounts the kept facts, and each equals
    the facts read afresh under its own counter; the chat is read once."""
    from smart_context.budget.tokens import Estimate

    messages = chat("uaua" * 3)
    estimate, exact = Estimate(chars_per_token=3.1), counter_for("gpt-4o")
    facts = MessageFacts(estimate)
    first = facts.use(estimate).update(History(messages[:10]))  # A, before the last turn
    second = facts.use(exact).update(History(messages))  # B, with its model, meanwhile
    third = facts.use(estimate).update(History(messages))  # A's next turn
    assert same_facts(first, MessageFacts(estimate).update(History(messages[:10])))
    assert same_facts(second, MessageFacts(exact).update(History(messages)))
    assert same_facts(third, MessageFacts(estimate).update(History(messages)))
    assert first.resets == second.resets == third.resets
